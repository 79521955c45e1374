"""How the dashboard is served: the project's Streamlit settings keep it on this machine, and the
``dashboard`` verb refuses to widen that without an access control.

The slow tests start real servers (``streamlit run app.py`` as the README says, and the ``dashboard``
verb of a wheel installed into a temporary folder) on free ports and read the sockets the server's
processes listen on (psutil), then try to connect through this machine's other addresses.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from dashkit import free_port, serve

from workbench.cli import main, parse_args
from workbench.dashboard import access, server
from workbench.dashboard.paths import ENV_VAR
from workbench.errors import WorkbenchError
from workbench.workspace import ENV_VAR as WORKSPACE_ENV

REPO = Path(__file__).resolve().parent.parent
ACCESS_VARS = (
    access.TOKEN_ENV,
    access.TOKEN_FILE_ENV,
    access.AUTH_ENV,
    access.READ_ONLY_ENV,
    access.MAX_JOBS_ENV,
    access.ALLOWED_USERS_ENV,
)


@pytest.fixture
def clean_env(monkeypatch):
    for name in ACCESS_VARS:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def token_file(
    folder: Path, token: str = "t0ken-" + "a" * 26, mode: int = 0o600, name: str = "token.txt"
) -> Path:
    path = folder / name
    path.write_text(token + "\n")
    path.chmod(mode)
    return path


def listening_addresses(pid: int) -> list[tuple[str, int]]:
    """(address, port) of every listening TCP socket of ``pid`` and its children."""
    psutil = pytest.importorskip("psutil")
    root = psutil.Process(pid)
    out = []
    for proc in [root, *root.children(recursive=True)]:
        for conn in proc.net_connections(kind="inet"):
            if conn.status == psutil.CONN_LISTEN:
                out.append((conn.laddr.ip, conn.laddr.port))
    return out


def other_addresses() -> list[str]:
    """This machine's IPv4 addresses that are not loopback (where a wider bind would answer)."""
    psutil = pytest.importorskip("psutil")
    return [
        a.address
        for addrs in psutil.net_if_addrs().values()
        for a in addrs
        if a.family == socket.AF_INET and not access.is_loopback(a.address)
    ]


def assert_loopback_only(pid: int, port: int) -> None:
    sockets = listening_addresses(pid)
    assert ("127.0.0.1", port) in sockets, sockets
    assert all(access.is_loopback(ip) for ip, _ in sockets), sockets
    for address in other_addresses():
        with socket.socket() as control:  # control: a socket on every interface does answer there
            control.bind(("0.0.0.0", 0))
            control.listen()
            socket.create_connection((address, control.getsockname()[1]), timeout=2).close()
        with pytest.raises(OSError), socket.create_connection((address, port), timeout=2):
            pass


# ---------------------------------------------------------------- configuration and options


def test_project_configuration_is_local_with_xsrf_on_and_shared_by_both_entry_points() -> None:
    options = server.config_options()
    assert options["server.address"] == "127.0.0.1" and access.is_loopback(options["server.address"])
    assert options["server.enableXsrfProtection"] is True and options["server.enableCORS"] is True
    assert options["browser.gatherUsageStats"] is False and options["server.enableStaticServing"] is False
    # `streamlit run app.py` from the repository root reads the same file as the packaged entry script
    assert (REPO / ".streamlit" / "config.toml").resolve() == server.CONFIG.resolve()
    assert server.CONFIG.parent.parent == server.APP.parent
    # a pages/ folder beside the entry script would make Streamlit run it as its own multipage app
    assert not (server.APP.parent / "pages").exists() and not (REPO / "pages").exists()


def test_access_settings_from_the_environment(tmp_path) -> None:
    assert access.read_settings({}) == access.Settings()
    settings = access.read_settings(
        {
            access.READ_ONLY_ENV: "1",
            access.MAX_JOBS_ENV: "3",
            access.TOKEN_FILE_ENV: str(token_file(tmp_path)),
        }
    )
    assert settings.read_only and settings.max_jobs == 3 and settings.access_control == "token"
    assert "t0ken" not in repr(settings)
    oidc = access.read_settings(
        {access.AUTH_ENV: "oidc", access.ALLOWED_USERS_ENV: "Ann@Example.com, @team.org"}
    )
    assert oidc.allows("ann@example.com") and oidc.allows("bob@team.org")
    assert not oidc.allows("bob@example.com") and not oidc.allows("x@evilteam.org") and not oidc.allows(None)
    bad = [
        ({access.MAX_JOBS_ENV: "0"}, "at least 1"),
        ({access.MAX_JOBS_ENV: "two"}, "whole number"),
        ({access.TOKEN_ENV: "short"}, "at least 16"),
        ({access.AUTH_ENV: "ldap"}, "'token' or 'oidc'"),
        ({access.AUTH_ENV: "oidc"}, access.ALLOWED_USERS_ENV),
        ({access.AUTH_ENV: "token"}, "neither"),
        ({access.TOKEN_FILE_ENV: str(token_file(tmp_path, mode=0o644, name="open.txt"))}, "chmod 600"),
        ({access.TOKEN_FILE_ENV: str(tmp_path / "missing")}, "cannot read"),
    ]
    for env, message in bad:
        with pytest.raises(WorkbenchError, match=message):
            access.read_settings(env)
    assert [
        access.is_loopback(a)
        for a in (
            "127.0.0.1",
            "127.1.2.3",
            "::1",
            "localhost",
            "0.0.0.0",
            "",
            None,
            "10.0.0.5",
            "example.org",
        )
    ] == [True] * 4 + [False] * 5
    assert access.reach("127.0.0.1", 8501) == "this machine only: http://127.0.0.1:8501"
    assert "every network interface" in access.reach("0.0.0.0", 8501)


def test_dashboard_verb_refuses_to_open_the_network_without_access_control(
    tmp_path, clean_env, capsys
) -> None:
    cases = [
        (["--address", "0.0.0.0"], "needs an access control"),
        (["--address", ""], "needs an access control"),
        (
            ["--address", "10.1.2.3", "--token-file", str(token_file(tmp_path, mode=0o644, name="open.txt"))],
            "chmod 600",
        ),
        (["--address", "0.0.0.0", "--token-file", str(tmp_path / "nope")], "cannot read"),
        (["--address", "0.0.0.0", "--oidc"], access.ALLOWED_USERS_ENV),
        (["--max-jobs", "0"], "--max-jobs: takes a whole number >= 1"),
        (["--port", "70000"], "--port: takes a whole number in [1, 65535]"),
    ]
    for argv, message in cases:
        assert main(["dashboard", *argv]) == 1, argv
        err = capsys.readouterr().err
        assert err.startswith("error: ") and message in err and "Traceback" not in err, (argv, err)
    # what the verb would run for a team: the address asked for, the packaged settings, the token by file only
    args = parse_args(
        [
            "dashboard",
            "--address",
            "0.0.0.0",
            "--port",
            "8600",
            "--read-only",
            "--token-file",
            str(token_file(tmp_path)),
            "--max-jobs",
            "1",
        ]
    )
    from workbench.commands.dashboard import launch_from_args

    launch = launch_from_args(args)
    assert launch.argv[1:5] == ["-m", "streamlit", "run", str(server.APP)]
    assert "--server.address=0.0.0.0" in launch.argv and "--server.port=8600" in launch.argv
    assert (
        "--server.enableXsrfProtection=true" in launch.argv
        and "--browser.gatherUsageStats=false" in launch.argv
    )
    assert "--client.showErrorDetails=type" in launch.argv
    assert not any("t0ken" in a for a in launch.argv)
    assert launch.env[access.TOKEN_FILE_ENV] == str(tmp_path / "token.txt")
    assert launch.env[access.READ_ONLY_ENV] == "1" and launch.env[access.MAX_JOBS_ENV] == "1"
    local = launch_from_args(parse_args(["dashboard", "--workspace", str(tmp_path)]))
    assert "--server.address=127.0.0.1" in local.argv and "--client.showErrorDetails=type" not in local.argv
    assert access.READ_ONLY_ENV not in local.env
    assert local.env[WORKSPACE_ENV] == str(
        tmp_path.resolve()
    )  # the server (and its jobs) use the verb's workspace


# ---------------------------------------------------------------- real servers


@pytest.mark.slow
def test_streamlit_run_app_py_listens_on_loopback_only(tmp_path, clean_env) -> None:
    """The README's command, with nothing but a port (and no browser) added: the project's settings hold."""
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        "app.py",
        f"--server.port={port}",
        "--server.headless=true",
        "--server.fileWatcherType=none",
    ]
    env = {**os.environ, ENV_VAR: str(tmp_path)}
    with serve(argv, port, REPO, env, tmp_path / "streamlit.log") as running:
        assert_loopback_only(running.proc.pid, port)
    assert f"URL: http://127.0.0.1:{port}" in running.log.read_text()
    assert "Network URL" not in running.log.read_text()


@pytest.mark.slow
def test_dashboard_verb_of_an_installed_wheel_listens_on_loopback_only(tmp_path, clean_env) -> None:
    """Build the wheel, install it (no dependencies) into a folder, run its verb from another folder."""
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    shutil.copytree(REPO / "workbench", source / "workbench", ignore=shutil.ignore_patterns("__pycache__"))
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path / "dist"),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    wheel = next((tmp_path / "dist").glob("workbench-*.whl"))
    site = tmp_path / "site"
    install = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-index",
            "-q",
            "--target",
            str(site),
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    assert (site / "workbench" / "dashboard" / "entry" / ".streamlit" / "config.toml").is_file()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(site),
        "STREAMLIT_SERVER_HEADLESS": "true",
        "STREAMLIT_SERVER_FILE_WATCHER_TYPE": "none",
    }
    argv = [
        sys.executable,
        "-m",
        "workbench",
        "dashboard",
        "--port",
        str(port),
        "--workspace",
        str(elsewhere),
    ]
    with serve(argv, port, elsewhere, env, tmp_path / "dashboard.log") as running:
        psutil = pytest.importorskip("psutil")
        assert psutil.Process(running.proc.pid).cmdline()[4] == str(
            site / "workbench/dashboard/entry/app_main.py"
        )
        assert_loopback_only(running.proc.pid, port)
    log = running.log.read_text()
    assert f"dashboard: reachable from this machine only: http://127.0.0.1:{port}" in log, log


@pytest.mark.slow
def test_sigterm_to_the_dashboard_verb_stops_the_server(tmp_path, clean_env) -> None:
    """``python -m workbench dashboard`` becomes the Streamlit server (no child left behind): SIGTERM to the pid
    the shell got ends it, and nothing of it listens on the port afterwards."""
    import signal
    import time

    import psutil

    port = free_port()
    argv = [sys.executable, "-m", "workbench", "--workspace", str(tmp_path), "dashboard", "--port", str(port)]
    env = {**os.environ, "PYTHONPATH": str(REPO), "STREAMLIT_SERVER_HEADLESS": "true"}
    with serve(argv, port, tmp_path, env, tmp_path / "dashboard.log") as running:
        pid = running.proc.pid
        family = [pid, *(c.pid for c in psutil.Process(pid).children(recursive=True))]
        os.kill(pid, signal.SIGTERM)
        running.proc.wait(timeout=30)
        deadline = time.monotonic() + 15
        while any(psutil.pid_exists(p) and psutil.Process(p).status() != "zombie" for p in family):
            assert time.monotonic() < deadline, f"still running after SIGTERM: {family}"
            time.sleep(0.2)
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", port)) != 0  # nothing serves the port any more

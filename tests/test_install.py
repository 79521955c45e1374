"""Installed like any Python tool: ``pip wheel . --no-deps``, the wheel installed (``--no-deps``) into a fresh
virtual environment that sees the already-installed dependencies and pip (``--system-site-packages``), then, from an
empty folder: ``workbench --version`` (same as ``python -m workbench --version``), a tiny synthetic set, a
calibration of the demo model shipped in the wheel and a tiny sign-off. Every artifact must land under that
folder and nothing may be written under the virtual environment (its site-packages included)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

import workbench

REPO = Path(__file__).resolve().parent.parent
PYPI_LIMIT_BYTES = 100 * 10**6  # PyPI's default upload limit per file


def _sh(
    argv: list[str | Path], cwd: Path, env: dict[str, str] | None = None, timeout: float = 900
) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, f"{argv}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    return proc


def _source_copy(dest: Path) -> Path:
    """The checkout's tracked and not-ignored files (no artifacts, builds or caches), as a clean build tree."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("needs git and a git checkout to list the source files")
    listed = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPO,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``root``: size and modification time."""
    out = {}
    for path in root.rglob("*"):
        if path.is_file() or path.is_symlink():
            st = path.lstat()
            out[str(path.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return out


@pytest.mark.slow
def test_wheel_installs_into_a_fresh_venv_and_works_from_an_empty_folder(tmp_path: Path) -> None:
    from workbench.speech.tts import available_voices

    if not available_voices():
        pytest.skip("no TTS engine installed (run ./setup.sh); the tiny set is synthetic")
    started = time.perf_counter()
    src = _source_copy(tmp_path / "src")
    dist = tmp_path / "dist"
    # --no-build-isolation: the build uses the installed setuptools (nothing is downloaded)
    _sh(
        [sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation", "-w", dist, "-q"],
        cwd=src,
    )
    (wheel,) = dist.glob("workbench-*.whl")
    size = wheel.stat().st_size
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {
        "workbench/demo_model/model.safetensors",
        "workbench/demo_model/config.json",
        "workbench/demo_model/vocab.json",
        "workbench/cli.py",
    } <= names
    assert not any(n.startswith(("calib_sets/", "engines/", "reports/", "models/", "tests/")) for n in names)
    assert size < PYPI_LIMIT_BYTES
    print(f"\nwheel {wheel.name}: {size} bytes ({size / 2**20:.1f} MiB)")

    venv = tmp_path / "venv"
    # --without-pip: the installed pip (seen through --system-site-packages) installs into the venv, whose own
    # copy of pip (ensurepip) would take longer than the rest of the install; the import check below says where
    _sh([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", venv], cwd=tmp_path)
    bindir = venv / "bin"
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "WORKBENCH_WORKSPACE", "WORKBENCH_ARTIFACTS", "VIRTUAL_ENV")
    }
    env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
    # --ignore-installed: the same version is visible from the system site-packages (editable install)
    _sh(
        [bindir / "python", "-m", "pip", "install", "--no-deps", "--ignore-installed", "-q", wheel],
        cwd=tmp_path,
        env=env,
    )

    work = tmp_path / "empty"
    work.mkdir()
    imported = _sh(
        [bindir / "python", "-c", "import workbench; print(workbench.__file__)"], cwd=work, env=env
    )
    assert Path(imported.stdout.strip()).resolve().is_relative_to(venv.resolve()), imported.stdout
    assert (
        not Path(imported.stdout.strip()).resolve().is_relative_to(Path(workbench.__file__).resolve().parent)
    )
    before = _snapshot(venv)

    script = _sh([bindir / "workbench", "--version"], cwd=work, env=env).stdout
    module = _sh([bindir / "python", "-m", "workbench", "--version"], cwd=work, env=env).stdout
    assert script == module
    assert script.startswith(f"workbench {workbench.__version__} ({venv.resolve()}")
    assert f"workspace: {work.resolve()}" in script
    assert "TensorRT (tensorrt):" in script and "TensorRT-RTX" in script and "ONNX Runtime:" in script
    wide = {**env, "COLUMNS": "1000"}  # no wrapping, so the two usage lines differ only in the program name
    helps = [
        _sh(argv, cwd=work, env=wide).stdout
        for argv in (
            [bindir / "workbench", "calibrate", "--help"],
            [bindir / "python", "-m", "workbench", "calibrate", "--help"],
        )
    ]
    assert helps[0].replace("usage: workbench", "usage: python -m workbench") == helps[1]

    wb = [bindir / "workbench"]
    built = _sh(
        [*wb, "data", "build", "--name", "t", "--calib-per-condition", "1", "--eval-per-condition", "1"],
        cwd=work,
        env=env,
    )
    assert "disjoint by text: True" in built.stdout
    # the plain recipe: what is checked here is the installed tool and where it writes; the default recipe's
    # clipping search and bias correction (and its cache name) are checked in tests/test_verb_defaults.py
    calibrated = _sh([*wb, "calibrate", "--set", "t-calib", "--no-recovery"], cwd=work, env=env)
    assert "INT8 variant:" in calibrated.stdout
    signed = _sh(
        [
            *wb,
            "signoff",
            "--calib-set",
            "t-calib",
            "--eval-set",
            "t-eval",
            "--no-latency",
            "--resamples",
            "100",
            "--no-recovery",
        ],
        cwd=work,
        env=env,
    )
    assert "verdict:" in signed.stdout

    made = sorted(p.relative_to(work).as_posix() for p in work.rglob("*") if p.is_file())
    assert {p.split("/")[0] for p in made} == {"calib_sets", "engines", "reports"}, made
    assert {"calib_sets/t-calib/card.json", "calib_sets/t-eval/manifest.jsonl"} <= set(made)
    engines = [p for p in made if p.startswith("engines/")]
    # the plain recipe's cache: the method alone in its name (no recovery tags)
    for pattern in ("model.fp32.onnx", "model.fp16-", "model.int8-percentile-", "-percentile.cache"):
        assert any(pattern in p for p in engines), (pattern, engines)
    (report_dir,) = (work / "reports").glob("signoff-*")
    assert {"report.json", "report.md", "report.html"} <= {p.name for p in report_dir.iterdir()}
    for line in (
        calibrated.stdout + signed.stdout
    ).splitlines():  # every path the verbs print is in the folder
        for word in line.split():
            if word.startswith("/") and word.endswith((".onnx", ".cache", ".html")):
                assert Path(word).resolve().is_relative_to(work.resolve()), line
    after = _snapshot(venv)
    assert after == before, sorted(set(after.items()) ^ set(before.items()))[:20]
    print(f"install test: {time.perf_counter() - started:.1f} s, load average {os.getloadavg()}")

"""Workspace resolution (``--workspace`` > ``$WORKBENCH_WORKSPACE`` > current directory), every verb's artifact
folders following it, the demo model found as package data, ``--version`` and the two entry points."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from importlib import resources
from pathlib import Path

import pytest

import workbench
from workbench.cli import COMMANDS, main, parse_args, program_name
from workbench.errors import WorkbenchError
from workbench.resources import _extract, demo_model_dir
from workbench.workspace import ENV_VAR, LEGACY_ENV_VAR, AreaDefault, active, area_path, resolve_workspace

PACKAGE_DIR = Path(workbench.__file__).resolve().parent
# the smallest argv each verb parses with (required options filled with placeholders)
MINIMAL_ARGV: dict[str, list[str]] = {
    "demo": ["demo"],
    "data": ["data", "list"],
    "calibrate": ["calibrate"],
    "cache": ["cache", "list"],
    "build": ["build", "--onnx", "m.onnx"],
    "signoff": ["signoff", "--eval-set", "e"],
    "report": ["report", "--record", "r.json"],
    "compare": ["compare"],
    "search": ["search"],
    "dashboard": ["dashboard"],
    "init": ["init", "--model", "m", "--data", "d"],
    "run": ["run"],
}
GIVEN = {"onnx", "record", "workspace", "model", "data"}  # paths MINIMAL_ARGV names itself
HERE = {
    "config",
    "dir",
}  # the project file lives in the current folder: init writes it there, run reads it there


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.delenv(LEGACY_ENV_VAR, raising=False)
    return monkeypatch


def test_precedence_explicit_then_env_then_legacy_env_then_cwd(tmp_path: Path, clean_env) -> None:
    cwd, env, legacy, flag = (tmp_path / n for n in ("cwd", "env", "legacy", "flag"))
    cwd.mkdir()
    clean_env.chdir(cwd)
    assert resolve_workspace().root == cwd.resolve()
    clean_env.setenv(LEGACY_ENV_VAR, str(legacy))
    assert resolve_workspace().root == legacy.resolve()
    clean_env.setenv(ENV_VAR, str(env))
    assert resolve_workspace().root == env.resolve()
    assert resolve_workspace(flag).root == flag.resolve()
    with active(resolve_workspace(flag)):  # what a running verb made active beats the environment
        assert resolve_workspace().root == flag.resolve()
        assert area_path("engines") == flag.resolve() / "engines"
        assert area_path("engines", tmp_path / "x") == tmp_path / "x"  # an explicit folder still wins
    assert resolve_workspace().root == env.resolve()


def test_a_file_is_not_a_workspace(tmp_path: Path, clean_env, capsys: pytest.CaptureFixture[str]) -> None:
    not_a_folder = tmp_path / "file.txt"
    not_a_folder.write_text("x")
    with pytest.raises(WorkbenchError, match="is a file, not a folder"):
        resolve_workspace(not_a_folder)
    assert main(["--workspace", str(not_a_folder), "data", "list"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: workspace ") and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("verb", sorted(COMMANDS))
def test_every_verb_puts_its_artifact_folders_under_the_workspace(
    verb: str, tmp_path: Path, clean_env
) -> None:
    """Before and after the verb, and from the environment: no default is left pointing anywhere else."""
    ws = tmp_path / "ws"
    argv = MINIMAL_ARGV[verb]
    clean_env.setenv(ENV_VAR, str(tmp_path / "from-env"))
    for args, root in (
        (parse_args(["--workspace", str(ws), *argv]), ws),
        (parse_args([*argv, "--workspace", str(ws)]), ws),
        (parse_args(argv), tmp_path / "from-env"),
    ):
        assert args.workspace.root == root.resolve()
        assert not [k for k, v in vars(args).items() if isinstance(v, AreaDefault)]
        paths = {k: v for k, v in vars(args).items() if isinstance(v, Path) and k not in GIVEN | HERE}
        for (
            key,
            path,
        ) in paths.items():  # no verb defaults --model to a path: it is resolved when the verb runs
            assert path.resolve().is_relative_to(root.resolve()), (verb, key, path)
        # report writes beside its record; dashboard hands the workspace itself to the server (its own test);
        # init writes only the project file, in the current folder
        assert verb in ("report", "dashboard", "init") or paths, f"{verb} has no artifact folder option"


def test_explicit_folder_flags_still_win(tmp_path: Path, clean_env) -> None:
    args = parse_args(
        [
            "--workspace",
            str(tmp_path / "ws"),
            "demo",
            "--root",
            str(tmp_path / "sets"),
            "--engines-root",
            str(tmp_path / "eng"),
            "--reports-root",
            str(tmp_path / "rep"),
        ]
    )
    assert (args.root, args.engines_root, args.reports_root) == (
        tmp_path / "sets",
        tmp_path / "eng",
        tmp_path / "rep",
    )
    args = parse_args(["cache", "--root", str(tmp_path / "eng"), "list"])
    assert args.root == tmp_path / "eng"
    args = parse_args(["data", "build", "--workspace", str(tmp_path / "ws")])  # after a nested action too
    assert args.root == (tmp_path / "ws").resolve() / "calib_sets"


def test_verbs_read_and_write_in_the_workspace_given_on_the_command_line(
    tmp_path: Path, clean_env, speech_like, capsys: pytest.CaptureFixture[str]
) -> None:
    from dashkit import write_unit_set

    ws = tmp_path / "ws"
    clean_env.chdir(tmp_path)
    write_unit_set(ws / "calib_sets" / "unit-calib", ["THE CAT SAT", "A DOG RAN"], speech_like)
    assert main(["--workspace", str(ws), "data", "list"]) == 0
    assert "unit-calib" in capsys.readouterr().out
    assert main(["data", "show", "unit-calib", "--workspace", str(ws)]) == 0
    assert main(["data", "show", "unit-calib"]) == 1  # the current directory is another workspace
    assert f"no speech set at {tmp_path.resolve() / 'calib_sets' / 'unit-calib'}" in capsys.readouterr().err
    assert not (tmp_path / "calib_sets").exists()


def test_demo_model_is_package_data_found_through_importlib_resources(tmp_path: Path) -> None:
    from workbench.commands.options import model_or_demo

    folder = demo_model_dir()
    assert folder == Path(resources.files("workbench") / "demo_model")
    assert folder.resolve().is_relative_to(PACKAGE_DIR)
    assert {"config.json", "vocab.json", "model.safetensors"} <= {p.name for p in folder.iterdir()}
    args = parse_args(["calibrate", "--engines", str(tmp_path)])
    assert args.model is None  # a left-out --model is the demo model, said at run time
    assert model_or_demo(args, "calibrated")[0].startswith("no --model: the embedded demo model (")
    assert Path(args.model) == folder


def test_resource_folder_is_extracted_when_not_on_the_file_system(tmp_path: Path) -> None:
    archive = tmp_path / "pkg.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("pkg/demo_model/config.json", '{"a": 1}')
        zf.writestr("pkg/demo_model/vocab.json", "{}")
    folder = _extract(zipfile.Path(archive, "pkg/demo_model/"))
    assert folder.is_dir() and (folder / "config.json").read_text() == '{"a": 1}'
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "vocab.json"]


def test_version_lists_back_ends_and_needs_none_of_them(tmp_path: Path) -> None:
    """``--version`` with ONNX Runtime and both TensorRT modules made unimportable still works."""
    ok = subprocess.run(
        [sys.executable, "-m", "workbench", "--version"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith(f"workbench {workbench.__version__} ")
    for name in ("TensorRT (tensorrt):", "TensorRT-RTX (tensorrt_rtx_bindings):", "ONNX Runtime:"):
        assert name in ok.stdout
    import onnxruntime

    assert f"ONNX Runtime: {onnxruntime.__version__}" in ok.stdout and "CPUExecutionProvider" in ok.stdout
    assert f"workspace: {tmp_path.resolve()}" in ok.stdout
    blocked = (
        "import sys\nfor m in ('onnxruntime', 'tensorrt', 'tensorrt_rtx_bindings'): sys.modules[m] = None\n"
        "from workbench.cli import main\nmain(['--version'])"
    )
    none = subprocess.run(
        [sys.executable, "-c", blocked], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert none.returncode == 0, none.stderr
    assert none.stdout.count(": not installed") == 3, none.stdout


def test_console_script_name_and_module_name() -> None:
    assert program_name("/venv/bin/workbench") == "workbench"
    assert program_name("/x/workbench/__main__.py") == "python -m workbench"


def test_dashboard_workspace_argument_sets_the_environment(tmp_path: Path, clean_env) -> None:
    pytest.importorskip("streamlit")
    from workbench.dashboard.navigation import apply_workspace_argument
    from workbench.dashboard.paths import artifact_roots

    clean_env.setenv(ENV_VAR, "recorded")  # so that monkeypatch restores the variable set below
    clean_env.delenv(ENV_VAR)
    apply_workspace_argument(["--other", "1"])
    assert ENV_VAR not in os.environ
    apply_workspace_argument(["--workspace", str(tmp_path / "dash")])
    assert artifact_roots().root == (tmp_path / "dash").resolve()

"""Command line: --help lists every verb, user errors exit 1 with one line and no traceback,
``data build/show/list`` and ``demo`` work end to end on small inputs."""

from __future__ import annotations

import subprocess
import sys

import pytest

from workbench.cli import COMMANDS, main


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "workbench", *args], capture_output=True, text=True, timeout=120)


def test_help_lists_every_verb_with_its_purpose():
    proc = _run("--help")
    assert proc.returncode == 0, proc.stderr
    flat = " ".join(proc.stdout.split())  # argparse wraps long purposes over lines
    for verb, (_, purpose) in COMMANDS.items():
        assert verb in proc.stdout and " ".join(purpose.split()) in flat
    assert {"demo", "data"} <= set(COMMANDS)


def test_data_show_missing_set_exits_1_without_traceback(tmp_path):
    proc = _run("data", "show", "no-such-set")
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: no speech set at ")
    assert "build one with 'python -m workbench data build'" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("argv,message", [
    (["data", "build", "--calib-per-condition", "0"], "at least 1"),
    (["data", "build", "--source", "folder"], "needs --path"),
    (["data", "build", "--name", "bad name!"], "may hold only"),
    (["data", "build", "--min-seconds", "5", "--max-seconds", "2"], "min <= opt <= max"),
    (["data", "build", "--source", "folder", "--path", "/nonexistent/folder"], "does not exist"),
    (["demo", "--calib-per-condition", "0"], "at least 1"),
])
def test_user_errors_exit_1(argv, message, capsys, tmp_path):
    assert main(argv + ["--root", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err
    assert not list(tmp_path.iterdir())  # nothing half-written


def test_data_show_and_list(tiny_sets, tiny_root, capsys):
    assert main(["data", "show", "tiny-calib", "--root", str(tiny_root)]) == 0
    out = capsys.readouterr().out
    assert "| condition | short | long | total |" in out
    assert "| quiet | 2 | 2 | 4 |" in out and "| total | 6 | 6 | 12 |" in out
    assert tiny_sets.calib.content_hash[:12] in out
    assert main(["data", "show", str(tiny_sets.eval.path)]) == 0
    assert "| total | 3 | 3 | 6 |" in capsys.readouterr().out
    assert main(["data", "list", "--root", str(tiny_root)]) == 0
    out = capsys.readouterr().out
    assert "tiny-calib" in out and "tiny-eval" in out


def test_data_build_from_folder(tmp_path, write_wav, speech_like, capsys):
    folder = tmp_path / "audio"
    for i in range(12):
        speaker = f"spk{i % 4}"
        write_wav(folder / speaker / f"c{i}.wav", speech_like(1.5 if i % 2 else 5.0, seed=i))
        (folder / speaker / f"c{i}.txt").write_text(f"clip number {'one ' * (i + 1)}")
    root = tmp_path / "sets"
    argv = ["data", "build", "--source", "folder", "--path", str(folder), "--name", "fold",
            "--calib-per-condition", "2", "--eval-per-condition", "2", "--root", str(root)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "fold-calib" in out and "fold-eval" in out and "disjoint by text: True, by speaker: True" in out
    assert sorted(p.name for p in root.iterdir()) == ["fold-calib", "fold-eval"]


def test_demo_runs_its_steps(tmp_path, capsys):
    from workbench.commands.demo import STEPS
    from workbench.speech.tts import available_voices

    if not available_voices():
        pytest.skip("no TTS engine installed (run ./setup.sh)")
    engines = tmp_path.parent / f"{tmp_path.name}-engines"
    argv = ["demo", "--calib-per-condition", "2", "--eval-per-condition", "2", "--root", str(tmp_path),
            "--engines-root", str(engines), "--reports-root", str(engines / "reports"), "--quick"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    for number, step in enumerate(STEPS, 1):
        assert f"[{number}/{len(STEPS)}] {step.name}" in out
    assert "demo-calib" in out and "demo-eval" in out and "| total | 3 | 3 | 6 |" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo-calib", "demo-eval"]
    assert list(engines.glob("*/model.int8-percentile-*.onnx")) and list(engines.glob("*/calib-*.cache"))
    assert (engines / "reports" / "demo-signoff" / "report.html").exists() and "verdict" in out

"""Usage errors (unknown verb, bad option value, missing or unknown argument) are one ``error:`` line and exit
status 1 like every other user error, checked while the arguments are parsed; ``--help`` still exits 0."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.cli import main

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "workbench", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env=env,
    )


@pytest.mark.parametrize(
    "argv,message",
    [
        (["bogus"], "argument <command>: invalid choice: 'bogus'"),
        (
            ["calibrate", "--method", "bogus"],
            "python -m workbench calibrate: argument --method: invalid choice",
        ),
        (["data"], "python -m workbench data: the following arguments are required: <action>"),
        (["cache", "prune", "--nope"], "unrecognized arguments: --nope"),
        (["signoff", "--resamples", "x"], "argument --resamples: takes a whole number >= 100, got 'x'"),
        (["signoff", "--resamples", "0"], "argument --resamples: takes a whole number >= 100, got '0'"),
        (["search", "--resamples", "5"], "argument --resamples: takes a whole number >= 100, got '5'"),
        (["signoff", "--warmup", "two"], "argument --warmup: takes a whole number >= 0, got 'two'"),
    ],
)
def test_usage_error_is_one_error_line_and_exit_1(argv, message, tmp_path):
    proc = _run(*argv, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], proc.stderr
    assert "usage:" not in proc.stderr + proc.stdout and "Traceback" not in proc.stderr
    assert "--help'" in lines[0]  # says where to look next
    assert list(tmp_path.iterdir()) == []  # refused before anything was written


def test_help_still_exits_0_and_prints_usage(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["data", "import", "--help"])
    assert exit_info.value.code == 0 and "usage: " in capsys.readouterr().out


def test_no_verb_prints_help_and_exits_0(capsys):
    assert main([]) == 0 and "<command>" in capsys.readouterr().out


def test_resamples_checked_before_any_work_in_the_signoff_job(tmp_path):
    """A job file or the dashboard reaches the sign-off job without the parser: its check refuses too."""
    from workbench.errors import WorkbenchError
    from workbench.jobs.signoff import SignoffInputs, check

    with pytest.raises(WorkbenchError, match="--resamples must be at least 100, got 0"):
        check(SignoffInputs(eval_set=tmp_path / "none", out_dir=tmp_path / "r", resamples=0))

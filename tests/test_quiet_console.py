"""A verb's console carries the workbench's own lines only: a real ``calibrate`` (the tiny random Wav2Vec2 on the
tiny calibration set, with bias correction) in a subprocess prints no line of the third-party chatter it used to
(transformers' "Loading weights" bar and warnings, ONNX Runtime's "Config with key ... already exists", KenLM's
loading lines, Python warnings), and with ``--no-progress`` no progress bar either."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.model.synthetic import save_random_wav2vec2

# lines (or fragments) the libraries the workbench drives print on their own
THIRD_PARTY = (
    "Loading weights",
    "Config with key",
    "already exists",
    "Loading the LM",
    "Reading ",
    "----5---10",
    "Unigrams and labels",
    "Warning:",
    "warnings.warn",
    "[W:onnxruntime",
    "it/s]",
)


@pytest.mark.slow
def test_calibrate_prints_no_third_party_line_and_no_bar_with_no_progress(tmp_path: Path, tiny_sets) -> None:
    model = save_random_wav2vec2(tmp_path / "tiny", "tiny", seed=0)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    argv = [sys.executable, "-m", "workbench", "calibrate", "--model", str(model), "--set"]
    argv += [str(tiny_sets.calib.path), "--engines", str(tmp_path / "engines"), "--method", "percentile"]
    argv += ["--bias-correction", "--no-progress"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-2000:]
    assert "int8" in done.stdout.lower()  # the verb's own lines are there
    said = [line for line in out.splitlines() if any(t in line for t in THIRD_PARTY)]
    assert not said, said
    assert "clip/s" not in out and "tensor/s" not in out  # no progress bar

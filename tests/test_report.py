"""Sign-off report: end-to-end signoff on ONNX candidates, re-render, refusal when inputs changed or the
record was edited, and the HTML rendered by headless Chromium into a non-blank screenshot."""

from __future__ import annotations

import base64
import io
import json
import shutil
import subprocess

import numpy as np
import pytest
from evalkit import DEFAULT_MODEL, constant_ctc_onnx, write_small_set

from workbench.cli import main
from workbench.errors import WorkbenchError
from workbench.evaluate.latency import LatencyConfig
from workbench.jobs.signoff import SignoffInputs
from workbench.jobs.signoff import run as run_signoff
from workbench.report.plots import pareto_front
from workbench.report.record import load_record, require_unchanged_inputs
from workbench.workspace import ENV_VAR

TEXTS = [
    "HELLO WORLD",
    "HELLO WORLD AGAIN",
    "HELLO WORLD",
    "GOODBYE WORLD",
    "HELLO WORLD",
    "HELLO THERE WORLD",
]


@pytest.fixture
def signed(tmp_path, speech_like, monkeypatch):
    """A record made in a workspace at ``tmp_path`` (sets in calib_sets/, ONNX files in engines/); ``report``
    only reads a record's inputs inside the workspace, so ``$WORKBENCH_ARTIFACTS`` points there."""
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    (tmp_path / "engines").mkdir()
    sset = write_small_set(tmp_path / "calib_sets", TEXTS, speech_like)
    fp32 = constant_ctc_onnx(tmp_path / "engines" / "fp32.onnx", "HELLO WORLD")
    bad = constant_ctc_onnx(tmp_path / "engines" / "int8.onnx", "HELLO")  # drops a word everywhere: must fail
    sens = tmp_path / "engines" / "sensitivity.json"
    sens.write_text(
        json.dumps(
            {
                "format": "workbench-sensitivity/1",
                "layers": [{"name": f"encoder.layer.{i}", "score": 1.0 / (i + 1)} for i in range(6)],
            }
        )
    )
    inputs = SignoffInputs(
        candidates=[("fp32", fp32), ("int8", bad)],
        eval_set=sset,
        model=DEFAULT_MODEL,
        out_dir=tmp_path / "reports" / "signoff",
        latency=LatencyConfig((1, 2), 1, 3),
        sensitivity=sens,
        threads=1,
        resamples=300,
        target="ort-cpu",
    )  # timed on the target: a winner may be picked
    result = run_signoff(inputs)
    return tmp_path, result.record, result.paths


def test_signoff_record_verdicts_and_provenance(signed):
    _tmp_path, record, paths = signed
    assert all(p.is_file() for p in paths.values())
    assert load_record(paths["record"])["record_sha256"] == record["record_sha256"]
    verdicts = {v["candidate"]: v for v in record["verdicts"]}
    assert verdicts["fp32"]["passed"] and not verdicts["int8"]["passed"]
    assert "overall" in verdicts["int8"]["summary"]
    assert record["recommendation"] == "fp32"
    roles = {a["role"] for a in record["provenance"]["artifacts"]}
    assert {"evaluation set", "candidate fp32", "candidate int8", "sensitivity"} <= roles
    assert "onnxruntime" in record["provenance"]["packages"] and record["provenance"]["machine"]["cpu"]
    md = paths["markdown"].read_text()
    assert "SHIP fp32" in md and "Text normalisation" in md and "| int8 |" in md
    html = paths["html"].read_text()
    assert html.count("data:image/png;base64,") == 3  # WER vs latency, per condition, sensitivity


def test_report_rerenders_and_refuses_changed_inputs(signed, capsys):
    tmp_path, _record, paths = signed
    paths["html"].unlink()
    assert main(["report", "--record", str(paths["record"])]) == 0
    assert paths["html"].is_file() and "SHIP fp32" in capsys.readouterr().out
    # change one input artifact: a candidate ONNX file
    constant_ctc_onnx(tmp_path / "engines" / "int8.onnx", "GOODBYE")
    with pytest.raises(WorkbenchError, match="candidate int8.*changed"):
        require_unchanged_inputs(load_record(paths["record"]))
    assert main(["report", "--record", str(paths["record"])]) == 1
    assert "refusing to render" in capsys.readouterr().err


def test_report_refuses_edited_record_and_missing_input(signed, capsys):
    tmp_path, record, paths = signed
    edited = dict(record, recommendation="int8")
    paths["record"].write_text(json.dumps(edited))
    assert main(["report", "--record", str(paths["record"])]) == 1
    assert "edited" in capsys.readouterr().err
    paths["record"].write_text(json.dumps(record))
    shutil.rmtree(tmp_path / "calib_sets" / "unit-eval")
    assert main(["report", "--record", str(paths["record"])]) == 1
    assert "missing" in capsys.readouterr().err


@pytest.mark.parametrize("content", [b"\xff\xfe not utf-8", b'{"schema": ', b"[1, 2]"])
def test_a_damaged_record_file_is_a_user_error(tmp_path, content: bytes) -> None:
    path = tmp_path / "report.json"
    path.write_bytes(content)
    with pytest.raises(WorkbenchError, match="run signoff again|not a sign-off record"):
        load_record(path)


def test_pareto_front():
    pts = [("a", 10.0, 5.0), ("b", 20.0, 4.0), ("c", 30.0, 4.5), ("d", 5.0, 9.0)]
    assert pareto_front(pts) == ["d", "a", "b"]


def _image(data: bytes) -> np.ndarray:
    import matplotlib.image as mpimg

    return mpimg.imread(io.BytesIO(data), format="png")


def _find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if found := shutil.which(name):
            return found
    return None


@pytest.mark.slow
def test_html_renders_in_headless_chromium(signed):
    tmp_path, _record, paths = signed
    html = paths["html"].read_text()
    for chunk in html.split("data:image/png;base64,")[1:]:  # every embedded plot is a non-blank image
        img = _image(base64.b64decode(chunk.split("'", 1)[0]))
        assert img.shape[0] > 100 and img.std() > 0.05
    browser = _find_chromium()
    if browser is None:
        pytest.skip("no chromium here (apt-get install -y chromium)")
    shot = tmp_path / "shot.png"
    proc = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--window-size=1200,3000",
            f"--screenshot={shot}",
            paths["html"].as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0 and shot.is_file(), proc.stderr[-2000:]
    img = _image(shot.read_bytes())
    assert img.shape[0] >= 1000 and img.shape[1] >= 1000
    rgb = img[..., :3]
    assert rgb.std() > 0.05  # not a blank page
    # plots drawn: the image holds matplotlib's default blue/orange bar colours somewhere
    blue = np.all(np.abs(rgb - np.array([0.122, 0.467, 0.706])) < 0.05, axis=-1).sum()
    assert blue > 500

"""benchmarks/anchors.py without its heavy runs: a real sign-off record + tool runs -> rows and table (judged,
failed and skipped rows keep their reason), and ModelOpt's venv whose install fails -> skipped rows with why."""

from __future__ import annotations

import argparse

import pytest

from benchkit import load_benchmark


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("anchors.py", "anchors_benchmark")


def test_record_and_runs_become_rows_and_a_table(bench, dash_artifacts) -> None:
    from anchors_bench.rows import anchor_rows, skipped_run, table_lines

    record = dash_artifacts.record
    runs = [{"job": "fp32", "kind": "fp32", "setting": "FP32 export"},
            {"job": "int8-entropy", "kind": "workbench", "setting": "calibrate entropy", "wall_s": 3.5,
             "peak_rss_mb": 812.0},
            {"job": "ort-entropy", "kind": "ort", "setting": "quantize_static Entropy, natural clips",
             "error": "exit 1 under a 10 GB address-space cap: ['ValueError: inhomogeneous shape']"},
            {"job": "fp16", "kind": "modelopt", "setting": "defaults", "wall_s": 9.0, "peak_rss_mb": 2048.0},
            skipped_run("modelopt-fp32-rest", "modelopt", "rest FP32", "pip install failed: no network")]
    rows = anchor_rows(record, runs)
    assert [r["candidate"] for r in rows] == [r["job"] for r in runs]
    by = {r["candidate"]: r for r in rows}
    acc = record["accuracy"]["candidates"]
    for name in ("fp32", "int8-entropy", "fp16"):
        row = by[name]
        assert row["status"] == "judged"
        assert row["wer"]["estimate"] == pytest.approx(100 * acc[name]["overall"]["wer"]["estimate"], abs=1e-3)
        passed = next(v["passed"] for v in record["verdicts"] if v["candidate"] == name)
        assert row["verdict"] == ("PASS" if passed else "FAIL")
        assert set(row["per_condition"]) == set(acc[name]["groups"]["condition"])
        points = [p["p50_ms"] for p in record["latency"][name]["points"] if p["batch"] == 1]
        assert row["latency_ms"] == pytest.approx(sum(points) / len(points), abs=0.01)
    assert by["int8-entropy"]["delta"]["high"] == pytest.approx(
        100 * acc["int8-entropy"]["overall"]["delta"]["high"], abs=1e-3)
    assert by["int8-entropy"]["tool"] == "workbench" and by["fp16"]["tool"] == "ModelOpt"
    assert by["ort-entropy"]["status"].startswith("failed: ") and "inhomogeneous" in by["ort-entropy"]["status"]
    assert by["modelopt-fp32-rest"]["status"] == "skipped: pip install failed: no network"
    lines = table_lines(rows)
    assert len(lines) == 2 + len(rows)
    assert "| 3.5 | 812 |" in next(line for line in lines if line.startswith("| int8-entropy"))
    assert "skipped: pip install failed" in next(line for line in lines if line.startswith("| modelopt-fp32-rest"))


def test_modelopt_that_cannot_install_gives_skipped_rows_with_the_reason(bench, tmp_path) -> None:
    from anchors_bench.rows import anchor_rows

    args = argparse.Namespace(modelopt=True, venv=tmp_path / "venv", pip_arg=["--no-index"])
    runs, info = bench.modelopt_runs(args, tmp_path, tmp_path / "model.fp32.onnx")
    assert [r["job"] for r in runs] == list(bench.MODELOPT_SETTINGS)
    assert info["reason"] and "pip install 'nvidia-modelopt[onnx]'" in info["reason"]
    assert not list((tmp_path / "venv").glob("lib/python*/site-packages/modelopt"))  # nothing half-installed
    rows = anchor_rows(None, runs)
    assert all(r["status"] == "skipped: " + info["reason"] for r in rows)
    assert all(r["tool"] == "ModelOpt" for r in rows)

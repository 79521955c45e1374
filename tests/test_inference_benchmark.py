"""Smoke test of benchmarks/inference.py on a tiny configuration: real runs, table printed, JSON written."""

from __future__ import annotations

import json

import pytest
from benchkit import load_benchmark


def load_script():
    return load_benchmark("inference.py", "inference_benchmark")


def test_tiny_grid_writes_table_and_json(tmp_path, capsys) -> None:
    bench = load_script()
    out = tmp_path / "results" / "inference.json"
    code = bench.main(
        [
            "--models",
            "tiny",
            "--seconds",
            "0.5,1",
            "--batch",
            "1,2",
            "--variants",
            "fp32,int8,int8-cpu",
            "--warmup",
            "1",
            "--repeats",
            "2",
            "--calib-set",
            "",
            "--calib-clips",
            "2",
            "--accuracy-clips",
            "0",
            "--interleave-points",
            "2x0.5",
            "--interleave-rounds",
            "2",
            "--work",
            str(tmp_path / "work"),
            "--out",
            str(out),
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    record = json.loads(out.read_text())
    assert record["machine"]["usable_cores"] >= 1 and record["machine"]["cpu"]
    assert "onnxruntime" in record["packages"] and "TensorRT" in record["tensorrt"]
    rows = record["rows"]
    assert {(r["variant"], r["clip_s"], r["batch"]) for r in rows} == {
        (v, s, b) for v in ("fp32", "int8", "int8-cpu") for s in (0.5, 1.0) for b in (1, 2)
    }
    for row in rows:
        assert row["p50_ms"] > 0 and row["p99_ms"] >= row["p50_ms"] and row["peak_rss_mb"] > 0
        assert row["clips_per_s"] == pytest.approx(row["batch"] / (row["p50_ms"] / 1000))
        if row["variant"] == "fp32":
            assert row["x_fp32"] == pytest.approx(1.0)
        line = next(
            ln
            for ln in printed.splitlines()
            if ln.split()[:4] == ["tiny", row["variant"], f"{row['clip_s']:g}s", str(row["batch"])]
        )
        assert f"{row['p50_ms']:.1f}" in line
    cpu = record["speedups_vs_fp32"]["int8-cpu"]["tiny"]
    assert len(cpu["points"]) == 4 and cpu["geomean"] > 0
    assert record["models"]["tiny"]["variants"]["int8-cpu"]["rewrites"]["conv_as_matmul"] > 0
    # the flavour's weights are what this CPU computes exactly, and the record says which and why
    from workbench.backends.cpu_int8 import int8_weight_type, u8s8_exact

    variant = record["models"]["tiny"]["variants"]["int8-cpu"]
    assert (variant["rewrites"]["weights"], variant["rewrites"]["weights_reason"]) == int8_weight_type("auto")
    assert variant["exact_int8"] and record["machine"]["int8_gemm"] == u8s8_exact()[1]
    assert record["config"]["calibration_clips"]["kind"].startswith("speech-like")
    (point,) = record["interleaved"]["tiny"].values()  # fp32, int8 and int8-cpu re-timed in turns
    assert point["rounds"] == 2 and set(point["x_fp32"]) == {"fp32", "int8", "int8-cpu"}
    assert point["x_fp32"]["fp32"] == 1.0 and "interleaved (tiny, 0.5s b2, 2 rounds)" in printed


def test_unknown_variant_for_backend_is_refused() -> None:
    bench = load_script()
    with pytest.raises(SystemExit):
        bench.parse_args(["--backend", "cuda", "--variants", "int8-cpu"])
    # the forced weight types are CPU variants, named only
    args = bench.parse_args(["--variants", "fp32,int8-cpu-s8,int8-cpu-u8"])
    assert args.variant_list == ["fp32", "int8-cpu-s8", "int8-cpu-u8"]
    assert "int8-cpu-s8" not in bench.parse_args([]).variant_list

"""The CPU-target benchmark's pure parts (benchmarks/cpu_target.py): the integer-GEMM path it reports, how it
judges the 0.70x target (only on a VNNI CPU, only when idle) and its table."""

from __future__ import annotations

from benchkit import load_benchmark

from workbench.backends.cpu_int8 import int8_weight_type


def load_script():
    return load_benchmark("cpu_target.py", "cpu_target_benchmark")


def winner(estimate: float, low: float, high: float) -> dict:
    return {
        "candidate": "int8-percentile-cpu",
        "wer": {"estimate": 0.05},
        "delta": {"estimate": 0.001, "low": -0.002, "high": 0.002},
        "passed": True,
        "ratio": {"1": {"estimate": estimate, "low": low, "high": high}, "8": None},
    }


def test_the_weight_path_is_what_the_cpu_flavour_uses_here() -> None:
    path = load_script().weight_path()
    weights, why = int8_weight_type("auto")
    assert path["weights"] == weights and path["why"] == why
    assert path["path"] == ("U8S8" if weights == "s8" else "U8U8")


def test_the_target_is_judged_only_on_an_idle_vnni_cpu() -> None:
    bench = load_script()
    vnni, plain = {"path": "U8S8"}, {"path": "U8U8"}
    assert bench.judge_target(winner(0.66, 0.64, 0.69), vnni, idle=True).startswith("met")
    assert bench.judge_target(winner(0.68, 0.64, 0.73), vnni, idle=True).startswith("MISSED")
    assert bench.judge_target(winner(0.66, 0.64, 0.69), vnni, idle=False).startswith("not judged")
    assert "U8U8 path" in bench.judge_target(winner(0.9, 0.8, 1.0), plain, idle=True)
    assert bench.judge_target(None, vnni, idle=True).startswith("no winner")


def test_the_table_marks_the_winner_and_shows_every_batch() -> None:
    bench = load_script()
    text = bench.table([winner(0.66, 0.64, 0.69)], (1, 8), "int8-percentile-cpu")
    assert "**int8-percentile-cpu** (winner)" in text and "x0.660 [0.640, 0.690]" in text
    assert "latency / FP32, batch 8" in text and text.count("n/a") == 1

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


def test_other_processes_count_a_busy_neighbour_not_this_process(tmp_path) -> None:
    """The idle check counts other processes' CPU time, not the benchmark's own threads (which the load average
    counts): a busy neighbour process counts, this process spinning does not."""
    import os
    import subprocess
    import sys
    import time

    common = load_benchmark("common.py", "benchmarks_common")
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 5 50 1000 7 3 2 1 0 0\ncpu0 1 2 3\n")
    ticks = os.sysconf("SC_CLK_TCK")
    assert common.busy_cpu_seconds(stat) == (100 + 5 + 50 + 3 + 2 + 1) / ticks  # idle and iowait left out

    def foreign(run) -> float:
        before = common.MachineCpu.now(include_self=True)
        run()
        return common.MachineCpu.now(include_self=True).foreign_cores(before)

    def spin() -> None:
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            pass

    spin_code = "import time\nend = time.time() + 1.0\nwhile time.time() < end: pass"
    while_spinning = foreign(spin)  # this process: the benchmark's own work
    while_child = foreign(lambda: subprocess.run([sys.executable, "-c", spin_code], check=True))  # its child
    neighbour = subprocess.Popen([sys.executable, "-c", spin_code])
    while_neighbour = foreign(lambda: time.sleep(0.9))  # measured before the neighbour is reaped: not ours
    neighbour.wait()
    # whatever else runs on the machine adds to all three alike; the neighbour adds about one core
    assert while_neighbour > max(while_spinning, while_child) + 0.5, (
        while_spinning,
        while_child,
        while_neighbour,
    )

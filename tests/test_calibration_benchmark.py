"""The calibration benchmark's bookkeeping (benchmarks/calibration.py): marginal cost and the idle rule."""

from __future__ import annotations

from benchkit import load_benchmark


def load_script():
    return load_benchmark("calibration.py", "calibration_benchmark")


def rows(load: float = 0.3, foreign: float = 0.02) -> list[dict]:
    idle = {"load_before": load, "foreign_cpu_cores": foreign, "peak_rss_mb": 900.0}
    return [
        {
            "job": "plain",
            "round": 1,
            "clips": 16,
            "wall_s": 10.0,
            "phases_s": {"session": 1.2, "inference": 8.0},
            **idle,
        },
        {"job": "ours", "round": 1, "clips": 16, "wall_s": 11.0, "phases_s": {}, **idle},
        {"job": "ours", "clips": 116, "wall_s": 66.0, "phases_s": {}, **idle},
    ]


def test_marginal_clip_without_a_large_plain_run_uses_plain_inference_per_clip() -> None:
    bench = load_script()
    summary = bench.ratios(rows())
    assert summary["ours_x_plain_median"] == 1.1
    # 55 s for 100 more clips = 0.55 s a clip, against plain's 8.0 s / 16 = 0.5 s of inference a clip
    assert abs(summary["ours_marginal_clip_x_plain"] - 1.1) < 1e-12
    assert summary["marginal_against"] == "plain's short-run inference per clip"


def test_marginal_clip_is_measured_against_the_large_plain_run() -> None:
    """(ours large - ours short) / (plain large - plain short): 55 s against 50 s for the same 100 clips."""
    bench = load_script()
    measured = rows() + [
        {
            "job": "plain",
            "clips": 116,
            "wall_s": 60.0,
            "phases_s": {},
            "load_before": 0.3,
            "foreign_cpu_cores": 0.02,
            "peak_rss_mb": 700.0,
        }
    ]
    summary = bench.ratios(measured)
    assert abs(summary["ours_marginal_clip_x_plain"] - 1.1) < 1e-12
    assert abs(summary["ours_marginal_clip_x_plain_short_inference"] - 1.1) < 1e-12
    assert summary["marginal_against"] == "large plain run"
    assert abs(measured[2]["x_plain"] - 66.0 / 60.0) < 1e-12  # the large ours run against the large plain run
    slower = rows() + [
        {
            "job": "plain",
            "clips": 116,
            "wall_s": 65.0,
            "phases_s": {},
            "load_before": 0.3,
            "foreign_cpu_cores": 0.02,
            "peak_rss_mb": 700.0,
        }
    ]
    assert (
        abs(bench.ratios(slower)["ours_marginal_clip_x_plain"] - 1.0) < 1e-12
    )  # plain's clips cost 55 s too


def test_targets_are_judged_only_on_an_idle_machine() -> None:
    bench = load_script()
    for busy in (rows(load=1.4), rows(foreign=0.6)):
        judged = bench.verdict(busy, bench.ratios(busy), bench.TARGETS)
        assert not judged["judged"] and "not idle" in judged["why"]
    quiet = rows()
    judged = bench.verdict(quiet, bench.ratios(quiet), bench.TARGETS)
    assert judged["judged"]
    assert judged["met"] == {
        "ours_wall_x_plain": True,
        "ours_peak_rss_mb": True,
        "ours_marginal_clip_x_plain": False,
        "ours_large_peak_rss_mb": True,
        "ours_marginal_clip_added_work_x_plain": False,
    }  # no inference phase: not measured


def test_marginal_clip_added_work_is_immune_to_drift_between_the_long_runs() -> None:
    """The long plain run was slow (drift): by wall the marginal clip passes, by added work it does not."""
    bench = load_script()
    idle = {"load_before": 0.3, "foreign_cpu_cores": 0.02, "peak_rss_mb": 900.0}
    measured = [
        {
            "job": "plain",
            "round": 1,
            "clips": 16,
            "wall_s": 10.0,
            "phases_s": {"session": 1.0, "inference": 8.0},
            **idle,
        },
        {
            "job": "ours",
            "round": 1,
            "clips": 16,
            "wall_s": 11.0,
            "phases_s": {"session": 1.0, "inference": 8.5},
            **idle,
        },
        # 100 more clips: plain +54 s (host slow), ours +55 s of which counting (outside inference) +5 s
        {
            "job": "plain",
            "clips": 116,
            "wall_s": 64.0,
            "phases_s": {"session": 1.0, "inference": 62.0},
            **idle,
        },
        {
            "job": "ours",
            "clips": 116,
            "wall_s": 66.0,
            "phases_s": {"session": 1.0, "inference": 58.5},
            **idle,
        },
    ]
    summary = bench.ratios(measured)
    assert abs(summary["ours_marginal_clip_x_plain"] - 55.0 / 54.0) < 1e-12
    assert abs(summary["ours_marginal_clip_added_work_x_plain"] - (1.0 + 5.0 / 54.0)) < 1e-12
    assert abs(summary["ours_inference_x_plain_large"] - 58.5 / 62.0) < 1e-12
    met = bench.verdict(measured, summary, bench.TARGETS)["met"]
    assert met["ours_marginal_clip_x_plain"] and not met["ours_marginal_clip_added_work_x_plain"]


def test_machine_cpu_sees_other_processes() -> None:
    """CPU burnt by a process that is not the measured child counts as foreign."""
    import time

    bench = load_script()
    before, start = bench.MachineCpu.now(), time.perf_counter()
    while time.perf_counter() - start < 0.3:  # this process (not a child) keeps a core busy
        pass
    assert bench.MachineCpu.now().foreign_cores(before, time.perf_counter() - start) > 0.5


def test_tiny_run_measures_both_jobs(tmp_path) -> None:
    """A real (tiny) run: both jobs run in their own processes and land in the JSON with their phases."""
    import json

    bench = load_script()
    out = tmp_path / "calibration.json"
    assert (
        bench.main(
            [
                "--jobs",
                "plain,ours",
                "--rounds",
                "1",
                "--size",
                "tiny",
                "--settle",
                "0",
                "--work",
                str(tmp_path / "work"),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    rows = {r["job"]: r for r in json.loads(out.read_text())["rows"]}
    assert "error" not in rows["plain"] and "error" not in rows["ours"]
    assert {"inference", "thresholds", "cache_write"} <= set(rows["ours"]["phases_s"])

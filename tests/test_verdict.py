"""The verdict that holds: latency ratios with intervals over paired interleaved rounds, ties within noise broken
by the stated rule, no winner picked from timings taken off the deployment target, and one verdict from two
runs of the same sign-off (the demo's sign-off on the tiny-model path: constant CTC models, a small set)."""

from __future__ import annotations

import numpy as np
import pytest
from evalkit import DEFAULT_MODEL, constant_ctc_onnx, write_small_set

from workbench.evaluate.gates import CandidateVerdict, Check
from workbench.evaluate.latency import LatencyConfig, LatencyPoint, LatencyResult
from workbench.evaluate.verdict import ACCURACY, NONE, SHIP, Candidate, decide, latency_ratio

TEXTS = [
    "HELLO WORLD",
    "HELLO WORLD AGAIN",
    "HELLO WORLD",
    "GOODBYE WORLD",
    "HELLO WORLD",
    "HELLO THERE WORLD",
]


def timed(name: str, scale: float, noise: float, seed: int, rounds: int = 15) -> LatencyResult:
    """Paired rounds around ``10 ms * scale``: a shared drift (same for every candidate, as interleaving makes
    it) times the candidate's own noise."""
    drift = 1.0 + 0.3 * np.sin(np.arange(rounds))  # load drift: hits every candidate in the same round alike
    own = np.random.default_rng(seed).normal(1.0, noise, rounds)
    samples = list(10.0 * scale * drift * own)
    p50 = float(np.median(samples))
    point = LatencyPoint(1, "short", 2.0, p50, p50, p50, p50, rounds, 1.0, samples_ms=samples)
    return LatencyResult(name, {"backend": "onnxruntime", "backend_name": "ort-cpu"}, {}, [point], 0.0, 0.0)


def passing(*names: str, failing: tuple[str, ...] = ()) -> list[CandidateVerdict]:
    return [CandidateVerdict(n, True, [Check("overall", 0.0, 0.3, True, "ok")]) for n in names] + [
        CandidateVerdict(n, False, [Check("overall", 2.0, 0.3, False, "overall: too many errors")])
        for n in failing
    ]


CANDIDATES = [
    Candidate("fp32", {"fp32": 10}, 4000),
    Candidate("fp16", {"fp16": 10}, 2000),
    Candidate("int8", {"int8": 9, "fp32": 1}, 1200),
    Candidate("mixed", {"int8": 7, "fp16": 3}, 1500),
]


def test_ratio_interval_sees_through_a_shared_drift() -> None:
    base, same, half = timed("fp32", 1.0, 0.02, 1), timed("fp16", 1.0, 0.02, 2), timed("int8", 0.5, 0.02, 3)
    tie = latency_ratio(base, same)
    assert tie.low < 1.0 < tie.high and tie.high - tie.low < 0.1  # the 30 % drift cancels in the pairs
    fast = latency_ratio(base, half)
    assert 0.45 < fast.low <= fast.estimate <= fast.high < 0.55 and fast.rounds == 15


def test_candidates_equally_fast_within_noise_are_tied_and_the_rule_breaks_the_tie() -> None:
    latencies = {
        "fp32": timed("fp32", 1.0, 0.05, 1),
        "fp16": timed("fp16", 0.99, 0.05, 2),
        "int8": timed("int8", 1.01, 0.05, 3),
    }
    decision = decide(passing("fp32", "fp16", "int8"), latencies, "fp32", CANDIDATES, "ort-cpu", "ort-cpu")
    assert decision.mode == SHIP and sorted(decision.equally_fast) == ["fp16", "fp32", "int8"]
    assert decision.recommendation == "int8"  # fewest FP32+FP16 compute layers, not the lowest p50
    assert min(latencies, key=lambda n: latencies[n].points[0].p50_ms) != "int8"
    assert any("tie broken by the stated rule" in r for r in decision.reasons)
    assert "fewest FP32+FP16" in decision.tie_break
    # fp16 vs fp32 alone: same number of float layers; fewer FP32 layers wins
    alone = decide(
        passing("fp32", "fp16", failing=("int8",)), latencies, "fp32", CANDIDATES, "ort-cpu", "ort-cpu"
    )
    assert alone.recommendation == "fp16"


def test_a_candidate_faster_beyond_the_intervals_wins_and_a_failing_one_never_does() -> None:
    latencies = {
        "fp32": timed("fp32", 1.0, 0.03, 1),
        "fp16": timed("fp16", 0.6, 0.03, 2),
        "int8": timed("int8", 0.3, 0.03, 3),
        "mixed": timed("mixed", 0.95, 0.03, 4),
    }
    decision = decide(
        passing("fp32", "fp16", "mixed", failing=("int8",)),
        latencies,
        "fp32",
        CANDIDATES,
        "ort-cuda",
        "ort-cuda",
    )
    assert decision.mode == SHIP and decision.recommendation == "fp16" and decision.equally_fast == ["fp16"]
    assert decision.ratios["fp16"].high < decision.ratios["mixed"].low
    assert any("beyond the intervals" in r for r in decision.reasons)


def test_latency_off_the_target_picks_no_winner() -> None:
    latencies = {"fp32": timed("fp32", 1.0, 0.03, 1), "fp16": timed("fp16", 0.5, 0.03, 2)}
    decision = decide(passing("fp32", "fp16"), latencies, "fp32", CANDIDATES, "tensorrt", "ort-cpu")
    assert (
        decision.mode == ACCURACY and decision.recommendation is None and decision.passing == ["fp32", "fp16"]
    )
    assert (
        "latency on the target (tensorrt) not measured" in decision.line
        and "timed on ort-cpu" in decision.line
    )
    assert decision.ratios["fp16"].estimate < 0.6  # still reported, never used to pick
    unmeasured = decide(passing("fp32"), {}, "fp32", CANDIDATES, "tensorrt", None)
    assert unmeasured.mode == ACCURACY and "latency not measured" in unmeasured.line
    nothing = decide(passing(failing=("fp32", "fp16")), latencies, "fp32", CANDIDATES, "ort-cpu", "ort-cpu")
    assert nothing.mode == NONE and nothing.recommendation is None


@pytest.fixture
def tiny_signoff(tmp_path, speech_like, monkeypatch):
    """The sign-off on the tiny-model path, runnable twice: three constant CTC candidates that all transcribe
    the same (identical WER), timed interleaved on ONNX Runtime CPU."""
    from workbench.config import EvidenceConfig
    from workbench.jobs.signoff import SignoffInputs, run
    from workbench.workspace import ENV_VAR

    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    (tmp_path / "engines").mkdir()
    sset = write_small_set(tmp_path / "calib_sets", TEXTS, speech_like)
    models = [
        (n, constant_ctc_onnx(tmp_path / "engines" / f"{n}.onnx", "HELLO WORLD"))
        for n in ("fp32", "fp16", "int8")
    ]

    def signoff(folder: str, **overrides):
        inputs = SignoffInputs(
            candidates=models,
            eval_set=sset,
            out_dir=tmp_path / "reports" / folder,
            model=DEFAULT_MODEL,
            latency=LatencyConfig((1,), 1, 5),
            threads=1,
            resamples=200,
            # six utterances: the evidence rule would call every candidate insufficient
            **{"evidence": EvidenceConfig(min_speakers=0, min_reference_words=0), **overrides},
        )
        return run(inputs)

    return signoff


def test_two_runs_of_the_signoff_give_one_verdict(tiny_signoff) -> None:
    first, second = tiny_signoff("first"), tiny_signoff("second")
    samples = [[p["samples_ms"] for p in r.record["latency"]["fp16"]["points"]] for r in (first, second)]
    assert samples[0] != samples[1]  # the timings differ from run to run ...
    for result in (first, second):  # ... the verdict does not
        decision = result.record["decision"]
        assert decision["mode"] == ACCURACY and result.recommendation is None
        assert decision["line"] == (
            "ACCURACY SIGN-OFF: fp32, fp16, int8 pass the WER gates; latency on the target "
            "(tensorrt) not measured (timed on ort-cpu), no winner picked"
        )
        assert set(decision["ratios"]) == {"fp32", "fp16", "int8"}
        backend = result.record["backend"]
        assert (
            backend["backend"] == "ort-cpu"
            and backend["target"] == "tensorrt"
            and backend["device"].startswith("cpu")
        )
        for lat in result.record["latency"].values():
            assert lat["backend"]["backend_name"] == "ort-cpu" and lat["backend"]["device"].startswith("cpu")
            assert lat["config"]["interleaved_with"] == ["fp32", "fp16", "int8"]
            assert all(len(p["samples_ms"]) == p["repeats"] == 5 for p in lat["points"])
    md = first.paths["markdown"].read_text()
    assert (
        "# Precision sign-off: ACCURACY SIGN-OFF" in md and "Verdict rule:" in md and "fewest FP32+FP16" in md
    )
    assert "## Latency ratio to the baseline" in md and "Measured on ort-cpu" in md
    assert first.lines()[-1] == "verdict: " + first.record["decision"]["line"]


def test_signoff_on_the_target_ships_by_the_rule(tiny_signoff) -> None:
    result = tiny_signoff("on-target", target="ort-cpu")
    decision = result.record["decision"]
    assert decision["mode"] == SHIP and result.recommendation in decision["equally_fast"]
    assert result.recommendation == decision["equally_fast"][0]  # identical files: the order given decides

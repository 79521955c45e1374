"""Evaluation: WER on hand-computed cases, bootstrap behaviour, paired deltas, gates, transcription and
latency through a real ONNX Runtime session."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from evalkit import DEFAULT_MODEL, constant_ctc_onnx, write_small_set

from workbench.config import EVIDENCE_MAX_FACTOR
from workbench.errors import WorkbenchError
from workbench.evaluate.accuracy import compare_accuracy
from workbench.evaluate.bootstrap import blocks_for, paired_delta_interval, wer_interval
from workbench.evaluate.gates import GateConfig, evidence_needed, judge, load_gate_config
from workbench.evaluate.latency import (
    LatencyConfig,
    LatencyPoint,
    LatencyResult,
    bucket_clips,
    measure_latency,
)
from workbench.evaluate.transcribe import transcribe_set
from workbench.evaluate.wer import corpus_wer, score_utterance, score_utterances
from workbench.model.features import normalise_audio
from workbench.speech.records import Utterance


@pytest.mark.parametrize(
    "ref,hyp,s,d,i,n",
    [
        ("the cat sat on the mat", "the cat sat on the mat", 0, 0, 0, 6),
        ("the cat sat on the mat", "the bat sat on mat", 1, 1, 0, 6),  # cat->bat, drop 'the'
        ("a b c", "a x c d", 1, 0, 1, 3),
        ("hello world", "", 0, 2, 0, 2),
        ("", "oops", 0, 0, 1, 0),
        ("Hello, World!", "hello world", 0, 0, 0, 2),  # normalisation: case + punctuation
        ("don't  stop-now", "DONT stop now", 1, 0, 0, 3),  # hyphen splits, apostrophe kept
    ],
)
def test_wer_hand_computed(ref, hyp, s, d, i, n):
    e = score_utterance("x", ref, hyp)
    assert (e.substitutions, e.deletions, e.insertions, e.reference_words) == (s, d, i, n)


def test_corpus_wer_is_total_errors_over_total_words():
    scores = score_utterances(["a", "b"], ["one two three four", "five"], ["one two three four", "six seven"])
    # utterance b: 1 substitution + 1 insertion over 1 word; corpus: 2 errors / 5 words
    assert corpus_wer(scores) == pytest.approx(2 / 5)
    assert np.isnan(corpus_wer([]))


def _simulate(n_utts: int, p: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    words = rng.integers(4, 16, size=n_utts)
    return rng.binomial(words, p).astype(float), words.astype(float)


def test_bootstrap_interval_shrinks_with_more_utterances():
    rng = np.random.default_rng(1)
    widths = {}
    for n in (25, 400):
        e, w = _simulate(n, 0.1, rng)
        iv = wer_interval(e, w, resamples=1000, seed=0)
        assert iv.low <= iv.estimate <= iv.high
        widths[n] = iv.high - iv.low
    assert widths[400] < 0.5 * widths[25]  # ~ 1/sqrt(16) = 0.25 expected


def test_bootstrap_interval_covers_true_wer_in_simulation():
    rng = np.random.default_rng(2)
    p, hits, trials = 0.12, 0, 200
    for t in range(trials):
        e, w = _simulate(80, p, rng)
        iv = wer_interval(e, w, resamples=500, seed=t)
        hits += iv.low <= p <= iv.high
    assert 0.88 <= hits / trials <= 0.995


def test_speaker_blocks_widen_interval_when_speakers_differ():
    rng = np.random.default_rng(3)
    speakers = [f"s{i // 20}" for i in range(200)]  # 10 speakers, 20 utterances each
    rates = {f"s{k}": r for k, r in enumerate(rng.uniform(0.02, 0.4, size=10))}
    words = rng.integers(5, 15, size=200).astype(float)
    errors = rng.binomial(words.astype(int), [rates[s] for s in speakers]).astype(float)
    blocks, unit = blocks_for(speakers)
    assert unit == "speaker" and blocks.max() == 9
    by_speaker = wer_interval(errors, words, blocks, unit=unit, resamples=1000)
    by_utt = wer_interval(errors, words, resamples=1000)
    assert by_speaker.blocks == 10 and by_utt.blocks == 200
    assert (by_speaker.high - by_speaker.low) > 1.5 * (by_utt.high - by_utt.low)
    assert blocks_for(["unknown"] * 5)[1] == "utterance"
    assert blocks_for(["only"] * 5)[1] == "utterance"


def test_paired_delta_identical_is_zero_and_worse_is_positive():
    rng = np.random.default_rng(4)
    e, w = _simulate(100, 0.1, rng)
    same = paired_delta_interval(e, e, w, resamples=500)
    assert same.estimate == same.low == same.high == 0.0
    extra = (rng.random(100) < 0.5).astype(float)
    worse = paired_delta_interval(e, e + extra, w, resamples=500)
    assert worse.low > 0 and worse.estimate == pytest.approx(extra.sum() / w.sum())
    # the paired interval is much tighter than the difference of two unpaired intervals
    a, b = wer_interval(e, w, resamples=500), wer_interval(e + extra, w, resamples=500)
    assert (worse.high - worse.low) < (a.high - a.low) + (b.high - b.low)


def _utts(n: int) -> list[Utterance]:
    conds = ("quiet", "noisy", "accented")
    return [
        Utterance(
            id=f"u{i}",
            text="one two three four five six seven eight nine ten",
            speaker=f"s{i % 6}",
            voice=f"v{i % 6}",
            accent="gb" if i % 3 == 2 else "us",
            condition=conds[i % 3],
            duration_s=2.0,
            source="unit",
            bucket="short",
        )
        for i in range(n)
    ]


def _hyps(utts, broken_condition: str | None = None):
    good = "one two three four five six seven eight nine ten"
    bad = "one two three four five six seven eight"  # 2 deletions
    return [bad if u.condition == broken_condition else good for u in utts]


def test_gate_that_must_fail_does():
    utts = _utts(60)
    hyps = {"fp32": _hyps(utts), "fp16": _hyps(utts), "int8": _hyps(utts, "noisy")}
    acc = compare_accuracy(utts, hyps, "fp32", resamples=500)
    assert acc.bootstrap_unit == "speaker"
    assert acc.candidates["int8"].by("condition")["noisy"].delta.estimate == pytest.approx(0.2)
    assert acc.candidates["int8"].overall.delta.estimate == pytest.approx(0.2 / 3)

    def lat(name, ms):
        return LatencyResult(
            name, {"backend": "test"}, {}, [LatencyPoint(1, "short", 2.0, ms, ms, ms, ms, 3, 1.0)], 0.0, 0.0
        )

    latencies = {"fp32": lat("fp32", 30.0), "fp16": lat("fp16", 20.0), "int8": lat("int8", 10.0)}
    verdicts = {v.candidate: v for v in judge(acc, latencies, GateConfig())}
    assert verdicts["fp32"].passed and verdicts["fp16"].passed
    assert not verdicts["int8"].passed
    assert any("condition noisy" in r for r in verdicts["int8"].reasons)
    assert any(r.startswith("overall") for r in verdicts["int8"].reasons)
    strict = {v.candidate: v for v in judge(acc, latencies, GateConfig(max_latency_ms=25.0))}
    assert not strict["fp32"].passed and "latency" in strict["fp32"].summary and strict["fp16"].passed


def _small_loss(copies: int) -> tuple[list[Utterance], dict[str, list[str]]]:
    """300 utterances of 10 words, 5 per speaker, repeated ``copies`` times with new speakers; the candidate
    drops one word in 7 of every 300 (+0.23 points)."""
    base = _utts(300)
    utts = [
        replace(u, id=f"{u.id}-{c}", speaker=f"s{i // 5}-{c}")
        for c in range(copies)
        for i, u in enumerate(base)
    ]
    good = "one two three four five six seven eight nine ten"
    lossy = [
        good.rsplit(" ", 1)[0] if i % 300 in (3, 50, 97, 151, 199, 240, 288) else good
        for i in range(len(utts))
    ]
    return utts, {"fp32": [good] * len(utts), "int8": lossy}


def test_inconclusive_gate_says_what_evidence_would_settle_it():
    utts, hyps = _small_loss(1)
    acc = compare_accuracy(utts, hyps, "fp32", resamples=2000)
    overall = {v.candidate: v for v in judge(acc, None, GateConfig())}["int8"].checks[0]
    delta = acc.candidates["int8"].overall.delta
    assert delta.estimate * 100 == pytest.approx(7 / 30) and not overall.passed
    assert overall.needed_utterances == evidence_needed(delta.estimate * 100, delta.high * 100, 0.3, 300)
    assert overall.needed_utterances > 300 and "inconclusive" in overall.detail
    assert f"{overall.needed_utterances:,} utterances" in overall.detail
    # the forecast holds: with that much evidence (same effect, speakers in proportion) the gate passes, with
    # half of it not
    enough = -(-overall.needed_utterances // 300)
    for copies, passes in ((enough, True), (max(1, enough // 2), False)):
        bigger = compare_accuracy(*_small_loss(copies), "fp32", resamples=2000)
        assert {v.candidate: v for v in judge(bigger, None, GateConfig())}["int8"].passed is passes
    # a loss past the limit, a passing check and the search's forecasts get no advice
    assert evidence_needed(0.4, 0.6, 0.3, 300) is None and evidence_needed(0.1, 0.25, 0.3, 300) is None
    quiet = {v.candidate: v for v in judge(acc, None, GateConfig(), advise_evidence=False)}["int8"].checks[0]
    assert quiet.needed_utterances is None and "inconclusive" not in quiet.detail


def test_an_estimate_at_the_limit_says_more_data_will_not_settle_it():
    """The same small loss (+0.23 pts) against a limit of 0.24: the interval would have to shrink past any set one
    could gather, so the check says so in words and gives no utterance count."""
    utts, hyps = _small_loss(1)
    acc = compare_accuracy(utts, hyps, "fp32", resamples=2000)
    delta = acc.candidates["int8"].overall.delta
    needed = evidence_needed(delta.estimate * 100, delta.high * 100, 0.24, 300)
    assert needed is not None and needed > EVIDENCE_MAX_FACTOR * 300  # the count the check no longer prints
    gates = GateConfig(max_wer_delta_points=0.24)
    overall = {v.candidate: v for v in judge(acc, None, gates)}["int8"].checks[0]
    assert not overall.passed and overall.needed_utterances is None
    assert "more data will not settle this" in overall.detail and f"{needed:,}" not in overall.detail
    # the loss of the test above, 0.3 points: a count, within the factor
    at_03 = {v.candidate: v for v in judge(acc, None, GateConfig())}["int8"].checks[0]
    assert at_03.needed_utterances is not None and at_03.needed_utterances <= EVIDENCE_MAX_FACTOR * 300


def test_gate_config_file(tmp_path):
    toml = tmp_path / "gates.toml"
    toml.write_text("max_wer_delta_points = 0.5\nmax_latency_ms = 40.0\n")
    cfg = load_gate_config(toml)
    assert cfg.max_wer_delta_points == 0.5 and cfg.max_latency_ms == 40.0
    assert cfg.max_condition_wer_delta_points == 1.0
    bad = tmp_path / "gates.json"
    bad.write_text('{"max_wer_delta": 0.5}')
    with pytest.raises(WorkbenchError, match="unknown keys"):
        load_gate_config(bad)
    assert load_gate_config(None) == GateConfig()


def test_transcribe_and_latency_through_onnxruntime(tmp_path, speech_like):
    from workbench.backends.onnxruntime import OnnxRuntimeRunner

    texts = ["HELLO WORLD", "HELLO THERE WORLD", "GOODBYE", "HELLO WORLD"]
    sset = write_small_set(tmp_path, texts, speech_like)
    model = constant_ctc_onnx(tmp_path / "const.onnx", "HELLO WORLD")
    out = transcribe_set(OnnxRuntimeRunner(model, threads=1), sset, DEFAULT_MODEL, "const")
    assert out.texts == ["HELLO WORLD"] * 4
    acc = compare_accuracy(sset.utterances, {"const": out.texts}, "const", resamples=200)
    assert acc.candidates["const"].overall.wer.estimate == pytest.approx(
        (0 + 1 + 2 + 0) / (2 + 3 + 1 + 2)
    )  # THERE deleted; GOODBYE: 1 S + 1 I

    buckets = bucket_clips(sset)
    assert set(buckets) == {"short", "long"}
    res = measure_latency(OnnxRuntimeRunner(model, threads=1), buckets, LatencyConfig((1, 3), 1, 5), "const")
    assert {(p.batch, p.bucket) for p in res.points} == {(1, "short"), (1, "long"), (3, "short"), (3, "long")}
    for p in res.points:
        assert 0 < p.p50_ms <= p.p90_ms <= p.p99_ms and p.repeats == 5
    assert res.peak_rss_mb >= res.rss_before_mb > 0
    assert res.backend["backend"] == "onnxruntime" and res.machine["usable_cores"] >= 1


def test_normalise_audio_normalises():
    x = normalise_audio(np.linspace(-3, 5, 1000))
    assert x.dtype == np.float32 and abs(x.mean()) < 1e-5 and abs(x.std() - 1) < 1e-3

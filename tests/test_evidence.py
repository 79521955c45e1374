"""A PASS needs evidence: below the minimum speakers and reference words per judged group, or with a collapsed
interval, the verdict is insufficient evidence (never PASS) with what would settle it; the rule is in the report."""

from __future__ import annotations

import json

from evalkit import DEFAULT_MODEL, constant_ctc_onnx, write_small_set

from workbench.config import EVIDENCE, EvidenceConfig
from workbench.evaluate.accuracy import compare_accuracy
from workbench.evaluate.evidence import GroupEvidence, add_evidence_checks, evidence_check
from workbench.evaluate.gates import GateConfig, judge
from workbench.evaluate.verdict import INSUFFICIENT, decide
from workbench.jobs.signoff import SignoffInputs
from workbench.jobs.signoff import run as run_signoff
from workbench.speech.records import Utterance
from workbench.workspace import ENV_VAR

SENTENCE = "the quick brown fox jumps over the lazy dog near the river bank today"  # 14 words


def _utterances(n: int, speakers: int) -> list[Utterance]:
    conditions = ("quiet", "noisy", "accented")
    return [
        Utterance(
            id=f"u{i:04d}",
            text=SENTENCE,
            speaker=f"spk{i % speakers}",
            voice=f"voice{i % speakers}",
            accent="us",
            condition=conditions[(i // speakers) % 3],
            duration_s=3.0,
            source="unit",
            bucket="medium",
        )
        for i in range(n)
    ]


def _judged(utts: list[Utterance], candidate: list[str], config: EvidenceConfig = EVIDENCE):
    accuracy = compare_accuracy(
        utts, {"fp32": [u.text for u in utts], "int8": candidate}, "fp32", resamples=300
    )
    verdicts = judge(accuracy, None, GateConfig(max_wer_delta_points=5.0, max_condition_wer_delta_points=5.0))
    held = add_evidence_checks(verdicts, accuracy, utts, config)
    return accuracy, verdicts, held


def test_small_set_is_insufficient_evidence_with_the_numbers():
    """20 utterances from 6 speakers: the candidate that fixes nothing and breaks little would pass the gates,
    but the set holds too few speakers and words: insufficient evidence, never PASS, with what is missing."""
    utts = _utterances(20, 6)
    hyps = [u.text for u in utts]
    hyps[3] = hyps[3].replace("lazy ", "")  # one deleted word
    _, verdicts, held = _judged(utts, hyps)
    int8 = next(v for v in verdicts if v.candidate == "int8")
    gate_checks = [c for c in int8.checks if not c.name.startswith("evidence")]
    assert all(c.passed for c in gate_checks)  # the gates alone would pass it
    assert not int8.passed and int8.insufficient and int8.summary.startswith("INSUFFICIENT EVIDENCE")
    overall = next(c for c in int8.checks if c.name == "evidence overall")
    assert held["overall"].speakers == 6 and held["overall"].reference_words == 20 * 14
    assert overall.missing == {"speakers": 4, "reference_words": 20, "collapsed": False}
    assert "4 more speakers" in overall.detail and "20 more reference words" in overall.detail
    decision = decide(verdicts, None, "fp32", [], "tensorrt", None, evidence_rule="the rule")
    assert decision.mode == INSUFFICIENT and decision.recommendation is None
    assert decision.line.startswith("INSUFFICIENT EVIDENCE") and "int8" in decision.insufficient
    assert decision.to_json()["evidence_rule"] == "the rule"
    assert "4 more speakers" in decision.reasons[0]


def test_enough_speakers_and_words_pass():
    """36 speakers, 216 utterances (over 1,000 words per condition): the evidence rule lets the same kind of
    candidate pass."""
    utts = _utterances(216, 36)
    hyps = [u.text for u in utts]
    hyps[5] = hyps[5].replace("lazy ", "")
    _, verdicts, held = _judged(utts, hyps)
    int8 = next(v for v in verdicts if v.candidate == "int8")
    assert int8.passed, int8.summary
    assert all(g.speakers >= 10 and g.reference_words >= 300 for g in held.values())
    assert decide(verdicts, None, "fp32", [], "tensorrt", None).mode != INSUFFICIENT


def test_a_collapsed_interval_is_insufficient_even_with_enough_speakers():
    evidence = GroupEvidence("overall", 40, True, 5000, 400)
    assert evidence_check(evidence, collapsed=False).passed
    check = evidence_check(evidence, collapsed=True)
    assert not check.passed and check.insufficient and "collapsed" in check.detail


def test_a_clear_loss_is_a_fail_not_insufficient_evidence():
    """A candidate that loses words everywhere fails its gate: FAIL, even on a small set."""
    utts = _utterances(20, 6)
    _, verdicts, _ = _judged(utts, ["the quick fox" for _ in utts])
    int8 = next(v for v in verdicts if v.candidate == "int8")
    assert not int8.passed and not int8.insufficient and int8.summary.startswith("FAIL")


def test_signoff_limit_4_says_insufficient_evidence(tmp_path, speech_like, monkeypatch):
    """``signoff --limit 4`` on a 20-utterance, 6-speaker set: no PASS for the candidate, the verdict is
    insufficient evidence, and the report (JSON, Markdown, HTML) states the rule and the numbers."""
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    (tmp_path / "engines").mkdir()
    texts = ["HELLO WORLD", "HELLO THERE WORLD", "GOODBYE WORLD", "HELLO WORLD AGAIN"] * 5
    sset = write_small_set(tmp_path / "calib_sets", texts, speech_like, speakers=6)
    fp32 = constant_ctc_onnx(tmp_path / "engines" / "fp32.onnx", "HELLO WORLD")
    same = constant_ctc_onnx(tmp_path / "engines" / "mixed.onnx", "HELLO WORLD")
    out = tmp_path / "reports" / "small"
    for limit in (4, None):
        run_signoff(
            SignoffInputs(
                candidates=[("fp32", fp32), ("mixed", same)],
                eval_set=sset,
                model=DEFAULT_MODEL,
                out_dir=out,
                latency=None,
                threads=1,
                resamples=200,
                limit=limit,  # signoff --limit 4
            )
        )
        record = json.loads((out / "report.json").read_text())
        verdicts = {v["candidate"]: v for v in record["verdicts"]}
        assert not verdicts["mixed"]["passed"] and verdicts["mixed"]["insufficient_evidence"]
        assert record["decision"]["mode"] == INSUFFICIENT and record["recommendation"] is None
        used = record["decision"]["evidence"]["overall"]
        assert used["utterances"] == (4 if limit else 20) and used["speakers"] == (4 if limit else 6)
        missing = next(c for c in verdicts["mixed"]["checks"] if c["name"] == "evidence overall")["missing"]
        assert missing["speakers"] == 10 - used["speakers"]
        md = (out / "report.md").read_text()
        html = (out / "report.html").read_text()
        assert "INSUFFICIENT EVIDENCE" in md and "Evidence rule: a PASS needs" in md
        assert "at least 10 speakers and 300 reference words" in md and "at least 10 speakers" in html
        assert "class='verdict fail'" in html


def test_rule_text_names_the_minimums():
    from workbench.evaluate.evidence import rule_text

    assert "10 speakers" in rule_text() and "300 reference words" in rule_text()
    assert "300 reference characters" in rule_text(unit="cer")


def test_other_words_with_the_same_errors_are_no_collapse():
    """A candidate whose transcripts differ from FP32's but whose errors are the same on every utterance has a
    zero-width interval for a reason: with enough speakers and words it passes."""
    utts = _utterances(216, 36)
    accuracy = compare_accuracy(
        utts,
        {
            "fp32": [u.text.replace("quick", "quack") for u in utts],
            "int8": [u.text.replace("quick", "quirk") for u in utts],
        },
        "fp32",
        resamples=300,
    )
    verdicts = judge(accuracy, None, GateConfig())
    add_evidence_checks(verdicts, accuracy, utts)
    int8 = next(v for v in verdicts if v.candidate == "int8")
    assert (
        accuracy.candidates["int8"].overall.delta.high == accuracy.candidates["int8"].overall.delta.low == 0.0
    )
    assert int8.passed, int8.summary

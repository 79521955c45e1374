"""The label-free check: agreement with FP32 (disagreement, the edit-distance bound, the estimate), coverage of the
calibrated ranges, the ``[unlabelled]`` gates, and a sign-off of the demo model with an unlabelled set, where the bound
is checked against the real WER deltas of its transcripts."""

from __future__ import annotations

import json
import math

import jiwer
import pytest

from workbench.calibration.coverage import TensorCoverage, coverage_shift
from workbench.config import CoverageRule
from workbench.errors import WorkbenchError
from workbench.evaluate.agreement import ConfidenceMeter, agreement
from workbench.evaluate.gates import load_gate_config

REFS = ["THE CAT SAT ON THE MAT", "A DOG RAN HOME", "BIRDS SING AT DAWN", "RAIN FELL ALL NIGHT LONG"]
FP32 = ["THE CAT SAT ON A MAT", "A DOG RAN HOME", "BIRDS SING AT DON", "RAIN FELL ALL NIGHT LONG"]
INT8 = ["THE CAT SAT ON A HAT", "A DOG RAN", "BIRDS SING AT DAWN", "RAIN FELL ALL NIGHT LONG"]


def test_disagreement_counts_edits_to_fp32_and_the_bound_holds_with_true_references() -> None:
    result = agreement("s", ["a", "a", "b", "b"], {"fp32": FP32, "int8": INT8}, "fp32", resamples=200)
    cand = result.candidates["int8"]
    # word edits: MAT->HAT (1), HOME deleted (1), DON->DAWN (1) = 3 over FP32's 19 words
    assert (cand.word_edits, cand.fp32_words, cand.changed_utterances) == (3, 19, 3)
    assert cand.disagreement.estimate == pytest.approx(3 / 19) and cand.changed_share == 0.75
    assert cand.disagreement.unit == "speaker" and cand.disagreement.blocks == 2
    assert cand.char_edits == sum(jiwer.process_characters(f, c).substitutions + jiwer.process_characters(f, c).deletions + jiwer.process_characters(f, c).insertions for f, c in zip(FP32, INT8))  # fmt: skip
    assert result.reference_units == 19 and "estimated" in result.reference_estimate
    wer_c, wer_f = jiwer.wer(REFS, INT8), jiwer.wer(REFS, FP32)
    words = sum(len(r.split()) for r in REFS)
    assert abs(wer_c - wer_f) <= cand.word_edits / words
    assert json.loads(json.dumps(result.to_json(), allow_nan=False))["candidates"]["int8"]["word_edits"] == 3


def test_label_free_estimate_applies_the_labelled_ratio() -> None:
    result = agreement(
        "s", ["a"] * 4, {"fp32": FP32, "int8": INT8}, "fp32", labelled={"int8": ("eval", 0.01, 0.05)}
    )
    est = result.candidates["int8"].estimate
    assert est is not None and est.ratio == pytest.approx(0.2)
    assert est.estimate == pytest.approx(0.2 * 3 / 19) and "nothing guarantees" in est.assumption
    # a candidate that never disagreed on the labelled set gets no estimate (no ratio to carry over)
    none = agreement(
        "s", ["a"] * 4, {"fp32": FP32, "int8": INT8}, "fp32", labelled={"int8": ("eval", 0.0, 0.0)}
    )
    assert none.candidates["int8"].estimate is None


def test_empty_set_gives_intervals_without_ends_in_strict_json() -> None:
    result = agreement("s", [], {"fp32": [], "int8": []}, "fp32")
    assert (
        json.loads(json.dumps(result.to_json(), allow_nan=False))["candidates"]["int8"]["disagreement"]["low"]
        is None
    )


def test_confidence_is_the_mean_max_posterior_and_blank_share() -> None:
    import numpy as np

    meter = ConfidenceMeter(blank_id=0)
    logits = np.log(np.array([[0.9, 0.05, 0.05], [0.2, 0.7, 0.1]]))
    meter.add(logits)
    conf = meter.result()
    assert conf is not None and conf.mean_max_posterior == pytest.approx(0.8) and conf.blank_share == 0.5
    assert ConfidenceMeter(0).result() is None


def test_coverage_rule_names_tensors_that_left_their_range() -> None:
    ref = {"a": TensorCoverage(1, 10_000), "b": TensorCoverage(1, 10_000), "c": TensorCoverage(0, 10_000)}
    new = {"a": TensorCoverage(50, 10_000), "b": TensorCoverage(2, 10_000), "c": TensorCoverage(0, 10_000)}
    shift = coverage_shift(ref, new, ("calib", "prod"), (64, 10), CoverageRule(factor=3.0, min_share=1e-3))
    assert shift.moved and [m.tensor for m in shift.left] == ["a"] and shift.top[0].tensor == "a"
    assert "1 of 3 tensors left their calibrated range: a 0.500 %" in shift.summary()
    quiet = coverage_shift(ref, ref, ("calib", "prod"), (64, 10))
    assert not quiet.moved and "no tensor of 3 left" in quiet.summary()


def test_unlabelled_gates_from_a_toml_table(tmp_path) -> None:
    path = tmp_path / "gates.toml"
    path.write_text("max_wer_delta_points = 0.5\n[unlabelled]\nmax_disagreement = 3.0\nmax_wer_bound = 4.0\n")
    gates = load_gate_config(path)
    assert (gates.unlabelled_max_disagreement, gates.unlabelled_max_wer_bound, gates.max_wer_delta_points) == (3.0, 4.0, 0.5)  # fmt: skip
    path.write_text("[unlabelled]\nshift_margin = 0\n")  # a setting, not a gate: 0 is allowed
    assert load_gate_config(path).unlabelled_shift_margin == 0
    path.write_text("[unlabelled]\nshift_margin = -0.5\n")
    with pytest.raises(WorkbenchError, match="shift_margin"):
        load_gate_config(path)
    path.write_text("[unlabelled]\nmax_disagrement = 3.0\n")
    with pytest.raises(WorkbenchError, match="max_disagrement"):
        load_gate_config(path)
    path.write_text('{"unlabelled": {"max_wer_bound": -1}}')
    path = path.rename(tmp_path / "gates.json")
    with pytest.raises(WorkbenchError, match="max_wer_bound"):
        load_gate_config(path)


@pytest.fixture(scope="module")
def demo_signoff(tiny_sets, tmp_path_factory):
    """The demo model calibrated (max) on the tiny calibration set; FP32 and INT8 signed off on the tiny evaluation
    set with that set's audio imported again as an unlabelled set, and a disagreement gate."""
    from workbench.calibration.methods import MethodSpec
    from workbench.evaluate.gates import GateConfig
    from workbench.jobs import calibrate
    from workbench.jobs.signoff import SignoffInputs, run
    from workbench.resources import demo_model_dir
    from workbench.speech.importer import ImportConfig, import_set
    from workbench.speech.layouts import open_source

    work = tmp_path_factory.mktemp("label-free")
    calibrated = calibrate.run(
        calibrate.CalibrateInputs(
            str(demo_model_dir()),
            str(tiny_sets.calib.path),
            MethodSpec("max"),
            engines=work / "engines",
            calib_root=tiny_sets.calib.path.parent,
        )
    )
    source = open_source("manifest", tiny_sets.eval.path / "manifest.jsonl")
    again = import_set(
        source, ImportConfig("eval-audio", role="unlabelled", workers=1), "t", work / "sets", False
    )
    # margin 0 (the gate file's shift_margin): the same audio must still not flag
    gates = GateConfig(max_wer_delta_points=100.0, max_condition_wer_delta_points=100.0, unlabelled_max_disagreement=0.01, unlabelled_shift_margin=0.0)  # fmt: skip
    import workbench.jobs.label_free as job

    loads: list[str] = []

    def counted(name, *args, **kwargs):  # the real load_set, its calls counted
        loads.append(str(name))
        return real_load(name, *args, **kwargs)

    real_load = job.load_set
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(job, "load_set", counted)
        result = run(
            SignoffInputs(
                eval_set=str(tiny_sets.eval.path),
                out_dir=work / "reports" / "r",
                candidates=[("fp32", calibrated.fp32_onnx), ("int8", calibrated.int8_onnx)],
                calib_set=str(tiny_sets.calib.path),
                cache=calibrated.cache,
                engines=work / "engines",
                calib_root=tiny_sets.calib.path.parent,
                latency=None,
                threads=1,
                resamples=200,
                as_given=True,
                outside_profile="score",
                gates=gates,
                unlabelled_sets=[str(again.speech_set.path)],
            )
        )
    assert loads == [str(again.speech_set.path)]  # the unlabelled set is read and hashed once per sign-off
    return result, again.speech_set


def test_the_bound_holds_on_the_labelled_set_with_real_transcripts(demo_signoff) -> None:
    result, _ = demo_signoff
    record = result.record
    labelled = record["label_free"]["labelled"]
    for name, cand in labelled["candidates"].items():
        overall = record["accuracy"]["candidates"][name]["overall"]
        delta = overall["delta"]["estimate"]
        assert abs(delta) <= cand["word_edits"] / overall["reference_words"] + 1e-12, name


def test_the_same_audio_unlabelled_agrees_as_the_labelled_set_and_is_not_flagged(demo_signoff) -> None:
    result, unlabelled = demo_signoff
    section = result.record["label_free"]
    (here,) = section["sets"]
    assert here["set"] == unlabelled.name and here["utterances"] == len(unlabelled.utterances)
    for name, cand in here["candidates"].items():
        assert cand["disagreement"] == section["labelled"]["candidates"][name]["disagreement"]
        est = cand["estimate"]
        if (
            est is not None
        ):  # the labelled ratio applied to the same disagreement gives the labelled delta back
            delta = result.record["accuracy"]["candidates"][name]["overall"]["delta"]["estimate"]
            assert est["estimate"] == pytest.approx(delta)
    assert here["beyond_labelled"] == []
    assert (
        "the gate file's shift_margin" in section["shift_rule"]
        and "above 0 % of FP32's words" in section["shift_rule"]
    )
    for test in here["shift_tests"].values():  # the same audio: a difference of zero, inside its interval
        assert test["margin"] == 0.0 and test["difference"]["estimate"] == 0.0 and not test["beyond"]
        assert test["difference"]["low"] <= 0.0 <= test["difference"]["high"]
    cov = here["coverage"]
    assert cov["tensors"] > 0 and all(0.0 <= m["share"] <= 1.0 for m in cov["top"])
    assert (here["shift"] is None) == (not cov["moved"])
    conf = here["confidence"]
    assert 0.0 < conf["mean_max_posterior"] <= 1.0 and 0.0 <= conf["blank_share"] <= 1.0


def test_the_disagreement_gate_joins_the_verdict(demo_signoff) -> None:
    result, unlabelled = demo_signoff
    (verdict,) = [v for v in result.record["verdicts"] if v["candidate"] == "int8"]
    (check,) = [c for c in verdict["checks"] if c["name"] == f"unlabelled {unlabelled.name} disagreement"]
    assert check["limit"] == 0.01 and check["passed"] == (check["value"] <= 0.01)
    assert verdict["passed"] == all(c["passed"] for c in verdict["checks"])
    assert not math.isnan(check["value"])
    md = result.paths["markdown"].read_text()
    assert "Label-free check" in md and unlabelled.name in md


def test_an_unlabelled_set_as_eval_set_is_one_error_line(demo_signoff, tmp_path, capsys) -> None:
    from workbench.cli import main

    _, unlabelled = demo_signoff
    out = tmp_path / "r"
    argv = ["signoff", "--eval-set", str(unlabelled.path), "--candidate", "fp32=x.onnx", "--out", str(out)]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert (
        err.startswith(f"error: --eval-set {unlabelled.name} is an unlabelled set") and err.count("\n") == 1
    )
    assert not out.exists()


def test_the_report_and_the_dashboard_show_the_label_free_section(demo_signoff, monkeypatch) -> None:
    from streamlit.testing.v1 import AppTest

    from workbench.workspace import ENV_VAR

    result, unlabelled = demo_signoff
    html = result.paths["html"].read_text()
    assert "Label-free check: agreement with FP32 (no labels)" in html and "Label-free check: shift" in html
    monkeypatch.setenv(ENV_VAR, str(result.paths["record"].parents[2]))  # the workspace holding reports/r
    at = AppTest.from_string(
        "from workbench.dashboard.pages import signoff\nsignoff.render()", default_timeout=60
    )
    at = at.run()
    assert not at.exception
    shown = "\n".join(str(m.value) for m in at.markdown)
    assert "**Label-free check: agreement with FP32 (no labels)**" in shown
    frames = [f.value for f in at.dataframe]
    assert any(unlabelled.name in str(frame) for frame in frames)
    lines = result.record["label_free"]["lines"]
    assert all(line in "\n".join(str(w.value) for w in at.warning) for line in lines)

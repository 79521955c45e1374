"""The search judged by disagreement with FP32 on unlabelled dev audio (``search --dev-criterion disagreement``): the
budget (given, or calibrated from INT8 everywhere on the labelled dev set), its refusals, the CLI's bad input, and a
real search of a tiny random model on ONNX Runtime whose record states the criterion and budget."""

from __future__ import annotations

import json
import re

import pytest

from tests import test_transcript_reuse
from workbench.errors import WorkbenchError
from workbench.evaluate.accuracy import GroupScore
from workbench.evaluate.bootstrap import Interval
from workbench.evaluate.gates import GateConfig
from workbench.quantize.plan import PrecisionPlan
from workbench.search import disagreement
from workbench.search.evaluator import Evaluation

planted = test_transcript_reuse.planted  # the planted tiny model's fixture, shared

GATES = GateConfig(max_wer_delta_points=0.3, max_condition_wer_delta_points=1.0)


def _reading(delta: float, judged_high: float | None) -> Evaluation:
    """An INT8-everywhere reading: ``delta`` (fraction) overall and the judged upper end (points)."""
    iv = Interval(delta, delta - 0.01, delta + 0.01, 0.95, 200, "speaker", 8)
    score = GroupScore("overall", "all", 40, 400, 0, 0, 0, iv, iv)
    return Evaluation(
        PrecisionPlan("mixed-k0"), False, [], score, {}, 1.0, 40, judged={"overall": judged_high}
    )


def test_the_calibrated_budget_is_each_gate_over_the_ratio_of_judged_readings() -> None:
    budget = disagreement.calibrated_budget(_reading(0.007, 1.2), _reading(0.05, 6.0), GATES, "dev")
    ratio = 1.2 / 6.0
    assert budget.source == "calibrated" and budget.calibration is not None
    assert budget.calibration["ratio"] == pytest.approx(ratio)
    assert budget.overall == pytest.approx(0.3 / ratio) and budget.condition == pytest.approx(1.0 / ratio)
    assert budget.calibration["wer_delta"] == pytest.approx(0.7)
    assert budget.calibration["disagreement"] == pytest.approx(5.0)
    assert "nothing guarantees" in budget.calibration["assumption"]
    judged = budget.gates(GATES)
    assert judged.max_wer_delta_points == budget.overall
    assert judged.max_condition_wer_delta_points == budget.condition
    assert json.loads(json.dumps(budget.to_json(), allow_nan=False))["source"] == "calibrated"


@pytest.mark.parametrize(
    ("wer_high", "dis_high", "message"),
    [
        (-0.1, 6.0, r"judged WER delta on the dev set dev is -0\.10 points"),
        (0.0, 6.0, r"judged WER delta .* is \+0\.00 points"),
        (None, 6.0, "judged WER delta .* is none"),
        (1.2, 0.0, "changes none of FP32's words"),
        (1.2, float("nan"), "changes none of FP32's words"),
    ],
)
def test_no_positive_ratio_is_refused_with_the_way_out(wer_high, dis_high, message) -> None:
    with pytest.raises(WorkbenchError, match=message) as err:
        disagreement.calibrated_budget(_reading(0.0, wer_high), _reading(0.05, dis_high), GATES, "dev")
    assert "--max-disagreement" in str(err.value)


def test_a_given_budget_scales_per_condition_as_the_gates_do() -> None:
    budget = disagreement.given_budget(2.0, GATES)
    assert (budget.overall, budget.source, budget.calibration) == (2.0, "given", None)
    assert budget.condition == pytest.approx(2.0 * 1.0 / 0.3)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"criterion": "wer", "unlabelled_dev_set": "u"}, "--unlabelled-dev-set judge plans by disagreement"),
        ({"criterion": "wer", "max_disagreement": 2.0}, "--max-disagreement judge plans"),
        ({"criterion": "disagreement"}, "give --unlabelled-dev-set NAME"),
        ({"criterion": "disagreement", "unlabelled_dev_set": "u", "max_disagreement": 0.0}, "above 0"),
        (
            {"criterion": "disagreement", "unlabelled_dev_set": "u", "selection": "confirm"},
            "does not combine",
        ),
        ({"criterion": "disagreement", "unlabelled_dev_set": "u", "confirm": 0.3}, "does not combine"),
        ({"criterion": "disagreement", "unlabelled_dev_set": "u", "ray": "local"}, "without --ray"),
        ({"criterion": "labels"}, "must be one of wer, disagreement"),
    ],
)
def test_options_of_the_other_criterion_are_refused(kwargs, message) -> None:
    given = {"unlabelled_dev_set": None, "max_disagreement": None, "selection": "as-read", "confirm": 0.0}
    given.update({"ray": None, **kwargs})
    criterion = given.pop("criterion")
    with pytest.raises(WorkbenchError, match=message):
        disagreement.check_options(
            criterion,
            given["unlabelled_dev_set"],
            given["max_disagreement"],
            selection=given["selection"],
            confirm=given["confirm"],
            ray=given["ray"],
        )


def test_fp32_as_the_reference_reads_as_its_transcripts_given_as_labels(planted) -> None:
    """``against_fp32``: clips without transcripts read exactly as the same clips labelled with FP32's transcripts
    (real ONNX Runtime, the planted tiny model of ``tests.test_transcript_reuse``); calibrated on such labels, every
    plan's WER delta is its disagreement, so the ratio is 1 and the budget is the gates."""
    from dataclasses import replace

    _plans, _reading = test_transcript_reuse._plans, test_transcript_reuse._reading
    from workbench.search.evaluator import DevEvaluator
    from workbench.speech.records import Clip

    prepared, model, variants, dev = planted
    unlabelled = [Clip(replace(c.utterance, text=""), c.audio) for c in dev]

    def evaluator(clips, against_fp32: bool) -> DevEvaluator:
        return test_transcript_reuse._evaluator(
            prepared, variants, clips, blocks=1, against_fp32=against_fp32
        )

    fp32_read = disagreement.require_words(evaluator(unlabelled, True), "u")
    labelled = evaluator(dev, False)
    assert fp32_read.baseline.overall.wer.estimate == 0.0
    assert fp32_read.baseline.overall.reference_words == labelled.baseline.overall.reference_words > 0
    readings = [_reading(fp32_read.evaluate(p)) for p in _plans(model)]
    assert readings == [_reading(labelled.evaluate(p)) for p in _plans(model)]
    assert len({str(r["delta"]) for r in readings}) > 1  # the plans disagree with FP32 by different amounts
    everywhere = PrecisionPlan("int8", "int8")
    budget = disagreement.calibrate(lambda against: evaluator(dev, against), everywhere, GATES, "tiny")
    assert budget.calibration is not None and budget.calibration["ratio"] == pytest.approx(1.0)
    assert budget.overall == pytest.approx(GATES.max_wer_delta_points)
    assert budget.condition == pytest.approx(GATES.max_condition_wer_delta_points)


def test_the_cli_refuses_bad_criterion_input_in_one_line_before_any_model_work(
    tmp_path, speech_like, write_wav, monkeypatch, capsys
) -> None:
    from evalkit import write_small_set

    from workbench.cli import main
    from workbench.resources import demo_model_dir
    from workbench.speech.importer import ImportConfig, import_set
    from workbench.speech.layouts import open_source
    from workbench.workspace import ENV_VAR

    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    sets = tmp_path / "calib_sets"
    texts = ["HELLO WORLD", "HELLO THERE", "GOODBYE WORLD", "GOOD MORNING", "GOOD NIGHT", "SEE YOU"]
    write_small_set(sets, texts, speech_like, name="unit-calib", prefix="cal")
    write_small_set(sets, texts[:3], speech_like, name="unit-eval")
    folder = tmp_path / "prod"
    for i in range(3):
        write_wav(folder / f"c{i}.wav", speech_like(1.5, seed=10 + i))
    import_set(
        open_source("folder", folder),
        ImportConfig(name="prod-u", role="unlabelled", workers=1),
        "t",
        root=sets,
        progress=False,
    )
    # the evaluation set's own audio, unlabelled: it shares every speaker with the sign-off set
    import_set(
        open_source("manifest", sets / "unit-eval" / "manifest.jsonl"),
        ImportConfig(name="eval-u", role="unlabelled", workers=1),
        "t",
        root=sets,
        progress=False,
    )
    out = tmp_path / "out"
    base = ["search", "--model", str(demo_model_dir()), "--calib-set", "unit-calib", "--out", str(out)]
    dis = ["--dev-criterion", "disagreement"]
    cases = [
        (dis, "give --unlabelled-dev-set NAME"),
        (["--unlabelled-dev-set", "prod-u"], "add --dev-criterion disagreement"),
        (["--max-disagreement", "2"], "add --dev-criterion disagreement"),
        ([*dis, "--unlabelled-dev-set", "unit-eval"], "--unlabelled-dev-set unit-eval is a set whose card records no role with transcripts"),
        ([*dis, "--unlabelled-dev-set", "prod-u", "--selection", "confirm"], "does not combine"),
        ([*dis, "--unlabelled-dev-set", "prod-u", "--max-disagreement", "0"], "--max-disagreement"),
        ([*dis, "--unlabelled-dev-set", "nowhere-u"], "nowhere-u"),
        (
            [*dis, "--unlabelled-dev-set", "eval-u", "--signoff-set", "unit-eval"],
            "the search would select on what the sign-off judges",
        ),
        (
            [*dis, "--unlabelled-dev-set", "prod-u", "--calib-set", "prod-u", "--dev-set", "unit-calib"],
            "--unlabelled-dev-set prod-u is the calibration set",
        ),
    ]  # fmt: skip
    cases.append(
        (
            [*dis, "--unlabelled-dev-set", "prod-u", "--dev-set", "unit-calib", "--max-disagreement", "2"],
            "--dev-set name the labelled dev set .* drop one or the other",
        )
    )
    for extra, match in cases:
        assert main([*base, *extra]) == 1, extra
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1, err
        assert re.search(match, err), err
        assert not out.exists()
    # a given budget reads no labelled dev set: calibrating on unlabelled audio is then no reason to refuse
    from workbench.jobs.search import SearchInputs, check

    given = {"dev_criterion": "disagreement", "unlabelled_dev_set": "prod-u", "max_disagreement": 2.0}
    check(SearchInputs(model=demo_model_dir(), calib_set="eval-u", **given))
    with pytest.raises(WorkbenchError, match="the dev set without --dev-set"):
        check(SearchInputs(model=demo_model_dir(), calib_set="eval-u", **{**given, "max_disagreement": None}))


@pytest.mark.slow
def test_a_search_judged_by_disagreement_on_unlabelled_audio(tiny_sets, tmp_path) -> None:
    from workbench.jobs.search import SearchInputs, run, summary_lines
    from workbench.model.synthetic import save_random_wav2vec2
    from workbench.speech.importer import ImportConfig, import_set
    from workbench.speech.layouts import open_source

    model = save_random_wav2vec2(tmp_path / "tiny", "tiny", seed=0)
    unlabelled = import_set(
        open_source("manifest", tiny_sets.eval.path / "manifest.jsonl"),
        ImportConfig(name="dev-u", role="unlabelled", workers=1),
        "t",
        root=tmp_path / "sets",
        progress=False,
    ).speech_set
    common = {
        "model": model,
        "calib_set": str(tiny_sets.calib.path),
        "method": "max",
        "per_condition": 1,
        "engines": tmp_path / "engines",
        "calib_root": tiny_sets.calib.path.parent,
        "resamples": 200,
        "refine": 0,
        "threads": 1,
        "progress": False,
        "dev_criterion": "disagreement",
        "unlabelled_dev_set": str(unlabelled.path),
    }
    # the budget calibrated on the labelled dev set (here the calibration set) from INT8 everywhere
    data = run(SearchInputs(**common, out=tmp_path / "calibrated")).data
    criterion = data["dev_criterion"]
    assert criterion["criterion"] == "disagreement"
    assert criterion["unlabelled_dev_set"]["content_hash"] == unlabelled.content_hash
    assert criterion["unlabelled_dev_set"]["utterances"] == len(unlabelled.utterances)
    assert data["provenance"]["unlabelled_dev_set"] == unlabelled.content_hash
    budget = criterion["budget"]
    calibration = budget["calibration"]
    assert budget["source"] == "calibrated" and calibration["dev_set"] == tiny_sets.calib.name
    assert calibration["utterances"] == len(tiny_sets.calib.utterances) == data["dev_set"]["utterances"]
    ratio = calibration["judged_wer_delta_high"] / calibration["judged_disagreement_high"]
    assert calibration["ratio"] == pytest.approx(ratio) and ratio > 0
    assert budget["max_disagreement_points"] == pytest.approx(0.3 / ratio)
    # FP32 is its own reference on the unlabelled audio: no disagreement; every plan judged against the budget
    assert data["baseline"]["wer"]["estimate"] == 0.0
    held = data["budget"]["judged_against"]["max_wer_delta_points"]
    assert held == pytest.approx(budget["max_disagreement_points"])
    for cand in data["candidates"]:
        assert cand["latency"]["utterances"] <= len(unlabelled.utterances)
        assert cand["wer"]["overall"]["estimate"] == pytest.approx(cand["delta"]["overall"]["estimate"])
        if cand["passed"]:
            assert cand["judged_delta_high"]["overall"] <= held + 1e-9
        else:
            assert cand["reasons"]
    assert data["signoff_forecast"] is None and "not made" in criterion["signoff_forecast"]
    assert any(
        "judged on disagreement with FP32 on the unlabelled dev set dev-u" in x for x in summary_lines(data)
    )
    # a given budget: read on the unlabelled audio alone; one above any disagreement passes INT8 everywhere
    wide = run(SearchInputs(**common, max_disagreement=1000.0, out=tmp_path / "given")).data
    assert wide["dev_criterion"]["budget"]["source"] == "given"
    assert wide["dev_criterion"]["budget"]["calibration"] is None and wide["dev_set"]["utterances"] is None
    assert wide["dev_set"]["read"] is False and wide["dev_set"]["warning"] is None and data["dev_set"]["read"]
    assert wide["int8_everywhere_passes"] and wide["found"]["k"] == 0
    assert wide["found"]["name"].endswith(unlabelled.content_hash[:12])

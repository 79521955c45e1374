"""Layer comparison, sensitivity ranking and mixed-precision search (workbench.compare, compare/search verbs).

The model is the tiny random Wav2Vec2ForCTC with one planted outlier channel: channel 7 of the last
layer's final LayerNorm is scaled by 1000 and the matching LM-head input column by 1/1000, so FP32 is
unchanged but the LM head's input has one channel 1000x larger than the rest, and per-tensor INT8 on
that input wipes out every other channel. The ranking must put ``lm_head`` first and the search must
keep it out of INT8. The LM head is also scaled up so the random model's logits are peaked enough for
KL and greedy tokens to mean something. WER references for the search are the FP32 model's own
transcripts (a random model cannot read the real texts), so WER measures drift from FP32.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest

from workbench.cli import main
from workbench.compare.groups import group_of, node_groups, plan_for
from workbench.compare.metrics import ErrorSums, OutputDamage
from workbench.compare.sensitivity import VariantRunner, rank_groups
from workbench.errors import WorkbenchError
from workbench.evaluate.gates import GateConfig
from workbench.evaluate.transcribe import transcribe
from workbench.jobs.compare import run_compare
from workbench.jobs.prepare import prepare
from workbench.quantize.plan import PrecisionPlan
from workbench.search.evaluator import DevEvaluator
from workbench.search.strategies import search_plan
from workbench.speech.records import Clip, Utterance
from workbench.speech.select import all_clips, clips_per_condition

PLANTED_CHANNEL = 7
OUTLIER = 1000.0


def plant_outlier(folder: Path) -> Path:
    """Save the tiny random model with an outlier channel in the LM head's input (FP32 function unchanged)."""
    import torch

    from workbench.model.loading import load_model
    from workbench.model.synthetic import save_random_wav2vec2

    save_random_wav2vec2(folder, "tiny", seed=0)
    model = load_model(folder)
    norm = model.wav2vec2.encoder.layers[-1].final_layer_norm
    with torch.no_grad():
        model.lm_head.weight *= 20.0
        norm.weight[PLANTED_CHANNEL] *= OUTLIER
        norm.bias[PLANTED_CHANNEL] *= OUTLIER
        model.lm_head.weight[:, PLANTED_CHANNEL] /= OUTLIER
    model.save_pretrained(str(folder))
    return folder


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory, tiny_sets):
    folder = plant_outlier(tmp_path_factory.mktemp("models") / "planted")
    engines = tmp_path_factory.mktemp("engines")
    prepared = prepare(folder, str(tiny_sets.calib.path), "max", root=engines)
    model = onnx.load(str(prepared.fp32_onnx))
    return prepared, model, VariantRunner(model, prepared.cache.amax()), engines


# ---- metrics on known tensors


def test_tensor_metrics_known_values() -> None:
    sums = ErrorSums()
    sums.add(np.array([3.0, 4.0]), np.array([3.0, 3.5]))
    assert sums.sqnr_db == pytest.approx(20.0)  # 25 / 0.25 = 100
    assert sums.rel_l2 == pytest.approx(0.1)
    assert sums.max_abs == pytest.approx(0.5) and sums.mean_abs == pytest.approx(0.25)
    assert sums.cosine == pytest.approx(23.0 / (5.0 * math.sqrt(21.25)))
    # pooling two clips equals one pass over both
    a, b = np.random.default_rng(0).standard_normal((2, 2, 500)).astype(np.float32)
    pooled, whole = ErrorSums(), ErrorSums()
    pooled.add(a[0], b[0])
    pooled.add(a[1], b[1])
    whole.add(a, b)
    for key in ("cosine", "sqnr_db", "rel_l2", "max_abs", "mean_abs"):
        assert getattr(pooled, key) == pytest.approx(getattr(whole, key), rel=1e-5)
    same = ErrorSums()
    same.add(a, a)
    assert same.cosine == 1.0 and same.rel_l2 == 0.0 and same.sqnr_db == 999.0
    flipped = ErrorSums()
    flipped.add(a, -a)
    assert flipped.cosine == pytest.approx(-1.0) and flipped.rel_l2 == pytest.approx(2.0)
    with pytest.raises(ValueError, match="shape"):
        ErrorSums().add(a, b[:, :10])


def test_logit_kl_and_token_disagreement_known_values() -> None:
    damage = OutputDamage()
    damage.add(np.array([[0.0, 0.0], [0.0, 1.0]]), np.array([[math.log(3.0), 0.0], [1.0, 0.0]]))
    p2 = np.array([1, math.e]) / (1 + math.e)
    expected = (
        0.5 * math.log(0.5 / 0.75) + 0.5 * math.log(0.5 / 0.25) + float((p2 * np.log(p2 / p2[::-1])).sum())
    ) / 2
    assert damage.kl == pytest.approx(expected)
    assert damage.token_disagreement == pytest.approx(0.5)  # frame 2 flips, frame 1 keeps token 0
    same = OutputDamage()
    same.add(np.ones((1, 5, 4)), np.ones((1, 5, 4)))
    assert same.kl == 0.0 and same.token_disagreement == 0.0 and same.frames == 5


def test_dev_intervals_predict_the_signoff_interval() -> None:
    """Half-widths x max(1, sqrt(ratio)), then both ends out by z x se x sqrt(1 + ratio), se from the width."""
    from statistics import NormalDist

    from workbench.evaluate.bootstrap import Interval
    from workbench.search.evaluator import pass_quantile, predicted_interval

    raw = Interval(0.01, 0.0, 0.015, 0.95, 1000, "speaker", 30)
    wide = predicted_interval(raw, 4.0, 0.0)  # widening only
    assert (wide.estimate, wide.low, wide.high) == pytest.approx((0.01, -0.01, 0.02))
    assert predicted_interval(raw, 0.25, 0.0) is not None and predicted_interval(
        raw, 0.25, 0.0
    ).high == pytest.approx(0.015)
    z = pass_quantile(0.9)
    assert z == pytest.approx(1.2815515655446004) and pass_quantile(0.5) == 0.0
    se = 0.015 / (2 * NormalDist().inv_cdf(0.975))
    shifted = predicted_interval(raw, 1.0, z)
    assert shifted.high == pytest.approx(0.015 + z * se * math.sqrt(2))
    assert shifted.low == pytest.approx(0.0 - z * se * math.sqrt(2))
    assert predicted_interval(raw, 1.0, 0.0) is raw and predicted_interval(None, 2.0, 1.0) is None
    with pytest.raises(ValueError):
        pass_quantile(0.4)


def test_the_whole_set_span_is_the_predicted_upper_half_span_narrowed_by_the_prefix_share() -> None:
    """What the futility rule expects of the last look: at the whole set the span is exactly the predicted
    interval's upper end above its estimate; after a quarter of the set it is half of that."""
    from workbench.evaluate.bootstrap import Interval
    from workbench.search.evaluator import pass_quantile, predicted_interval, whole_set_span

    raw = Interval(0.001, -0.002, 0.0045, 0.95, 1000, "speaker", 120)
    z = pass_quantile(0.9)
    for ratio in (0.5, 1.0, 2.0):
        whole = predicted_interval(raw, ratio, z)
        se, span = whole_set_span(raw, ratio, z, 1.0)
        assert span == pytest.approx((whole.high - whole.estimate) * 100.0)
        assert se == pytest.approx(0.65 / (2 * 1.959963984540054))
        assert whole_set_span(raw, ratio, z, 0.25)[1] == pytest.approx(span / 2)


def test_a_wide_dev_interval_needs_a_larger_lead_than_a_narrow_one() -> None:
    """Two plans with the same upper end on the dev set: the one that changes many transcripts both ways
    (wide interval, estimate near 0) is predicted to fail the sign-off; the one that changes few passes."""
    from workbench.evaluate.bootstrap import Interval
    from workbench.search.evaluator import pass_quantile, predicted_interval

    z = pass_quantile(0.9)
    wide = predicted_interval(Interval(-0.0010, -0.0030, 0.0018, 0.95, 1000, "speaker", 34), 34 / 32, z)
    narrow = predicted_interval(Interval(0.0012, 0.0006, 0.0018, 0.95, 1000, "speaker", 34), 34 / 32, z)
    assert wide.high > 0.003 > narrow.high  # gate 0.3 points = 0.003


def _speakers(prefix: str, speakers: int, each: int, condition: str) -> list[Utterance]:
    return [
        Utterance(f"{prefix}{s}-{i}", "A B C D", f"{prefix}{s}", "v", "us", condition, 1.0, "t")
        for s in range(speakers)
        for i in range(each)
    ]


def test_dev_intervals_widen_to_the_signoff_speakers_per_check() -> None:
    """Widening follows the bootstrap's blocks (speakers), not utterance counts: the same 40 quiet utterances
    from 2 speakers instead of 8 give a sign-off interval about twice as wide."""
    from workbench.search.evaluator import block_counts, block_ratios, widening_factors

    dev = _speakers("q", 8, 5, "quiet") + _speakers("n", 8, 5, "noisy")
    signoff = _speakers("Q", 2, 20, "quiet") + _speakers("N", 8, 5, "noisy")
    assert block_counts(signoff) == {"overall": 10, "condition noisy": 8, "condition quiet": 2}
    assert block_ratios(dev, signoff) == pytest.approx(
        {"overall": 1.6, "condition quiet": 4.0, "condition noisy": 1.0}
    )
    factors = widening_factors(block_ratios(dev, signoff))
    assert factors == pytest.approx(
        {"overall": math.sqrt(16 / 10), "condition quiet": 2.0, "condition noisy": 1.0}
    )
    assert widening_factors(block_ratios(signoff, dev)) == {
        "overall": 1.0,
        "condition quiet": 1.0,
        "condition noisy": 1.0,
    }
    one = _speakers("x", 1, 6, "quiet")  # one speaker: the bootstrap falls back to utterances
    assert block_counts(one) == {"overall": 6, "condition quiet": 6}
    assert widening_factors(block_ratios(dev, dev[:5] + signoff[40:]))["condition quiet"] == pytest.approx(
        math.sqrt(8 / 5)
    )


def test_search_judges_predicted_intervals_against_the_gates_less_the_margin() -> None:
    from workbench.evaluate.accuracy import compare_accuracy
    from workbench.evaluate.gates import judge
    from workbench.search.evaluator import held_back, pass_quantile, predicted, predicted_interval

    utts = _speakers("q", 8, 5, "quiet") + _speakers("n", 8, 5, "noisy")
    hyps = [u.text if i % 7 else "A B C" for i, u in enumerate(utts)]  # one word lost in every 7th utterance
    accuracy = compare_accuracy(
        utts,
        {"fp32": [u.text for u in utts], "cand": hyps},
        "fp32",
        resamples=300,
        group_kinds=("condition",),
    )
    cand = accuracy.candidates["cand"]
    gates = held_back(GateConfig(max_latency_ms=50.0), 1.0 / 3.0)
    assert gates.max_wer_delta_points == pytest.approx(0.2) and gates.max_latency_ms is None
    assert gates.max_condition_wer_delta_points == pytest.approx(2.0 / 3.0)
    ratios = {"overall": 2.25, "condition quiet": 4.0}
    z = pass_quantile(0.8)
    judged = predicted(cand, ratios, z)
    checks = {
        c.name: c
        for c in next(
            v
            for v in judge(replace(accuracy, candidates={"cand": judged}), None, gates)
            if v.candidate == "cand"
        ).checks
    }
    for check, group in (
        ("overall", cand.overall),
        ("condition quiet", cand.by("condition")["quiet"]),
        ("condition noisy", cand.by("condition")["noisy"]),
    ):
        d = group.delta
        expected = predicted_interval(d, ratios.get(check, 1.0), z).high * 100
        assert expected > (d.estimate + (d.high - d.estimate) * math.sqrt(ratios.get(check, 1.0))) * 100
        assert checks[check].value == pytest.approx(expected) and not checks[check].passed  # ~3.6 points lost
    assert checks["overall"].limit == pytest.approx(0.2) and checks["condition noisy"].limit == pytest.approx(
        2 / 3
    )
    assert predicted(cand, {"overall": 1.0}, 0.0) is cand


def test_search_refuses_a_dev_set_that_shares_speakers_or_texts_with_the_signoff_set(tmp_path) -> None:
    from workbench.jobs.search import check_dev_apart
    from workbench.speech.store import SpeechSet

    dev = SpeechSet(tmp_path / "x-dev", {"content_hash": "a"}, _speakers("s", 2, 2, "quiet"))
    apart = SpeechSet(
        tmp_path / "x-eval",
        {"content_hash": "b"},
        [replace(u, speaker="other", text=f"T {u.id}") for u in dev.utterances],
    )
    check_dev_apart(dev, apart)
    check_dev_apart(dev, None)
    for shared in (
        [replace(u, text=f"T {u.id}") for u in dev.utterances],
        [replace(u, speaker="other") for u in dev.utterances],
    ):
        with pytest.raises(WorkbenchError, match="the dev set x-dev and the sign-off set x-eval share"):
            check_dev_apart(dev, SpeechSet(tmp_path / "x-eval", {"content_hash": "b"}, shared))
    with pytest.raises(WorkbenchError, match="is the sign-off set"):
        check_dev_apart(dev, SpeechSet(tmp_path / "x-eval", {"content_hash": "a"}, apart.utterances))


def test_groups_follow_the_wav2vec2_structure() -> None:
    assert (
        group_of("/wav2vec2/feature_extractor/conv_layers.1/conv/Conv") == "feature_extractor.conv_layers.1"
    )
    assert (
        group_of("/wav2vec2/encoder/layers.3/attention/k_proj/MatMul")
        == "encoder.layers.3.attention.qkv_proj"
    )
    assert group_of("/wav2vec2/encoder/layers.3/attention/MatMul_1") == "encoder.layers.3.attention.scores"
    assert (
        group_of("/wav2vec2/encoder/layers.3/attention/out_proj/MatMul")
        == "encoder.layers.3.attention.out_proj"
    )
    assert (
        group_of("/wav2vec2/encoder/layers.0/feed_forward/output_dense/MatMul")
        == "encoder.layers.0.feed_forward"
    )
    assert group_of("/wav2vec2/encoder/pos_conv_embed/conv/Conv") == "encoder.pos_conv_embed"
    assert group_of("/lm_head/MatMul") == "lm_head"
    assert group_of("/lm_head/MatMul", "node") == "/lm_head/MatMul"


# ---- planted sensitive layer


def test_layer_table_rows_in_graph_order_and_error_starts_at_the_planted_layer(
    planted, tiny_sets, tmp_path
) -> None:
    prepared, model, _, _ = planted
    # only the LM head in INT8: every tensor before it must be identical, the logits must not
    plan = plan_for("lm-head-int8", node_groups(model), "int8", "fp32", {"lm_head"})
    out = run_compare(
        prepared,
        tiny_sets.calib,
        1,
        plan=plan,
        sensitivity=False,
        out=tmp_path,
        progress=False,
    )
    data = out.layers
    rows = data["rows"]
    order = {o: i for i, n in enumerate(model.graph.node) for o in n.output}
    assert [order[r["tensor"]] for r in rows[:-1]] == sorted(order[r["tensor"]] for r in rows[:-1])
    assert rows[-1]["tensor"] == "logits"
    assert data["first_significant"]["group"] == "lm_head"
    assert all(
        r["cosine"] == 1.0 and r["polygraphy_passed"] in (True, None)
        for r in rows
        if not r["group"].startswith("lm_head")
    )
    head = next(r for r in rows if r["op"] == "MatMul" and r["module"] == "lm_head")
    assert head["precision"] == "int8" and head["sqnr_db"] < 20 and head["polygraphy_passed"] is False
    assert set(head["per_condition"]) == {"quiet", "noisy", "accented"}
    csv_lines = out.files["layers_csv"].read_text().splitlines()
    assert len(csv_lines) == len(rows) + 1 and csv_lines[0].startswith("index,tensor,node,op,module")
    on_disk = json.loads(out.files["layers_json"].read_text())
    assert on_disk["format"] == "workbench-layers/1" and on_disk["provenance"]["model"] == prepared.model_hash


def test_ranking_puts_the_planted_layer_first(planted, tiny_sets) -> None:
    _prepared, model, variants, _ = planted
    groups = node_groups(model)
    result = rank_groups(variants, groups, clips_per_condition(tiny_sets.calib, 1), progress=False)
    assert result.ranking[0] == "lm_head"
    first, second = result.results[0].damage.overall, result.results[1].damage.overall
    assert first.kl > 2 * second.kl and first.token_disagreement > 0.5
    assert sorted(result.ranking) == sorted(g.name for g in groups)
    assert result.rest_only.overall.kl == 0.0  # rest fp32: the reference itself
    layers = result.to_json()["layers"]
    assert [x["rank"] for x in layers] == list(range(1, len(groups) + 1)) and layers[0]["name"] == "lm_head"


def test_search_keeps_the_planted_layer_out_of_int8(planted, tiny_sets) -> None:
    prepared, model, variants, _ = planted
    groups = node_groups(model)
    ranked = rank_groups(variants, groups, clips_per_condition(tiny_sets.calib, 1), progress=False)
    clips = all_clips(tiny_sets.calib)
    own = transcribe(
        variants.runner(PrecisionPlan("fp32")), [c.audio for c in clips], prepared.description
    ).texts
    dev = [Clip(replace(c.utterance, text=t), c.audio) for c, t in zip(clips, own)]
    gates = GateConfig(max_wer_delta_points=25.0, max_condition_wer_delta_points=50.0)
    evaluator = DevEvaluator(variants, dev, gates, resamples=200, progress=False, model=prepared.description)
    result = search_plan(ranked.ranking, groups, evaluator.evaluate, refine=1)
    assert result.found is not None and result.found.passed
    assert "lm_head" in result.found.kept
    nodes = [n for g in groups for n in g.nodes]
    plan = result.found.evaluation.plan
    assert plan.precision_of("/lm_head/MatMul") == "fp16" and 0 < plan.int8_share(nodes) < 1
    assert result.evaluations == evaluator.count < len(groups)
    assert not result.int8_everywhere_passes
    # the planted layer alone in INT8 (everything else FP16) breaks the budget
    only_head = evaluator.evaluate(
        plan_for("only-head", groups, "fp16", "int8", {g.name for g in groups} - {"lm_head"})
    )
    assert not only_head.passed
    assert (
        only_head.failure.startswith(("overall: ", "condition ")) and "exceeds the limit" in only_head.failure
    )
    assert result.found.evaluation.failure == ""


# ---- CLI


@pytest.mark.slow
def test_search_verb_writes_plan_variant_and_records(planted, tiny_sets, tmp_path, capsys) -> None:
    prepared, _, _, engines = planted
    gates = tmp_path / "gates.json"
    gates.write_text(json.dumps({"max_wer_delta_points": 100.0, "max_condition_wer_delta_points": 100.0}))
    common = [
        "--model",
        prepared.model,
        "--calib-set",
        str(tiny_sets.calib.path),
        "--method",
        "max",
        "--no-recovery",  # the planted fixture's plain recipe, which the sign-off's default variants below take
        "--engines",
        str(engines),
        "--per-condition",
        "1",
        "--no-progress",
    ]
    assert (
        main(
            [
                "search",
                *common,
                "--gates",
                str(gates),
                "--resamples",
                "200",
                "--refine",
                "0",
                "--signoff-set",
                str(tiny_sets.eval.path),
            ]
        )
        == 0
    )
    out = prepared.folder / "compare"
    printed = capsys.readouterr().out
    assert "full WER evaluations:" in printed
    search = json.loads(next(out.glob("search-max-*.json")).read_text())
    assert search["format"] == "workbench-search/1"
    assert (
        search["dev_set"]["content_hash"] == tiny_sets.calib.content_hash
    )  # default dev set: calibration set
    assert set(search["provenance"]) >= {
        "model",
        "fp32_onnx",
        "cache",
        "calibration_set",
        "dev_set",
        "sensitivity",
    }
    assert search["evaluations"] == len(search["candidates"]) >= 1
    from workbench.config import SEARCH
    from workbench.evaluate.bootstrap import Interval
    from workbench.search.evaluator import block_ratios, pass_quantile, predicted_interval, widening_factors

    ratios = block_ratios(tiny_sets.calib.utterances, tiny_sets.eval.utterances)
    factors = widening_factors(ratios)
    assert search["budget"]["interval_widening"] == pytest.approx(factors["overall"])
    assert search["budget"]["interval_widening_per_check"] == pytest.approx(factors)
    assert search["budget"]["block_ratio_per_check"] == pytest.approx(ratios)
    assert search["budget"]["margin"] == pytest.approx(SEARCH.margin) == 0.0
    assert search["budget"]["confidence"] == pytest.approx(SEARCH.confidence)
    assert search["budget"]["judged_against"]["max_wer_delta_points"] == pytest.approx(100.0)
    assert f"{SEARCH.confidence:.0%} chance that the sign-off passes" in printed
    overall = search["candidates"][0]["delta"]["overall"]
    judged = search["candidates"][0]["judged_delta_high"]["overall"]
    # the candidate's last look: its dev utterances, their ratio to the sign-off set, its confidence
    evidence = search["candidates"][0]["evidence"]
    last = evidence["looks"][-1]
    assert last["utterances"] == evidence["utterances"] == search["candidates"][0]["latency"]["utterances"]
    assert evidence["stopped"] and evidence["blocks"] == search["sequential"]["blocks"]
    assert (
        last["confidence"] == pytest.approx(SEARCH.confidence) or evidence["blocks_used"] < evidence["blocks"]
    )
    expected = (
        predicted_interval(
            Interval(**overall),
            evidence["block_ratio_per_check"]["overall"],
            pass_quantile(last["confidence"]),
        ).high
        * 100
    )
    assert judged == pytest.approx(expected) and judged > overall["high"] * 100
    assert 0.0 < search["found"]["int8_macs_share"] <= 1.0 and search["macs"]["total"] > 0
    first = search["candidates"][0]
    assert first["phase"] == "int8-everywhere" and first["int8_share"] == 1.0
    assert set(first["delta"]["per_condition"]) == {"quiet", "noisy", "accented"}
    found = search["found"]
    assert found is not None and Path(found["onnx_path"]).is_file()  # 100-point budget: a plan passes
    assert PrecisionPlan.load(Path(found["plan_path"])).to_json() == found["plan"]
    # the tiny random-weight model's INT8 everywhere writes no text at all: never a pass, whatever the budget
    assert not search["int8_everywhere_passes"] and "wrote no text" in first["reasons"][0]
    assert 0.0 < found["int8_share"] < 1.0
    csv_text = (out / next(out.glob("search-max-*.json")).with_suffix(".csv").name).read_text()
    assert csv_text.startswith("step,phase") and csv_text.splitlines()[0].endswith(",wer_delta_high_judged")
    sensitivity = next(out.glob("sensitivity-max-*-rest-fp32.json"))
    assert json.loads(sensitivity.read_text())["layers"][0]["name"] == "lm_head"
    # a sensitivity file made from another model is refused
    other = json.loads(sensitivity.read_text())
    other["provenance"]["model"] = "0" * 64
    (tmp_path / "other.json").write_text(json.dumps(other))
    assert (
        main(["search", *common, "--sensitivity", str(tmp_path / "other.json"), "--out", str(tmp_path)]) == 1
    )
    assert "another model" in capsys.readouterr().err
    # the sign-off's default candidates pick the found plan up, unless it was searched on the evaluation set;
    # damaged search files beside it are passed over
    from workbench.jobs.signoff import build_default_variants

    (out / "search-zz-binary.json").write_bytes(b"\xff\xfe")
    (out / "search-zz-list.json").write_text("[1, 2]")

    built = build_default_variants(
        prepared.model, str(tiny_sets.calib.path), "max", root=engines, eval_hash=tiny_sets.eval.content_hash
    )
    assert [n for n, _ in built.candidates] == ["fp32", "fp16", "int8-max", "mixed"]
    assert dict(built.candidates)["mixed"] == Path(found["onnx_path"]) and built.sensitivity == sensitivity
    selected_on_eval = build_default_variants(
        prepared.model, str(tiny_sets.calib.path), "max", root=engines, eval_hash=tiny_sets.calib.content_hash
    )
    assert "mixed" not in dict(selected_on_eval.candidates)


def test_compare_verb_user_errors(planted, tiny_sets, tmp_path, capsys) -> None:
    from workbench.calibration import cache as cache_mod

    prepared, _, _, engines = planted
    calib = str(tiny_sets.calib.path)
    assert (
        main(
            [
                "compare",
                "--model",
                str(tmp_path / "no" / "model"),
                "--calib-set",
                calib,
                "--engines",
                str(tmp_path / "e"),
            ]
        )
        == 1
    )
    assert "does not exist" in capsys.readouterr().err
    assert (
        main(
            [
                "compare",
                "--model",
                prepared.model,
                "--calib-set",
                str(tmp_path / "missing-set"),
                "--engines",
                str(engines),
            ]
        )
        == 1
    )
    assert "no speech set" in capsys.readouterr().err
    foreign = tmp_path / "foreign.cache"
    cache_mod.CalibrationCache(
        prepared.cache.scales, {**prepared.cache.keys, "model": "f" * 64}, prepared.cache.header
    ).save(foreign)
    before = foreign.read_bytes()
    assert (
        main(
            [
                "compare",
                "--model",
                prepared.model,
                "--calib-set",
                calib,
                "--cache",
                str(foreign),
                "--engines",
                str(engines),
            ]
        )
        == 1
    )
    assert "another model" in capsys.readouterr().err and foreign.read_bytes() == before
    assert (
        main(
            [
                "compare",
                "--model",
                prepared.model,
                "--calib-set",
                calib,
                "--engines",
                str(engines),
                "--no-layers",
                "--no-sensitivity",
            ]
        )
        == 1
    )
    assert "nothing to do" in capsys.readouterr().err
    assert (
        main(
            [
                "search",
                "--model",
                prepared.model,
                "--calib-set",
                calib,
                "--method",
                "max",
                "--engines",
                str(engines),
                "--signoff-set",
                calib,
            ]
        )
        == 1
    )
    assert "is the sign-off set" in capsys.readouterr().err


def _files_and_hashes(folder: Path) -> dict[str, str]:
    from workbench.artifacts import sha256_file

    return {str(p.relative_to(folder)): sha256_file(p) for p in sorted(folder.rglob("*")) if p.is_file()}


def test_compare_and_search_bad_inputs_fail_with_one_error_line_and_write_nothing(
    planted, tiny_sets, tmp_path, capsys
) -> None:
    prepared, _, _, engines = planted
    common = [
        "--model",
        prepared.model,
        "--calib-set",
        str(tiny_sets.calib.path),
        "--method",
        "max",
        "--no-recovery",  # the planted fixture's plain recipe: its cache is reused, nothing is written
        "--engines",
        str(engines),
        "--per-condition",
        "1",
        "--no-progress",
        "--no-sensitivity",
    ]
    empty = tmp_path / "empty-set"  # a set whose manifest lists no utterance
    empty.mkdir()
    card = json.loads((tiny_sets.calib.path / "card.json").read_text())
    card.update(content_hash=hashlib.sha256(b"").hexdigest(), utterances=0)  # its card matches its content
    (empty / "card.json").write_text(json.dumps(card))
    (empty / "manifest.jsonl").write_text("")
    plans = {
        "corrupt": '{"name": broken',
        "list": "[1, 2]",
        "escape": '{"name": "../../escape", "default": "int8"}',
        "unknown": '{"name": "typo", "default": "int8", "overrides": {"/no/such/MatMul": "fp16"}}',
    }
    for name, text in plans.items():
        (tmp_path / f"{name}.json").write_text(text)
    cases = [
        (["compare", *common, "--plan", str(tmp_path / "corrupt.json")], "not valid JSON"),
        (["compare", *common, "--plan", str(tmp_path / "list.json")], "must be an object"),
        (["compare", *common, "--plan", str(tmp_path / "escape.json")], "names the variant's file"),
        (["compare", *common, "--plan", str(tmp_path / "unknown.json")], "a plan must name this model's"),
        (["compare", *common, "--plan", str(tmp_path / "missing.json")], "missing.json: does not exist"),
        (["compare", *common, "--clips-set", str(empty)], "clips set empty-set"),
        (["compare", *common, "--per-condition", "0"], "--per-condition: takes a whole number >= 1"),
        (["compare", *common, "--candidate", str(tmp_path / "none.onnx")], "is not a file"),
        (["compare", *common, "--cache", str(tmp_path / "none.cache")], "is not a file"),
        (["search", *common[:-1], "--dev-set", str(empty)], "dev set empty-set"),
        (
            ["search", *common[:-1], "--sensitivity", str(tmp_path / "corrupt.json")],
            "corrupt.json, line 1: not valid JSON",
        ),
    ]
    before = _files_and_hashes(engines)
    for argv, expected in cases:
        assert main(argv) == 1, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert err[-1].startswith("error: ") and expected in err[-1], (argv, err[-1:])
        assert not any(line.startswith("Traceback") for line in err)
    assert _files_and_hashes(engines) == before  # nothing written, nothing changed
    assert not (tmp_path.parent / "escape").exists()


def test_user_names_never_take_a_built_variants_files(planted, tmp_path) -> None:
    """A plan named like a built variant is refused before anything is written; a candidate file elsewhere that
    carries the built INT8 variant's name gets a layer table of its own."""
    from workbench.jobs.compare import _candidate, _candidate_name

    prepared = planted[0]
    for name in ("int8", "FP16", "fp32"):
        with pytest.raises(WorkbenchError, match="is reserved for the workbench's own"):
            _candidate(prepared, None, PrecisionPlan(name, "fp16"), None)
    label = f"int8-{prepared.tag}"
    elsewhere = tmp_path / f"model.{label}.onnx"
    elsewhere.write_bytes(prepared.fp32_onnx.read_bytes())
    assert _candidate(prepared, elsewhere, None, None)[0] == f"candidate-{label}"
    built = prepared.int8_onnx or prepared.folder / f"model.{label}.onnx"
    assert _candidate_name(prepared, built) == label  # the built variant itself keeps its name


def test_dev_baseline_is_transcribed_in_the_blocks_and_batches_candidates_get(planted, tiny_sets) -> None:
    """Batches are cut from the clips handed over together, and a padded clip of a model without an attention mask
    gets other logits: the FP32 baseline must be transcribed block by block exactly as each candidate is, so that a
    delta measures precision, not batching. A transcriber that runs the real variants records every hand-over."""
    prepared, model, variants, _ = planted
    # enough clips for two looks of at least SEARCH.min_block utterances (copies of the tiny set under new ids)
    clips = [
        Clip(replace(c.utterance, id=f"{c.utterance.id}-{k}"), c.audio)
        for k in range(11)
        for c in all_clips(tiny_sets.calib)
    ]
    calls: dict[str, list[tuple[int, ...]]] = {}

    def transcriber(plan: PrecisionPlan, indices) -> list[str]:
        calls.setdefault(plan.name, []).append(tuple(indices))
        with variants.runner(plan) as runner:
            return transcribe(
                runner, [clips[i].audio for i in indices], prepared.description, batch_size=4
            ).texts

    gates = GateConfig(max_wer_delta_points=25.0, max_condition_wer_delta_points=50.0)
    evaluator = DevEvaluator(
        variants, clips, gates, resamples=200, progress=False, model=prepared.description, blocks=2,
        batch_size=4, transcriber=transcriber,
    )  # fmt: skip
    assert len(evaluator.ends) >= 2  # more than one block, else there is nothing to cut
    assert [len(c) for c in calls["fp32"]] == [b - a for a, b in zip([0, *evaluator.ends], evaluator.ends)]
    groups = node_groups(model)
    for plan in (
        plan_for("all-fp16", groups, "fp16", "int8", {g.name for g in groups}),
        PrecisionPlan("fp32"),
    ):
        evaluation = evaluator.evaluate(plan)
        name = next(n for n in calls if n != "fp32" and n.startswith(plan.name))
        assert calls[name] == calls["fp32"][: len(calls[name])]
        assert evaluation.utterances == sum(len(c) for c in calls[name])
    same = evaluator.evaluate(PrecisionPlan("fp32"))  # FP32 judged as a plan: the baseline's own transcripts
    assert same.overall.delta is not None and same.overall.delta.estimate == 0.0

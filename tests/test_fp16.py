"""FP16 where FP16 belongs: whole-graph FP16 and FP16 between Q/DQ islands, FP32 islands from calibration
statistics (tiny ONNX graphs built here with planted overflows), plans over every node, the overflow check,
the TensorRT-RTX build summary, and (slow) WER within the gates on demo speech."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from workbench.config import EvidenceConfig
from workbench.errors import WorkbenchError
from workbench.optional import has_module
from workbench.quantize.float_stats import collect_float_stats
from workbench.quantize.guard import FP16_MAX, fp32_islands
from workbench.quantize.overflow import check_overflow, count_nonfinite
from workbench.quantize.plan import FP16, INT8, PrecisionPlan, tensor_types
from workbench.quantize.qdq import build_variant

HAS_BUILDER = has_module("tensorrt") or has_module("tensorrt_rtx_bindings")
RATE = 16_000


def _model(nodes, inits, name: str = "g", out_dims=("batch", "frames", 5)) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info("input_values", TP.FLOAT, ["batch", "samples"])],
        [helper.make_tensor_value_info("logits", TP.FLOAT, list(out_dims))],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def planted(gain: float = 20000.0) -> onnx.ModelProto:
    """waveform -> Conv -> x gain -> / gain -> Transpose -> MatMul -> logits; ``big`` (Mul output) passes 65504
    on normalised speech-like audio; Shape + Reshape keep the frames (a node without float output)."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(np.array([1], np.int64), "axes"),
        numpy_helper.from_array((rng.standard_normal((4, 1, 8)) * 0.5).astype(np.float32), "conv_w"),
        numpy_helper.from_array(np.array(gain, np.float32), "gain"),
        numpy_helper.from_array(rng.standard_normal((4, 5)).astype(np.float32), "proj_w"),
    ]
    nodes = [
        helper.make_node("Unsqueeze", ["input_values", "axes"], ["x3"], name="unsqueeze"),
        helper.make_node("Conv", ["x3", "conv_w"], ["conv"], name="conv", strides=[4]),
        helper.make_node("Mul", ["conv", "gain"], ["big"], name="amplify"),
        helper.make_node("Div", ["big", "gain"], ["back"], name="attenuate"),
        helper.make_node("Shape", ["back"], ["back_shape"], name="shape"),
        helper.make_node("Reshape", ["back", "back_shape"], ["same"], name="reshape"),
        helper.make_node("Transpose", ["same"], ["frames"], name="to_frames", perm=[0, 2, 1]),
        helper.make_node("MatMul", ["frames", "proj_w"], ["logits"], name="proj"),
    ]
    return _model(nodes, inits, "planted")


def clips(speech_like, seconds=(0.5, 1.0, 1.5)) -> list[np.ndarray]:
    return [speech_like(s, seed=i) for i, s in enumerate(seconds)]


def run(path: Path, audio: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    from workbench.model.features import normalise_audio

    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        None, {"input_values": normalise_audio(audio)[None]}
    )[0]


def cast_boundaries(variant: onnx.ModelProto, plan: PrecisionPlan, source: onnx.ModelProto) -> list[str]:
    """Every Cast that does not sit where an FP16 region meets FP32 (graph IO or a node the plan keeps FP32)."""
    side = {p.node: p.compute_type for p in plan.placements(source)}
    types = tensor_types(variant)
    producer = {o: n for n in variant.graph.node for o in n.output}
    readers = defaultdict(list)
    for node in variant.graph.node:
        for name in node.input:
            readers[name].append(node)
    inputs, outputs = {i.name for i in variant.graph.input}, {o.name for o in variant.graph.output}
    wrong = []
    for cast in (n for n in variant.graph.node if n.op_type == "Cast"):
        src, dst = cast.input[0], cast.output[0]
        to = next(a.i for a in cast.attribute if a.name == "to")
        if types.get(src) == to:
            wrong.append(f"{cast.name}: no-op")
        elif src in producer and producer[src].op_type == "Cast":
            wrong.append(f"{cast.name}: Cast after Cast")
        elif to == TP.FLOAT16 and not (src in inputs or side.get(producer[src].name) == "fp32"):
            wrong.append(f"{cast.name}: to FP16 after an FP16 node")
        elif to == TP.FLOAT and not (dst in outputs or all(side.get(r.name) == "fp32" for r in readers[dst])):
            wrong.append(f"{cast.name}: to FP32 before an FP16 node")
    return wrong


@pytest.fixture
def planted_file(tmp_path) -> Path:
    path = tmp_path / "planted.onnx"
    onnx.save(planted(), str(path))
    return path


def test_planted_overflow_gets_an_fp32_island_and_the_unguarded_variant_is_named(
    planted_file, tmp_path, speech_like
) -> None:
    audio = clips(speech_like)
    stats = collect_float_stats(planted_file, audio, progress=False)
    assert stats.amax["big"] > FP16_MAX > stats.amax["conv"]  # the plant works: FP16 cannot hold `big`
    model = onnx.load(str(planted_file))
    keep = fp32_islands(model, stats)
    assert list(keep) == ["amplify", "attenuate"]  # the writer and the reader of `big`, nothing else
    assert keep["amplify"].startswith("writes big: |x| up to") and keep["attenuate"].startswith("reads big")
    guarded = build_variant(planted_file, {}, FP16.with_guard(keep), tmp_path / "guarded.onnx")
    plain = build_variant(planted_file, {}, FP16, tmp_path / "plain.onnx")
    ref = run(planted_file, audio[2])
    assert np.abs(run(guarded, audio[2]) - ref).max() < 0.05 * np.abs(ref).max()
    report = check_overflow(plain, audio, every_tensor_clips=2)
    assert not report.clean and report.first.tensor == "big" and report.first.node == "amplify"
    assert "inf/NaN in big written by amplify (Mul)" in report.summary()
    assert check_overflow(guarded, audio, every_tensor_clips=2).clean
    graph = onnx.load(str(guarded))
    casts = [(n.input[0], n.output[0]) for n in graph.graph.node if n.op_type == "Cast"]
    assert casts == [
        ("input_values", "input_values_fp16"),
        ("conv", "conv_fp32"),
        ("back", "back_fp16"),
        ("logits_fp16", "logits"),
    ]  # one in, one out, one pair around the island
    assert cast_boundaries(graph, FP16.with_guard(keep), model) == []


def test_plan_covers_every_node_and_lists_fp32_reasons(planted_file, tmp_path, speech_like) -> None:
    model = onnx.load(str(planted_file))
    keep = fp32_islands(model, collect_float_stats(planted_file, clips(speech_like), progress=False))
    plan = PrecisionPlan("mixed", "int8", {"conv": "fp16"}).with_guard(keep)
    placed = {p.node: p for p in plan.placements(model)}
    assert list(placed) == [n.name for n in model.graph.node]
    assert {n: p.precision for n, p in placed.items()} == {
        "unsqueeze": "fp16",
        "conv": "fp16",
        "amplify": "fp32",
        "attenuate": "fp32",
        "shape": "none",
        "reshape": "fp16",
        "to_frames": "fp16",
        "proj": "int8",
    }
    assert placed["proj"].compute_type == "fp16" and placed["amplify"].reason == keep["amplify"]
    plan.save(tmp_path / "plan.json", model)
    saved = json.loads((tmp_path / "plan.json").read_text())
    assert [n["node"] for n in saved["nodes"]] == list(placed)
    assert saved["counts"] == {"fp16": 4, "fp32": 2, "int8": 1, "none": 1}
    assert saved["keep_fp32"] == keep and saved["rest"] == "fp16"
    assert PrecisionPlan.load(tmp_path / "plan.json") == plan
    assert PrecisionPlan("fp32").rest == "fp32" and PrecisionPlan("int8", "int8").rest == "fp16"
    with pytest.raises(WorkbenchError, match="rest"):
        PrecisionPlan("bad", "int8", rest="bf16")
    with pytest.raises(WorkbenchError, match="does not have"):
        build_variant(planted_file, {}, FP16.with_guard({"no-such-node": "x"}), tmp_path / "x.onnx")


def test_int8_variant_carries_fp16_between_islands_at_opset_19(planted_file, tmp_path, speech_like) -> None:
    model = onnx.load(str(planted_file))
    keep = fp32_islands(model, collect_float_stats(planted_file, clips(speech_like), progress=False))
    amax = {"x3": 4.0, "frames": 8.0}
    plan = INT8.with_guard(keep)
    path = build_variant(planted_file, amax, plan, tmp_path / "int8.onnx")
    graph = onnx.load(str(path))
    onnx.checker.check_model(graph, full_check=True)  # FP16 Q/DQ is valid ONNX from opset 19 on
    assert graph.opset_import[0].version == 19
    inits = {i.name: i for i in graph.graph.initializer}
    for node in (n for n in graph.graph.node if n.op_type == "DequantizeLinear"):
        assert inits[node.input[1]].data_type == TP.FLOAT16  # so the DQ output is FP16
        if node.input[0] in inits:  # weights: no value clips against the FP16-rounded scale
            scale = numpy_helper.to_array(inits[node.input[1]]).astype(np.float32)
            q = numpy_helper.to_array(inits[node.input[0]])
            assert np.abs(q).max() <= 127 and scale.min() > 0
    w = numpy_helper.to_array(next(i for i in model.graph.initializer if i.name == "proj_w"))
    wq = numpy_helper.to_array(inits["proj_w1_int8"]).astype(np.float32) * numpy_helper.to_array(
        inits["proj_w1_scale"]
    ).astype(np.float32)
    assert np.abs(wq - w).max() <= np.abs(w).max(axis=0).max() / 127  # within one step of the original
    assert cast_boundaries(graph, plan, model) == []
    rest32 = build_variant(
        planted_file, amax, PrecisionPlan("int8", "int8", rest="fp32"), tmp_path / "r32.onnx"
    )
    kept = onnx.load(str(rest32))
    assert kept.opset_import[0].version == 17 and not any(n.op_type == "Cast" for n in kept.graph.node)
    audio = clips(speech_like)[1]
    ref = run(planted_file, audio)
    err16, err32 = (float(np.abs(run(p, audio) - ref).mean()) for p in (path, rest32))
    assert err16 < 1.2 * err32 + 1e-3 * float(np.abs(ref).mean())  # FP16 between the islands adds ~nothing


def _time_norm_model(scale: float) -> onnx.ModelProto:
    """Conv -> InstanceNormalization over time (GroupNorm as exported) -> LayerNorm over 4 channels -> logits;
    a Softmax over the logits times ``scale`` (a large Softmax input when scale is large)."""
    rng = np.random.default_rng(1)
    inits = [
        numpy_helper.from_array(np.array([1], np.int64), "axes"),
        numpy_helper.from_array((rng.standard_normal((4, 1, 8)) * 0.2).astype(np.float32), "conv_w"),
        numpy_helper.from_array(np.ones(4, np.float32), "in_s"),
        numpy_helper.from_array(np.zeros(4, np.float32), "in_b"),
        numpy_helper.from_array(np.ones(4, np.float32), "ln_s"),
        numpy_helper.from_array(np.zeros(4, np.float32), "ln_b"),
        numpy_helper.from_array(np.array(scale, np.float32), "scale"),
    ]
    nodes = [
        helper.make_node("Unsqueeze", ["input_values", "axes"], ["x3"], name="unsqueeze"),
        helper.make_node("Conv", ["x3", "conv_w"], ["conv"], name="conv", strides=[4]),
        helper.make_node("InstanceNormalization", ["conv", "in_s", "in_b"], ["normed"], name="group_norm"),
        helper.make_node("Transpose", ["normed"], ["frames"], name="to_frames", perm=[0, 2, 1]),
        helper.make_node(
            "LayerNormalization", ["frames", "ln_s", "ln_b"], ["ln"], name="layer_norm", axis=-1
        ),
        helper.make_node("Mul", ["ln", "scale"], ["scores"], name="scores"),
        helper.make_node("Softmax", ["scores"], ["logits"], name="softmax", axis=-1),
    ]
    return _model(nodes, inits, "norms", ("batch", "frames", 4))


def test_time_sums_are_projected_and_softmax_inputs_guarded(tmp_path, speech_like) -> None:
    quiet = tmp_path / "quiet.onnx"
    onnx.save(_time_norm_model(1.0), str(quiet))
    stats = collect_float_stats(quiet, clips(speech_like, (0.5, 1.0)), progress=False)
    norm, layer = stats.accumulators["group_norm"], stats.accumulators["layer_norm"]
    assert norm.grows_with_length and not layer.grows_with_length and layer.count == 4
    assert norm.count == (RATE - 8) // 4 + 1  # frames of the 1 s clip
    assert norm.sum_sq < FP16_MAX / 4 < norm.largest(30.0)  # fine on 1 s clips, not at 30 s
    keep = fp32_islands(onnx.load(str(quiet)), stats)
    assert list(keep) == ["group_norm"] and "projected to 30 s clips" in keep["group_norm"]
    loud = tmp_path / "loud.onnx"
    onnx.save(_time_norm_model(300.0), str(loud))
    keep = fp32_islands(
        onnx.load(str(loud)), collect_float_stats(loud, clips(speech_like, (0.5,)), progress=False)
    )
    assert list(keep) == ["group_norm", "scores", "softmax"]  # the Softmax and the writer of its input
    assert "FP16's step 0.5 " in keep["softmax"] and keep["scores"].startswith("writes the input of softmax")


def test_constant_beyond_fp16_keeps_its_reader(tmp_path, speech_like) -> None:
    model = planted(gain=1e6)  # the constant itself cannot be stored in FP16
    path = tmp_path / "const.onnx"
    onnx.save(model, str(path))
    keep = fp32_islands(model, collect_float_stats(path, clips(speech_like, (0.5,)), progress=False))
    assert "reads constant gain" in keep["attenuate"] or "reads big" in keep["attenuate"]
    variant = build_variant(path, {}, FP16, tmp_path / "fp16.onnx")  # even without statistics
    consts = {i.name: i.data_type for i in onnx.load(str(variant)).graph.initializer}
    assert consts["gain"] == TP.FLOAT and "gain_fp16" not in consts


def test_signoff_fails_a_candidate_with_an_overflow_and_names_it(planted_file, tmp_path, speech_like) -> None:
    from workbench.evaluate.added_checks import add_overflow_checks
    from workbench.evaluate.gates import CandidateVerdict

    plain = build_variant(planted_file, {}, FP16, tmp_path / "plain.onnx")
    reports = {
        "fp16": check_overflow(plain, clips(speech_like), every_tensor_clips=1),
        "fp32": check_overflow(planted_file, clips(speech_like), every_tensor_clips=1),
    }
    verdicts = [CandidateVerdict("fp32", True), CandidateVerdict("fp16", True)]
    add_overflow_checks(verdicts, reports)
    assert verdicts[0].passed and not verdicts[1].passed
    assert "inf/NaN in big written by amplify (Mul)" in verdicts[1].summary


@pytest.mark.skipif(
    not HAS_BUILDER,
    reason="no TensorRT builder: pip install tensorrt-rtx-cu13-libs tensorrt-rtx-cu13-bindings",
)
def test_tensorrt_build_counts_non_compute_layers_by_precision(planted_file, tmp_path, speech_like) -> None:
    from workbench.backends.tensorrt.builder import BuildSettings, build_engine
    from workbench.backends.tensorrt.profile import Range

    keep = fp32_islands(
        onnx.load(str(planted_file)), collect_float_stats(planted_file, clips(speech_like), progress=False)
    )
    settings = BuildSettings(batches=(1, 2), samples=Range(8_000, 16_000, 24_000))
    counts = {}
    for name, plan in (
        ("fp16", FP16.with_guard(keep)),
        ("int8", INT8.with_guard(keep)),
        ("fp32", PrecisionPlan("fp32")),
    ):
        variant = build_variant(planted_file, {"x3": 4.0, "frames": 8.0}, plan, tmp_path / f"{name}.onnx")
        summary = build_engine(variant, settings, tmp_path / "engines").summary
        counts[name] = (summary.compute_precisions(), summary.layer_precisions())
        assert summary.by_name("amplify").outputs[0].dtype == ("fp32")  # the island, in every variant
        if name != "fp32":
            assert summary.by_name("to_frames").outputs[0].dtype == "fp16"
    assert (
        counts["fp16"][0] == {"fp16": 2}
        and counts["int8"][0] == {"int8": 2}
        and counts["fp32"][0] == {"fp32": 2}
    )
    assert counts["fp16"][1]["fp16"] > counts["fp16"][1].get("fp32", 0) >= 2  # amplify, attenuate
    assert "fp16" not in counts["fp32"][1] and counts["int8"][1]["qdq"] == 6


@pytest.mark.slow
def test_demo_fp16_and_mixed_variants_pass_the_wer_gates(tmp_path) -> None:
    """Demo model, demo-style sets (small), percentile calibration, a sign-off with the overflow check: the FP16
    variant passes every WER gate (identical transcripts), no candidate overflows, and the mixed plan the
    demo's search found with FP16 between the Q/DQ islands (feature encoder, feature projection, the attention
    scores of layers 2 and 5 and the feed-forward of layers 1, 2 and 5 in FP16, the other 40 compute nodes INT8)
    recovers part of what INT8 everywhere loses.

    At 48 evaluation utterances (about 480 words) one changed word moves WER by 0.2 points, so the default
    0.3-point gate on the upper end of the 95 % interval cannot be met by any variant with INT8 in it here
    (measured: mixed +0.41 [+0.00, +0.98], INT8 everywhere +1.04); that the mixed and FP16 variants stay
    within the gates on demo-eval (300 utterances) is the full demo's result in docs/fp16.md."""
    from workbench.calibration import cache as cache_mod
    from workbench.calibration.methods import MethodSpec
    from workbench.config import SetBuildConfig
    from workbench.jobs import calibrate
    from workbench.jobs.signoff import SignoffInputs
    from workbench.jobs.signoff import run as run_signoff
    from workbench.quantize.plan import quantizable_nodes
    from workbench.resources import demo_model_dir
    from workbench.speech.builder import build_synthetic_sets
    from workbench.speech.tts import available_voices

    if not available_voices():
        pytest.skip("no TTS engine installed (run ./setup.sh)")
    built = build_synthetic_sets(
        SetBuildConfig(name="demo", calib_per_condition=8, eval_per_condition=16, seed=3),
        root=tmp_path / "sets",
    )
    result = calibrate.run(
        calibrate.CalibrateInputs(
            demo_model_dir(),
            str(built.calib.path),
            MethodSpec("percentile", 99.99),
            engines=tmp_path / "engines",
        )
    )
    assert json.loads(result.fp16_onnx.with_suffix(".plan.json").read_text())["counts"]["fp16"] > 300
    model = onnx.load(str(result.fp32_onnx))
    searched = re.compile(
        r"/(feature_extractor|feature_projection)/|layers\.[25]/attention/MatMul|"
        r"layers\.[125]/feed_forward/"
    )
    fp16_nodes = {n: "fp16" for n in quantizable_nodes(model) if searched.search(n)}
    assert len(fp16_nodes) == 18
    mixed = build_variant(
        result.fp32_onnx,
        cache_mod.load(result.cache).amax(),
        PrecisionPlan("mixed", "int8", fp16_nodes).with_guard(result.guard),
        result.fp32_onnx.with_name("model.mixed.onnx"),
    )
    candidates = [
        ("fp32", result.fp32_onnx),
        ("fp16", result.fp16_onnx),
        ("mixed", mixed),
        ("int8", result.int8_onnx),
    ]
    record = run_signoff(
        SignoffInputs(
            candidates=candidates,
            eval_set=built.eval,
            out_dir=tmp_path / "report",
            calib_set=built.calib,
            latency=None,
            resamples=500,
            batch_size=1,  # clip by clip: on 48 utterances batching's padding moves single words
            evidence=EvidenceConfig(min_speakers=0, min_reference_words=0),  # 48 utterances: too few
        ),
    ).record
    verdicts = {v["candidate"]: v for v in record["verdicts"]}
    assert verdicts["fp16"]["passed"], verdicts["fp16"]["summary"]
    for name in ("fp16", "mixed", "int8"):
        assert [c["passed"] for c in verdicts[name]["checks"] if c["name"] == "overflow"] == [True], name
    delta = {
        name: record["accuracy"]["candidates"][name]["overall"]["delta"]["estimate"]
        for name in ("mixed", "int8")
    }
    assert delta["mixed"] < delta["int8"], delta


def test_float_statistics_file_is_reused_and_a_damaged_one_recomputed(
    planted_file, tmp_path, tiny_sets
) -> None:
    """``guard_for_set`` keeps its statistics beside the export, keyed by export and set: reused while the keys
    match; a damaged file or one made for another export is recomputed, never used or fatal."""
    from workbench.quantize.float_stats import FloatStats
    from workbench.quantize.guard import guard_for_set

    keep, path = guard_for_set(planted_file, tiny_sets.calib, tmp_path)
    assert (
        list(keep) == ["amplify", "attenuate"]
        and path.name == f"float-{tiny_sets.calib.content_hash[:12]}.json"
    )
    written = path.read_bytes()
    assert (
        guard_for_set(planted_file, tiny_sets.calib, tmp_path) == (keep, path)
        and path.read_bytes() == written
    )
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(WorkbenchError, match="delete the file to recompute"):
        FloatStats.load(path)
    assert guard_for_set(planted_file, tiny_sets.calib, tmp_path)[0] == keep
    assert FloatStats.load(path).keys["calibration_set"] == tiny_sets.calib.content_hash
    other = tmp_path / "other.onnx"
    onnx.save(planted(gain=1.0), str(other))  # another export, same set: the stored statistics are not used
    assert guard_for_set(other, tiny_sets.calib, tmp_path)[0] == {}


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_nonfinite_counts_inf_and_nan_of_every_float_width(dtype):
    values = np.array([[0.0, 1.5, -2.0], [np.inf, -np.inf, np.nan]], dtype=dtype)
    largest = np.finfo(dtype).max
    finite = np.array([largest, -largest, np.finfo(dtype).tiny / 4, 0.0], dtype=dtype)
    assert count_nonfinite(values) == 3
    assert count_nonfinite(values[:, ::2]) == 2  # a strided view is counted on its own values
    assert count_nonfinite(finite) == 0
    assert count_nonfinite(np.array([1, 2], dtype=np.int64)) == 0


def test_tensor_types_are_remembered_by_structure_and_never_across_a_type_change():
    """The same graph with other weights gets the types it had; a Cast to another type, an initializer of another
    type or another graph input type gets its own (a key that left one of them out would hand back stale types)."""

    def model(cast_to: int, weight_type: int, input_type: int) -> onnx.ModelProto:
        weight = numpy_helper.from_array(np.arange(4, dtype=np.float32).reshape(2, 2), "w")
        if weight_type == TP.FLOAT16:
            weight = numpy_helper.from_array(np.arange(4, dtype=np.float16).reshape(2, 2), "w")
        graph = helper.make_graph(
            [
                helper.make_node("Cast", ["x"], ["xc"], to=weight_type),
                helper.make_node("MatMul", ["xc", "w"], ["h"]),
                helper.make_node("Cast", ["h"], ["y"], to=cast_to),
            ],
            "g",
            [helper.make_tensor_value_info("x", input_type, [1, 2])],
            [helper.make_tensor_value_info("y", cast_to, [1, 2])],
            [weight],
        )
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])

    base = model(TP.FLOAT, TP.FLOAT, TP.FLOAT)
    assert tensor_types(base)["y"] == TP.FLOAT and tensor_types(base)["h"] == TP.FLOAT
    other_weights = model(TP.FLOAT, TP.FLOAT, TP.FLOAT)
    other_weights.graph.initializer[0].CopyFrom(numpy_helper.from_array(np.ones((2, 2), np.float32), "w"))
    assert tensor_types(other_weights) == tensor_types(base)
    assert tensor_types(model(TP.FLOAT16, TP.FLOAT, TP.FLOAT))["y"] == TP.FLOAT16
    half = tensor_types(model(TP.FLOAT, TP.FLOAT16, TP.FLOAT))
    assert half["h"] == TP.FLOAT16 and half["w"] == TP.FLOAT16
    assert tensor_types(model(TP.FLOAT, TP.FLOAT, TP.DOUBLE))["x"] == TP.DOUBLE
    mutated = tensor_types(base)
    mutated["y"] = TP.INT8  # a caller changing its copy changes nothing remembered
    assert tensor_types(base)["y"] == TP.FLOAT

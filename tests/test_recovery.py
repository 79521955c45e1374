"""Accuracy-recovery transforms on small graphs built in code: SmoothQuant folding keeps the FP32 function, bias
correction removes a planted output shift, range refinement never loses to the best single method."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from workbench.calibration.channels import ChannelStats
from workbench.calibration.collectors import StreamingStats
from workbench.calibration.methods import MethodSpec, compute_amax
from workbench.calibration.recovery import RecoveryOptions, channel_stats_for, choose_smoothing
from workbench.calibration.refine import CANDIDATES, histogram_error, refine_tensor, rows_error
from workbench.errors import WorkbenchError
from workbench.quantize.bias_correction import correct_biases
from workbench.quantize.plan import PrecisionPlan
from workbench.quantize.qdq import dequantized_weight, variant_model, with_opset
from workbench.quantize.smoothing import apply_smoothing, output_error, smoothing_scales, smoothing_targets

C, H = 8, 6


def _init(name: str, values: np.ndarray) -> TensorProto:
    return numpy_helper.from_array(np.asarray(values, np.float32), name)


def block_model(seed: int = 0) -> onnx.ModelProto:
    """x -> LayerNorm -> {q, k MatMuls (+bias), residual Add} -> GELU-ish -> MatMul -> MatMul+Add -> MatMul -> y.

    Covers the three folds: a LayerNorm read also by a residual Add (scale node), a LayerNorm read only by
    MatMuls, a MatMul+bias read only by a MatMul (previous layer), and a non-linear producer (scale node)."""
    rng = np.random.default_rng(seed)
    w = {
        k: rng.normal(size=s).astype(np.float32)
        for k, s in {"wq": (C, C), "wk": (C, C), "w1": (C, H), "w2": (H, C), "w3": (C, C)}.items()
    }
    inits = [_init(k, v) for k, v in w.items()] + [
        _init("g1", rng.uniform(0.5, 2, C)),
        _init("b1", rng.normal(size=C)),
        _init("g2", rng.uniform(0.5, 2, C)),
        _init("b2", rng.normal(size=C)),
        _init("bq", rng.normal(size=C)),
        _init("bk", rng.normal(size=C)),
        _init("bb", rng.normal(size=C)),
    ]
    nodes = [
        helper.make_node("LayerNormalization", ["x", "g1", "b1"], ["ln1"], name="ln1", axis=-1),
        helper.make_node("MatMul", ["ln1", "wq"], ["q0"], name="q"),
        helper.make_node("Add", ["q0", "bq"], ["q"], name="q_bias"),
        helper.make_node("MatMul", ["ln1", "wk"], ["k0"], name="k"),
        helper.make_node("Add", ["k0", "bk"], ["k"], name="k_bias"),
        helper.make_node("Add", ["q", "k"], ["qk"], name="qk"),
        helper.make_node("Add", ["qk", "ln1"], ["res"], name="residual"),
        helper.make_node("LayerNormalization", ["res", "g2", "b2"], ["ln2"], name="ln2", axis=-1),
        helper.make_node("MatMul", ["ln2", "w1"], ["h0"], name="ffn_in"),
        helper.make_node("Tanh", ["h0"], ["h"], name="act"),
        helper.make_node("MatMul", ["h", "w2"], ["m0"], name="ffn_out"),
        helper.make_node("Add", ["m0", "bb"], ["m"], name="ffn_bias"),
        helper.make_node("MatMul", ["m", "w3"], ["y"], name="head"),
    ]
    graph = helper.make_graph(
        nodes,
        "block",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", "t", C])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", "t", C])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    """Outputs by ONNX Runtime without graph optimisation (its fused integer kernels may saturate on x86 without
    VNNI; unfused, DequantizeLinear and a float MatMul compute the Q/DQ arithmetic exactly)."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def inputs(seed: int = 1, mean: float = 0.0) -> np.ndarray:
    x = np.random.default_rng(seed).normal(mean, 1.0, size=(2, 16, C)).astype(np.float32)
    x[..., 3] *= 30.0  # an outlier channel
    return x


def test_targets_and_every_fold_keep_the_fp32_function() -> None:
    model = block_model()
    targets = {t.tensor: t for t in smoothing_targets(model)}
    assert set(targets) == {"ln1", "ln2", "h", "m"}
    assert targets["ln1"].nodes == ("q", "k")
    rng = np.random.default_rng(3)
    scales = {
        t: rng.uniform(0.2, 5.0, len(targets[t].weight_absmax(model))).astype(np.float32) for t in targets
    }
    smoothed, folds = apply_smoothing(model, scales)
    assert folds == {"ln1": "scale-node", "ln2": "layernorm", "h": "scale-node", "m": "previous-layer"}
    onnx.checker.check_model(smoothed)
    x = inputs()
    np.testing.assert_allclose(run(smoothed, x), run(model, x), rtol=1e-4, atol=1e-4)
    # the weights really moved: the smoothed graph is not the same graph
    before = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    after = {i.name: numpy_helper.to_array(i) for i in smoothed.graph.initializer}
    assert not np.allclose(before["w1"], after["w1"]) and not np.allclose(before["g2"], after["g2"])


def test_smoothing_lowers_the_output_error_of_an_outlier_channel() -> None:
    rng = np.random.default_rng(0)
    rows = rng.normal(size=(256, C)).astype(np.float32)
    rows[:, 3] *= 50.0
    weight = rng.normal(size=(C, 16)).astype(np.float32)
    amax = float(np.abs(rows).max())
    off = output_error(rows, weight, np.ones(C, np.float32), amax)
    s = smoothing_scales(np.abs(rows).max(0), np.abs(weight).max(1), 0.5)
    on = output_error(rows, weight, s, float(np.max(np.abs(rows / s))))
    assert on < off / 4


def test_strength_search_keeps_off_when_nothing_helps() -> None:
    model = block_model()
    stats, channels = StreamingStats(), channel_stats_for(model)
    x = inputs()
    names = ["ln1", "ln2", "h", "m"]
    session = ort.InferenceSession(
        _with_outputs(model, names).SerializeToString(), providers=["CPUExecutionProvider"]
    )
    for name, value in zip(names, session.run(names, {"x": x})):
        channels.update(name, value)
        stats.update(name, value)
    amax = {n: stats.maxes.amax[n] for n in names}
    scales, record = choose_smoothing(model, smoothing_targets(model), channels, stats, amax, "auto")
    for tensor, entry in record.items():
        assert entry["error"] <= entry["error_unsmoothed"]
        assert (entry["alpha"] is None) == (tensor not in scales)


def _with_outputs(model: onnx.ModelProto, names: list[str]) -> onnx.ModelProto:
    out = onnx.ModelProto()
    out.CopyFrom(model)
    out.graph.output.extend(helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in names)
    return out


def test_channel_statistics_are_exact_and_rows_bounded() -> None:
    channels = ChannelStats({"a": -1, "c": 1}, {"a"}, max_rows=20, rows_per_update=8)
    rng = np.random.default_rng(0)
    parts = [rng.normal(size=(1, 7 + k, C)).astype(np.float32) for k in range(5)]
    for p in parts:
        channels.update("a", p)
        channels.update("c", np.moveaxis(p, -1, 1))
    flat = np.concatenate([p.reshape(-1, C) for p in parts])
    for name in ("a", "c"):
        np.testing.assert_allclose(channels.absmax(name), np.abs(flat).max(0))
        np.testing.assert_allclose(channels.mean(name), flat.mean(0), rtol=1e-6, atol=1e-7)
    assert channels.rows("a").shape == (20, C) and channels.rows("c") is None


def bias_model(weight: np.ndarray, bias: np.ndarray | None, op: str) -> onnx.ModelProto:
    if op == "MatMul":
        nodes = [helper.make_node("MatMul", ["x", "w"], ["z"], name="mm")]
        inits = [_init("w", weight)]
        if bias is not None:
            nodes.append(helper.make_node("Add", ["z", "b"], ["y"], name="bias"))
            inits.append(_init("b", bias))
        else:
            nodes.append(helper.make_node("Identity", ["z"], ["y"], name="out"))
        shape_in, shape_out = ["n", "t", weight.shape[0]], ["n", "t", weight.shape[1]]
    else:
        nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="conv", kernel_shape=[weight.shape[2]])]
        inits = [_init("w", weight)]
        shape_in, shape_out = ["n", weight.shape[1], "t"], ["n", weight.shape[0], "t2"]
    graph = helper.make_graph(
        nodes,
        "b",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape_in)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape_out)],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("op,has_bias", [("MatMul", True), ("MatMul", False), ("Conv", False)])
def test_bias_correction_removes_a_planted_shift(op: str, has_bias: bool) -> None:
    rng = np.random.default_rng(0)
    if op == "MatMul":
        weight = rng.normal(size=(C, H)).astype(np.float32)
        weight[0] *= 40.0  # one large row: the other rows round coarsely on their output channel's scale
        x = rng.normal(3.0, 0.5, size=(4, 64, C)).astype(np.float32)  # non-zero mean: a planted shift
        means = {"x": x.reshape(-1, C).mean(0)}
        node = "mm"
    else:
        weight = rng.normal(size=(H, C, 3)).astype(np.float32)
        weight[:, 0] *= 40.0
        x = rng.normal(3.0, 0.5, size=(4, C, 64)).astype(np.float32)
        means = {"x": np.moveaxis(x, 1, -1).reshape(-1, C).mean(0)}
        node = "conv"
    model = bias_model(weight, rng.normal(size=H).astype(np.float32) if has_bias else None, op)
    plan = PrecisionPlan("t", "int8", rest="fp32")
    amax = {"x": float(np.abs(x).max()) * 4}  # a wide activation range: the weights' rounding dominates
    exact = run(model, x)
    shift_before = _mean_shift(run(variant_model(model, amax, plan), x), exact, op)
    corrected, record = correct_biases(model, means, {node}, np.float32)
    assert set(record) == {node}
    onnx.checker.check_model(corrected)
    shift_after = _mean_shift(run(variant_model(corrected, amax, plan), x), exact, op)
    assert np.abs(shift_before).max() > 0.05
    assert np.abs(shift_after).max() < np.abs(shift_before).max() / 5


def _mean_shift(got: np.ndarray, exact: np.ndarray, op: str) -> np.ndarray:
    axis = (0, 1) if op == "MatMul" else (0, 2)
    return (got - exact).mean(axis=axis)


def test_weight_quantisation_error_matches_the_qdq_graph() -> None:
    rng = np.random.default_rng(0)
    weight = rng.normal(size=(C, H)).astype(np.float32)
    model = bias_model(weight, None, "MatMul")
    x = np.eye(C, dtype=np.float32)[None]  # one-hot rows read the weight rows back
    plan = PrecisionPlan("t", "int8", rest="fp32")
    got = run(variant_model(model, {"x": 1.0}, plan), x)[0]
    np.testing.assert_allclose(got, dequantized_weight(weight, 1, np.float32), rtol=1e-6, atol=1e-7)


def test_refinement_never_worse_than_the_best_single_method() -> None:
    rng = np.random.default_rng(0)
    rows = rng.standard_t(2.5, size=(512, C)).astype(np.float32)  # heavy tails: the methods disagree
    weight = rng.normal(size=(C, 12)).astype(np.float32)
    weight_q = dequantized_weight(weight, 1, np.float32)
    stats = StreamingStats()
    stats.update("a", rows)
    stats.update("b", rows[:, :4])
    spec = MethodSpec("percentile", 99.99)
    exact = rows @ weight
    out = refine_tensor("a", stats, spec, rows, weight, weight_q)
    singles = [
        rows_error(rows, weight_q, exact, compute_amax(c, stats.maxes.amax["a"], stats.histogram("a")))
        for c in CANDIDATES
    ]
    assert out.score == "output" and out.error <= min(singles) + 1e-12 and out.error <= out.own_error
    hist_only = refine_tensor("b", stats, spec)
    hist = stats.histogram("b")
    singles = [histogram_error(hist, compute_amax(c, stats.maxes.amax["b"], hist)) for c in CANDIDATES]
    assert hist_only.score == "activation" and hist_only.error <= min(singles) + 1e-12


def test_options_are_checked_and_recorded() -> None:
    with pytest.raises(WorkbenchError, match="alpha in"):
        RecoveryOptions(smoothquant="1.5")
    with pytest.raises(WorkbenchError, match="alpha in"):
        RecoveryOptions(smoothquant="strong")
    assert RecoveryOptions().params() == {} and RecoveryOptions().tag() == ""
    options = RecoveryOptions("0.5", bias_correction=True, refine_ranges=True)
    assert options.tag() == "sq0.5-rr-bc"
    assert options.params()["recovery"]["smoothquant"] == "0.5"


def named_model() -> onnx.ModelProto:
    """MatMuls named as a Wav2Vec2 export names them (only the names matter here)."""
    names = [
        "/wav2vec2/feature_extractor/conv_layers.0/conv/Conv",
        "/wav2vec2/feature_extractor/conv_layers.1/conv/Conv",
        "/wav2vec2/encoder/layers.0/attention/q_proj/MatMul",
        "/wav2vec2/encoder/layers.0/attention/k_proj/MatMul",
        "/wav2vec2/encoder/layers.0/attention/v_proj/MatMul",
        "/wav2vec2/encoder/layers.0/attention/MatMul",
        "/wav2vec2/encoder/layers.0/attention/MatMul_1",
        "/lm_head/MatMul",
    ]
    nodes, inits, prev = [], [], "x"
    for k, name in enumerate(names):
        if name.endswith(("attention/MatMul", "attention/MatMul_1")):  # activation x activation
            nodes.append(helper.make_node("MatMul", [prev, prev], [f"t{k}"], name=name))
        else:
            inits.append(_init(f"w{k}", np.eye(C)))
            nodes.append(helper.make_node("MatMul", [prev, f"w{k}"], [f"t{k}"], name=name))
        prev = f"t{k}"
    graph = helper.make_graph(
        nodes,
        "named",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [C, C])],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [C, C])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_speech_preset_keeps_first_conv_and_head() -> None:
    from workbench.quantize.preset import speech_preset

    plan = speech_preset(named_model())
    assert plan.default == "int8"
    assert plan.overrides == {
        "/wav2vec2/feature_extractor/conv_layers.0/conv/Conv": "fp16",
        "/lm_head/MatMul": "fp16",
    }


def test_finer_groups_split_and_narrow() -> None:
    from workbench.compare.groups import node_groups
    from workbench.search.finer import narrow, parts_of

    groups = {g.name: g for g in node_groups(named_model())}
    qkv = groups["encoder.layers.0.attention.qkv_proj"]
    parts = parts_of(qkv)
    assert [p.nodes for p in parts] == [(n,) for n in qkv.nodes] and len(parts) == 3
    assert len(parts_of(groups["encoder.layers.0.attention.scores"])) == 2
    assert parts_of(groups["lm_head"]) == []
    # only keeping v_proj in FP16 passes: narrow finds it after two failures
    decided = narrow(qkv, lambda part: "v_proj" in part.nodes[0])
    assert decided.kept_fp16 == (qkv.nodes[2],) and [ok for _, ok in decided.tried] == [False, False, True]
    whole = narrow(qkv, lambda part: False)
    assert whole.kept_fp16 == qkv.nodes and not whole.narrowed


def test_fp8_variant_runs_and_matches_the_e4m3_emulation() -> None:
    from workbench.quantize.fp8 import TARGET_CAPABILITY, fp8_supported, to_e4m3, to_fp8

    rng = np.random.default_rng(0)
    weight = rng.normal(size=(C, H)).astype(np.float32)
    model = bias_model(weight, None, "MatMul")
    x = rng.standard_t(2.0, size=(2, 32, C)).astype(np.float32)  # long tails: FP8 beats INT8 here
    amax = float(np.abs(x).max())
    plan = PrecisionPlan("t", "int8", rest="fp32")  # FP32 between the islands: the emulation is exact
    source = with_opset(model, 19)  # FP8 Q/DQ needs opset 19
    variant = variant_model(source, {"x": amax}, plan)
    converted = to_fp8(variant, {"mm"}, source)
    assert converted.nodes == ["mm"] and not converted.skipped
    got = run(converted.model, x)
    stored = {i.name: numpy_helper.to_array(i).astype(np.float32) for i in converted.model.graph.initializer}
    a_scale, w_scale = stored["x_scale"], stored["mm_w1_scale"]
    np.testing.assert_allclose(a_scale, amax / 448.0, rtol=2e-3)  # the INT8 scale times 127 / 448
    xq = to_e4m3(x / a_scale).astype(np.float32) * a_scale
    wq = to_e4m3(weight / w_scale).astype(np.float32) * w_scale
    np.testing.assert_allclose(got, xq @ wq, rtol=1e-5, atol=1e-5)
    exact = x @ weight
    int8_err = np.mean((run(variant, x) - exact) ** 2)
    assert np.mean((got - exact) ** 2) < int8_err
    assert not fp8_supported(TARGET_CAPABILITY["A100"]) and fp8_supported(TARGET_CAPABILITY["H100"])

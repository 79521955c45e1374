"""Per-channel shift and scale of Conv and MatMul inputs (``calibrate --shift-scale``): the folded graph computes the
same function, the INT8 conv or MatMul of an uneven one-sided input loses far less with it, the search takes it
only where it helps (and searches a MatMul input only when it is one-sided), and a calibration keeps the shifts
beside the cache, builds its variants with them and refuses a cache whose shifts went missing. Small graphs in code, the tiny random Wav2Vec2 of ``test_recovery_calibrate``."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from tests.test_clip_search import conv_model
from tests.test_recovery_wiring import calibrate_tiny
from workbench.calibration import cache as cache_mod
from workbench.calibration import recovery as rec
from workbench.calibration.shift_scale import search_shift_scale
from workbench.errors import WorkbenchError
from workbench.jobs.prepare import prepare
from workbench.jobs.search import recovery_summary
from workbench.quantize.plan import INT8, PrecisionPlan
from workbench.quantize.qdq import variant_model
from workbench.quantize.shift_scale import ChannelShift, apply_shift_scale, shifted_name

SCALES = np.array([0.02, 0.05, 0.1, 0.3, 1.0, 2.0, 4.0, 8.0], np.float32)  # uneven channel widths


def relu_conv_model(seed: int = 0, bias: bool = False) -> onnx.ModelProto:
    """``test_clip_search``'s two-conv model with the Relu's channels ``SCALES`` apart (one-sided and uneven)."""
    return conv_model(seed, SCALES, bias)


def clip(seed: int, n: int = 4000) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, 1, n).astype(np.float32)


def run(model: onnx.ModelProto, x: np.ndarray, outputs: tuple[str, ...] = ("logits",)) -> list[np.ndarray]:
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    for name in outputs:
        if name not in {o.name for o in probe.graph.output}:
            probe.graph.output.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, None))
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(probe.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(list(outputs), {"input_values": x[None]})


def channel_values(model: onnx.ModelProto, tensor: str, channel_axis: int = 0) -> np.ndarray:
    """``tensor``'s values on four clips as [channels, values] (``channel_axis``: its channels' axis in one clip's
    output: 0 for a conv's [channels, time], 1 for a MatMul's [time, channels])."""
    return np.concatenate(
        [np.moveaxis(run(model, clip(s), (tensor,))[0][0], channel_axis, 0) for s in range(4)], axis=1
    )


def channel_range(
    model: onnx.ModelProto, tensor: str = "r0", channel_axis: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    values = channel_values(model, tensor, channel_axis)
    return values.min(axis=1), values.max(axis=1)


def assert_even_channels(moved: onnx.ModelProto, tensor: str, channel_axis: int) -> np.ndarray:
    """On the clips the ranges came from, every channel of what the layer reads spans the same range; returns
    the shifted values [channels, values]."""
    z = channel_values(moved, shifted_name(tensor), channel_axis)
    spans = z.max(axis=1) - z.min(axis=1)
    np.testing.assert_allclose(spans, spans[0], rtol=1e-3)
    return z


@pytest.mark.parametrize("bias", [False, True])
def test_the_folded_graph_computes_the_same_function_without_weight_rounding(bias: bool) -> None:
    model = relu_conv_model(bias=bias)
    low, high = channel_range(model)
    shift = ChannelShift.for_range(low, high, 1.0)
    moved, changed = apply_shift_scale(model, {"r0": shift}, {"conv1"}, dtype=None)
    assert changed == ["conv1"]
    x = clip(9)
    np.testing.assert_allclose(run(moved, x)[0], run(model, x)[0], rtol=1e-4, atol=1e-4)
    # on the clips the ranges came from, every channel of what the conv reads spans the same range around zero
    z = assert_even_channels(moved, "r0", 0)
    spans = z.max(axis=1) - z.min(axis=1)
    np.testing.assert_allclose(z.max(axis=1) + z.min(axis=1), 0, atol=1e-3 * spans[0])
    weights = {i.name for i in moved.graph.initializer}
    assert "w1" not in weights and ("b1" in weights) == bias  # the scaled weight replaced the only reader's


def test_a_node_outside_the_set_or_a_grouped_conv_is_left_alone() -> None:
    model = relu_conv_model()
    low, high = channel_range(model)
    shift = ChannelShift.for_range(low, high, 1.0)
    moved, changed = apply_shift_scale(model, {"r0": shift}, {"conv0"}, dtype=None)
    assert changed == [] and len(moved.graph.node) == len(model.graph.node)


@pytest.mark.parametrize(
    ("make", "tensor", "channel_axis", "node"),
    [(relu_conv_model, "r0", 0, "conv1"), (lambda: relu_matmul_model(seed=2), "r", 1, "mm1")],
    ids=["conv", "matmul"],
)
def test_the_int8_layer_of_an_uneven_one_sided_input_loses_far_less_with_the_shift(
    make, tensor: str, channel_axis: int, node: str
) -> None:
    model = make()
    low, high = channel_range(model, tensor, channel_axis)
    shift = ChannelShift.for_range(low, high, 0.5)
    plan = PrecisionPlan(node, "fp32", {node: "int8"})
    x = clip(11)
    exact = run(model, x)[0]
    plain = run(variant_model(model, {tensor: float(high.max())}, plan), x)[0]
    moved, _ = apply_shift_scale(model, {tensor: shift}, {node}, dtype=np.float32)
    width = float(np.max((high - low) / 2 / shift.scale))
    shifted = run(variant_model(moved, {shifted_name(tensor): width}, plan), x)[0]
    plain_error, shifted_error = np.abs(plain - exact).mean(), np.abs(shifted - exact).mean()
    assert shifted_error < plain_error / 2, (plain_error, shifted_error)


def test_the_search_takes_the_shift_where_it_helps_and_keeps_off_on_ties() -> None:
    model = relu_conv_model()
    amax = {"u": 4.0, "r0": float(channel_range(model)[1].max())}
    choices = search_shift_scale(model, amax, [clip(s) for s in range(6)], progress=False)
    assert set(choices) == {"u", "r0"}
    moved = choices["r0"]
    assert moved.shift is not None and moved.candidate.startswith("alpha-")
    assert moved.kl < moved.off_kl / 2
    for choice in choices.values():
        assert choice.kl <= choice.off_kl and choice.scores["off"] == choice.off_kl
        assert (choice.candidate == "off") == (choice.shift is None)
    # given the clipping search's KL of the tensor as it is, "off" is not scored again
    again = search_shift_scale(
        model, amax, [clip(s) for s in range(6)], progress=False, off_scores={"r0": 0.0}
    )
    assert again["r0"].candidate == "off" and again["r0"].shift is None


@pytest.fixture(scope="module")
def tiny_ss(tmp_path_factory: pytest.TempPathFactory, tiny_sets):
    return calibrate_tiny(
        tmp_path_factory, tiny_sets, rec.RecoveryOptions(shift_scale=True, bias_correction=True)
    )


def test_a_calibration_keeps_the_shifts_and_builds_its_variants_with_them(
    tiny_ss, tiny_sets, tmp_path
) -> None:
    model, root, made = tiny_ss
    assert made.cache.name.endswith("-ss-bc.cache")
    cache = cache_mod.load(made.cache)
    record = cache.recovery["shift_scale"]
    shifts = rec.load_shifts(rec.shifts_path(made.cache))
    assert record["changed"] > 0 and shifts is not None and len(shifts) == record["changed"]
    for tensor in shifts:  # the shifted tensor's threshold is in the cache, the original's stays
        assert cache.amax()[shifted_name(tensor)] == pytest.approx(
            record["choices"][tensor]["amax"], rel=1e-6
        )
        assert tensor in cache.amax()
    given = prepare(model, str(tiny_sets.calib.path), "percentile", root=root, cache_path=made.cache)
    assert given.recovered is not None and given.recovered.techniques == ["shift_scale", "bias_correction"]
    variant = tmp_path / "int8.onnx"
    out = given.build(INT8, variant)
    assert out is not None and out["shift_scale"]["nodes"] and out["bias_correction"]["nodes"] > 0
    summary = recovery_summary(out)  # what a search record says of a found plan built so
    assert summary is not None and summary["shifted_nodes"] == out["shift_scale"]["nodes"]
    written = onnx.load(str(variant))
    assert {shifted_name(t) for t in shifts} <= {o for n in written.graph.node for o in n.output}
    feed = {"input_values": np.random.default_rng(0).normal(0, 0.1, (1, 16000)).astype(np.float32)}
    logits = ort.InferenceSession(str(variant), providers=["CPUExecutionProvider"]).run(None, feed)[0]
    assert np.isfinite(logits).all()
    # an FP16 plan keeps the export's convolutions as they are
    fp16_graph, fp16_record = given.recovered.for_plan(
        PrecisionPlan("fp16", "fp16"), onnx.load(str(made.fp32_onnx))
    )
    assert fp16_record["shift_scale"]["nodes"] == []
    assert not any(n.output[0].endswith("_shift_scaled") for n in fp16_graph.graph.node)
    # the shifts file gone: the cache is refused, saying which file
    rec.shifts_path(made.cache).rename(tmp_path / "kept.npz")
    try:
        with pytest.raises(WorkbenchError, match="shifts and scales"):
            prepare(model, str(tiny_sets.calib.path), "percentile", root=root, cache_path=made.cache)
    finally:
        (tmp_path / "kept.npz").rename(rec.shifts_path(made.cache))


def test_bias_correction_on_top_of_the_shift_removes_the_rounded_weights_mean_error() -> None:
    from workbench.quantize.recovered import RecoveredSource

    model = relu_conv_model(seed=3)
    low, high = channel_range(model)
    shift = ChannelShift.for_range(low, high, 0.5)
    values = channel_values(model, "r0")
    width = float(np.max((high - low) / 2 / shift.scale))
    amax = {"u": 4.0, "r0": float(high.max()), shifted_name("r0"): width}
    plan = PrecisionPlan("conv1", "fp32", {"conv1": "int8"})
    x = clip(21)
    exact = run(model, x, ("c1",))[0][0]
    errors = {}
    for label, means in (("shift", None), ("shift+bc", {"r0": values.mean(axis=1)})):
        graph, _ = RecoveredSource(None, means, shifts={"r0": shift}).for_plan(plan, model)
        out = run(variant_model(graph, amax, plan), x, ("c1",))[0][0]
        errors[label] = np.abs((out - exact).mean(axis=1)).mean()  # the mean shift per output channel
    # the mean of z instead of x / s leaves the rounding times c / s: three times the shift-only error here
    assert errors["shift+bc"] <= errors["shift"] * 1.25, errors


def relu_matmul_model(seed: int = 0, bias: bool = True) -> onnx.ModelProto:
    """input_values [1, 4000] -> frames [1, 500, 8] (centred) -> MatMul -> per-channel ``SCALES`` -> Relu ``r``
    (one-sided, uneven) -> MatMul ``mm1`` (-> bias Add when ``bias``) -> logits [1, 500, 6]."""
    rng = np.random.default_rng(seed)
    inits = [
        helper.make_tensor("shape", TensorProto.INT64, [3], [1, 500, 8]),
        onnx.numpy_helper.from_array(rng.normal(0, 0.5, (8, 8)).astype(np.float32), "w0"),
        onnx.numpy_helper.from_array(SCALES, "channel_scales"),
        onnx.numpy_helper.from_array(rng.normal(0, 0.5, (8, 6)).astype(np.float32), "w1"),
    ]
    nodes = [
        helper.make_node("Reshape", ["input_values", "shape"], ["x"], name="frames"),
        helper.make_node("MatMul", ["x", "w0"], ["h"], name="mm0"),
        helper.make_node("Mul", ["h", "channel_scales"], ["hs"], name="uneven"),
        helper.make_node("Relu", ["hs"], ["r"], name="relu"),
        helper.make_node("MatMul", ["r", "w1"], ["y" if bias else "logits"], name="mm1"),
    ]
    if bias:
        inits.append(onnx.numpy_helper.from_array(rng.normal(0, 0.1, 6).astype(np.float32), "b1"))
        nodes.append(helper.make_node("Add", ["y", "b1"], ["logits"], name="bias1"))
    graph = helper.make_graph(
        nodes,
        "relu_matmul",
        [helper.make_tensor_value_info("input_values", TensorProto.FLOAT, [1, 4000])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 500, 6])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("bias", [False, True])
def test_a_matmul_reads_its_input_shifted_and_computes_the_same_function(bias: bool) -> None:
    model = relu_matmul_model(bias=bias)
    low, high = channel_range(model, "r", 1)
    shift = ChannelShift.for_range(low, high, 1.0)
    moved, changed = apply_shift_scale(model, {"r": shift}, {"mm1"}, dtype=None)
    assert changed == ["mm1"]
    x = clip(9)
    np.testing.assert_allclose(run(moved, x)[0], run(model, x)[0], rtol=1e-4, atol=1e-4)
    assert_even_channels(moved, "r", 1)
    adds = [n for n in moved.graph.node if n.op_type == "Add"]
    assert len(adds) == 1  # the shift went into the bias Add, or a new one when there was none
    assert ("b1" in {i.name for i in moved.graph.initializer}) == bias


def test_the_search_takes_a_one_sided_matmul_input_and_skips_a_centred_one() -> None:
    model = relu_matmul_model(seed=1)
    amax = {"x": 4.0, "r": float(channel_range(model, "r", 1)[1].max())}
    choices = search_shift_scale(model, amax, [clip(s) for s in range(6)], progress=False)
    assert set(choices) == {"r"}  # "x" (mm0's input) is centred: not searched
    assert choices["r"].shift is not None and choices["r"].kl < choices["r"].off_kl / 2


def test_a_channels_range_reaches_its_calibration_pass_top_where_the_sample_fell_short() -> None:
    from workbench.calibration.shift_scale import candidate_shifts

    values = np.abs(np.random.default_rng(0).normal(0, 1, (4, 3000))).astype(np.float32)  # [channels, values]
    top = np.array([10.0, 0.5, 10.0, 0.5], np.float32)  # channels 0 and 2 reached 10 over the whole pass
    plain, raised = candidate_shifts(values)[1.0], candidate_shifts(values, top)[1.0]
    high = np.percentile(values, 99.99, axis=1)
    np.testing.assert_allclose(raised.shift * 2 - values.min(axis=1), np.maximum(high, top), rtol=1e-5)
    np.testing.assert_allclose(plain.shift * 2 - values.min(axis=1), high, rtol=1e-5)

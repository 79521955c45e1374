"""ONNX Runtime CPU runs a TensorRT-bound FP16 Q/DQ graph's INT8 nodes on its integer kernels
(``workbench.backends.integer_nodes``): a small Conv + MatMul graph made by the real ``variant_model``, the real
ONNX Runtime, and a NumPy reference that computes what TensorRT's INT8 kernels compute."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from workbench.backends.integer_nodes import DISABLED_OPTIMIZERS, has_fp16_qdq_nodes, with_integer_nodes
from workbench.backends.onnxruntime import OnnxRuntimeRunner, session_options
from workbench.quantize.plan import PrecisionPlan
from workbench.quantize.qdq import quantize_weight, scales_in, variant_model

RNG = np.random.default_rng(3)
CONV_W = (RNG.standard_normal((8, 1, 5)) * 0.4).astype(np.float32)
KEY_W = (RNG.standard_normal((8, 8)) * 0.3).astype(np.float32)
VALUE_W = (RNG.standard_normal((8, 6)) * 0.3).astype(np.float32)
AMAX = {"x3": 4.0, "frames": 3.0}


def source_model() -> onnx.ModelProto:
    """waveform -> Conv -> Transpose -> ``frames``, read by two MatMuls (one activation, two INT8 readers) -> Add."""
    inits = [
        numpy_helper.from_array(np.array([1], np.int64), "axes"),
        numpy_helper.from_array(CONV_W, "conv_w"),
        numpy_helper.from_array(KEY_W[:, :6], "key_w"),
        numpy_helper.from_array(VALUE_W, "value_w"),
    ]
    nodes = [
        helper.make_node("Unsqueeze", ["input_values", "axes"], ["x3"], name="unsqueeze"),
        helper.make_node("Conv", ["x3", "conv_w"], ["conv"], name="conv", strides=[5]),
        helper.make_node("Transpose", ["conv"], ["frames"], name="transpose", perm=[0, 2, 1]),
        helper.make_node("MatMul", ["frames", "key_w"], ["key"], name="key"),
        helper.make_node("MatMul", ["frames", "value_w"], ["value"], name="value"),
        helper.make_node("Add", ["key", "value"], ["logits"], name="add"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("input_values", TP.FLOAT, ["batch", "samples"])],
        [helper.make_tensor_value_info("logits", TP.FLOAT, ["batch", "frames", 6])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def int8_variant(rest: str = "fp16") -> onnx.ModelProto:
    return variant_model(source_model(), AMAX, PrecisionPlan("int8", "int8", rest=rest))


def run(model: onnx.ModelProto, x: np.ndarray, optimized: Path | None = None) -> np.ndarray:
    options = session_options(threads=1)
    if optimized is not None:
        options.optimized_model_filepath = str(optimized)
    session = ort.InferenceSession(
        model.SerializeToString(),
        options,
        providers=["CPUExecutionProvider"],
        disabled_optimizers=list(DISABLED_OPTIMIZERS),
    )
    return session.run(None, {"input_values": x})[0]


def integer_reference(x: np.ndarray) -> np.ndarray:
    """What TensorRT's INT8 kernels compute: int8 x int8 products summed exactly, scaled in float32, stored FP16."""

    def quantized(values: np.ndarray, amax: float) -> tuple[np.ndarray, np.float32]:
        scale = np.float32(scales_in(np.float32(amax), np.float16))
        x16 = values.astype(np.float16).astype(np.float32)
        return np.clip(np.round(x16 / scale), -128, 127).astype(np.int64), scale

    qx, sx = quantized(x, AMAX["x3"])
    qw, sw = quantize_weight(CONV_W, 0, np.float16)
    frames_count = x.shape[1] // 5
    windows = qx[:, : frames_count * 5].reshape(x.shape[0], frames_count, 5)
    conv = np.einsum("bfk,ok->bfo", windows, qw[:, 0, :].astype(np.int64)).astype(np.float32)
    frames = (conv * sx * sw.astype(np.float32)).astype(np.float16).astype(np.float32)
    qf, sf = quantized(frames, AMAX["frames"])
    out = np.zeros((x.shape[0], frames_count, 6), np.float32)
    for weight in (KEY_W[:, :6], VALUE_W):
        qm, sm = quantize_weight(weight, 1, np.float16)
        product = (qf @ qm.astype(np.int64)).astype(np.float32) * sf * sm.astype(np.float32)
        out += product.astype(np.float16).astype(np.float32)
    return out


def test_int8_nodes_compute_exact_integer_sums_on_onnx_runtimes_integer_kernels(tmp_path: Path) -> None:
    variant = int8_variant()
    assert has_fp16_qdq_nodes(variant)
    rewritten, what = with_integer_nodes(variant)
    # conv, key, value; 2 activations (x3, frames) cast to float32; their FP16 Q and DQ replaced by private pairs
    assert (what.nodes, what.activations, what.dropped) == (3, 2, 4)
    # every tensor of the TensorRT-bound graph but the replaced Q/DQ outputs keeps its name
    names = {o for n in variant.graph.node for o in n.output if not o.endswith("quantized")}
    assert names <= {o for n in rewritten.graph.node for o in n.output}
    x = (RNG.standard_normal((2, 400)) * 1.2).astype(np.float32)
    got = run(rewritten, x, tmp_path / "optimized.onnx")
    fused = [n.op_type for n in onnx.load(str(tmp_path / "optimized.onnx")).graph.node]
    assert fused.count("MatMulIntegerToFloat") == 2 and "MatMul" not in fused  # both readers of ``frames``
    reference = integer_reference(x)
    np.testing.assert_allclose(got, reference, rtol=2e-3, atol=2e-3 * np.abs(reference).max())
    # the FP16-dequantized graph computes on rounded operands: near the reference, not closer than the rewrite
    before = run(variant, x)
    assert np.abs(got - reference).max() <= np.abs(before - reference).max() + 1e-6


def test_float32_qdq_graphs_and_fp32_models_are_left_as_they_are() -> None:
    assert not has_fp16_qdq_nodes(int8_variant(rest="fp32"))  # the ONNX Runtime CPU flavour's kind of graph
    assert not has_fp16_qdq_nodes(source_model())
    same, what = with_integer_nodes(int8_variant(rest="fp32"))
    assert what.nodes == 0 and len(same.graph.node) == len(int8_variant(rest="fp32").graph.node)


def test_the_cpu_runner_rewrites_at_load_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "model.int8.onnx"
    onnx.save(int8_variant(), str(path))
    x = (RNG.standard_normal((1, 400)) * 1.2).astype(np.float32)
    with OnnxRuntimeRunner(path, threads=1) as runner:
        got = runner.infer({"input_values": x})["logits"]
        described = runner.describe()
    assert "integer kernels" in described["int8_nodes"] and described["int8_nodes"].endswith(": 3 nodes")
    np.testing.assert_allclose(got, integer_reference(x), rtol=2e-3, atol=2e-3 * np.abs(got).max())
    assert (
        path.read_bytes() == onnx.load(str(path)).SerializeToString()
    )  # the file TensorRT builds: untouched
    with OnnxRuntimeRunner(source_model().SerializeToString(), threads=1) as plain:
        assert "int8_nodes" not in plain.describe()
    with OnnxRuntimeRunner(path, threads=1, optimization="basic") as unfused:
        assert "int8_nodes" not in unfused.describe()  # only where ONNX Runtime fuses (full optimisation)


def test_a_bias_computed_in_the_graph_is_cast_for_the_float32_node() -> None:
    """Exports whose Conv/Gemm bias is a computed FP16 tensor (HuBERT's, WavLM's positional convs) still load: the
    bias reaches the float32 node through a Cast, and the output matches the graph as written."""
    inits = [
        numpy_helper.from_array((RNG.standard_normal((6, 4)) * 0.3).astype(np.float32), "w"),
        numpy_helper.from_array((RNG.standard_normal(4) * 0.1).astype(np.float32), "b_half"),
        numpy_helper.from_array(np.array(2.0, np.float32), "two"),
    ]
    nodes = [
        helper.make_node("Mul", ["b_half", "two"], ["b"], name="bias"),  # a bias the graph computes
        helper.make_node("Gemm", ["input_values", "w", "b"], ["logits"], name="gemm"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("input_values", TP.FLOAT, ["batch", 6])],
        [helper.make_tensor_value_info("logits", TP.FLOAT, ["batch", 4])],
        inits,
    )
    source = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    source.ir_version = 8
    variant = variant_model(source, {"input_values": 3.0}, PrecisionPlan("int8", "int8"))
    rewritten, what = with_integer_nodes(variant)
    assert what.nodes == 1
    casts = [n for n in rewritten.graph.node if n.op_type == "Cast" and n.input[0] == "b"]
    assert (
        len(casts) == 1
        and casts[0].output[0] in next(n for n in rewritten.graph.node if n.name == "gemm").input
    )
    x = (RNG.standard_normal((3, 6))).astype(np.float32)
    np.testing.assert_allclose(run(rewritten, x), run(variant, x), rtol=1e-2, atol=1e-2)

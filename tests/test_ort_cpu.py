"""The ONNX Runtime CPU flavour of a Q/DQ variant: same numbers as the TensorRT-bound graph, fused by ORT.

Hand-built graphs check each rewrite exactly (uint8 activations, Conv as im2col + MatMul for odd lengths,
strides and a bias, shared DQs, folded weights of a grouped Conv); a tiny random Wav2Vec2 checks the whole
path: outputs close to the TensorRT-bound INT8 graph and to FP32, the input graph untouched, and ORT's
optimised graph made of fused integer ops where the TensorRT-bound graph is not.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from workbench.backends.onnxruntime import session_options
from workbench.quantize.ort_cpu import build_cpu_variant, cpu_flavour

RNG = np.random.default_rng(0)


def run(model: onnx.ModelProto | Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    src = str(model) if isinstance(model, Path) else model.SerializeToString()
    return ort.InferenceSession(src, providers=["CPUExecutionProvider"]).run(None, feeds)


def optimised_ops(model: onnx.ModelProto | Path, tmp_path: Path, name: str) -> Counter:
    """Op types of the graph ORT actually runs (level 'all'), dumped with optimized_model_filepath."""
    opts = session_options(None, "all")
    opts.optimized_model_filepath = str(tmp_path / f"{name}.optimised.onnx")
    src = str(model) if isinstance(model, Path) else model.SerializeToString()
    ort.InferenceSession(src, opts, providers=["CPUExecutionProvider"])
    return Counter(n.op_type for n in onnx.load(opts.optimized_model_filepath).graph.node)


def qdq_conv_model(cin: int, cout: int, kernel: int, stride: int, bias: bool = False, group: int = 1,
                   pads: tuple[int, int] = (0, 0), consumers: int = 1) -> onnx.ModelProto:
    """x -> Q/DQ (int8, zero point 0) -> Conv with a per-channel DQ'd int8 weight, like build_variant writes."""
    w = RNG.standard_normal((cout, cin // group, kernel)).astype(np.float32)
    ws = (np.abs(w).max(axis=(1, 2)) / 127).astype(np.float32)
    wq = np.clip(np.round(w / ws[:, None, None]), -127, 127).astype(np.int8)
    inits = [numpy_helper.from_array(np.array(0.02, np.float32), "xs"),
             numpy_helper.from_array(np.array(0, np.int8), "xz"), numpy_helper.from_array(wq, "wq"),
             numpy_helper.from_array(ws, "ws"), numpy_helper.from_array(np.zeros(cout, np.int8), "wz")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"], name="q"),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"], name="dq"),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"], name="wdq", axis=0)]
    inputs = ["xd", "wd"]
    if bias:
        inits.append(numpy_helper.from_array(RNG.standard_normal(cout).astype(np.float32), "b"))
        inputs.append("b")
    outputs = []
    for i in range(consumers):
        nodes.append(helper.make_node("Conv", inputs, [f"y{i}"], name=f"conv{i}", strides=[stride], group=group,
                                      pads=list(pads)))
        outputs.append(helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, ["batch", "channels", "frames"]))
    graph = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                            [None, cin, None])], outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("cin,kernel,stride,length,bias", [(32, 3, 2, 101, False), (32, 3, 2, 100, True),
                                                            (16, 4, 2, 37, False), (64, 2, 2, 9, True),
                                                            (32, 5, 3, 5, False)])
def test_conv_becomes_integer_matmul_with_the_same_output(cin, kernel, stride, length, bias, tmp_path) -> None:
    model = qdq_conv_model(cin, 24, kernel, stride, bias)
    x = RNG.standard_normal((2, cin, length)).astype(np.float32)
    flavoured, stats = cpu_flavour(model)
    assert stats["conv_as_matmul"] == 1 and stats["uint8_activations"] == 1
    assert not any(n.op_type == "Conv" for n in flavoured.graph.node)
    (want,), (got,) = run(model, {"x": x}), run(flavoured, {"x": x})
    assert got.shape == want.shape  # every length, also where (length - kernel) % stride != 0
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    ops = optimised_ops(flavoured, tmp_path, "conv")
    assert ops["MatMulIntegerToFloat"] == 1 and "DequantizeLinear" not in ops and "Conv" not in ops


def test_uint8_activations_round_and_clip_like_int8() -> None:
    model = qdq_conv_model(8, 8, 2, 2)
    # values far beyond the range clip at both ends; halves test rounding to even
    x = np.concatenate([np.linspace(-4, 4, 801, dtype=np.float32), 0.02 * (np.arange(-7, 8) + 0.5)])
    x = np.resize(x, (1, 8, 816)).astype(np.float32)
    flavoured, _ = cpu_flavour(model)
    q8 = [n for n in flavoured.graph.node if n.op_type == "QuantizeLinear"]
    assert len(q8) == 1
    zp = {i.name: numpy_helper.to_array(i) for i in flavoured.graph.initializer}[q8[0].input[2]]
    assert zp.dtype == np.uint8 and int(zp) == 128
    np.testing.assert_allclose(run(flavoured, {"x": x})[0], run(model, {"x": x})[0], rtol=1e-5, atol=1e-5)


def test_grouped_or_padded_conv_keeps_float_conv_with_folded_weights(tmp_path) -> None:
    for kwargs in ({"group": 4}, {"pads": (1, 1)}):
        model = qdq_conv_model(16, 16, 3, 1, bias=True, **kwargs)
        x = RNG.standard_normal((1, 16, 50)).astype(np.float32)
        flavoured, stats = cpu_flavour(model)
        assert stats["conv_as_matmul"] == 0 and stats["folded_conv_weights"] == 1
        assert [n.op_type for n in flavoured.graph.node] == ["QuantizeLinear", "DequantizeLinear", "Conv"]
        np.testing.assert_allclose(run(flavoured, {"x": x})[0], run(model, {"x": x})[0], rtol=1e-6, atol=1e-6)


def test_shared_dq_gets_one_copy_per_consumer() -> None:
    model = qdq_conv_model(16, 16, 3, 1, group=2, consumers=3)  # grouped: DQs stay, each shared by 3 Convs
    x = RNG.standard_normal((1, 16, 40)).astype(np.float32)
    flavoured, stats = cpu_flavour(model)
    assert stats["dedicated_dq"] == 4  # two more activation DQs, two more weight DQs (then folded)
    dq_outputs = [n.output[0] for n in flavoured.graph.node if n.op_type == "DequantizeLinear"]
    readers = Counter(i for n in flavoured.graph.node for i in n.input if i in dq_outputs)
    assert len(dq_outputs) == 3 and set(readers.values()) == {1}
    weights = {n.input[1] for n in flavoured.graph.node if n.op_type == "Conv"}
    assert len(weights) == 1 and sum(list(i.dims) == [16, 8, 3] for i in flavoured.graph.initializer) == 1
    for got, want in zip(run(flavoured, {"x": x}), run(model, {"x": x})):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------- a tiny Wav2Vec2, end to end
@pytest.fixture(scope="module")
def tiny_variants(tmp_path_factory: pytest.TempPathFactory):
    from workbench.calibration.methods import MethodSpec
    from workbench.calibration.runner import calibrate_ranges
    from workbench.model.export import export_onnx
    from workbench.model.synthetic import random_wav2vec2
    from workbench.quantize.plan import INT8

    from tests.conftest import _speech_like

    work = tmp_path_factory.mktemp("ort-cpu")
    fp32 = export_onnx(random_wav2vec2("tiny", seed=0), work / "fp32.onnx")
    clips = [_speech_like(2.0, seed=s) for s in range(3)]
    amax = calibrate_ranges(fp32, iter(clips), len(clips), MethodSpec("entropy"))
    trt = work / "int8.onnx"
    cpu = build_cpu_variant(fp32, amax, INT8, work / "int8.ort-cpu.onnx", trt_path=trt)
    return fp32, trt, cpu, [_speech_like(3.0, seed=10 + s) for s in range(3)]


def test_tiny_model_cpu_flavour_matches_tensorrt_bound_int8(tiny_variants) -> None:
    from workbench.model.features import normalise_audio

    fp32, trt, cpu, clips = tiny_variants
    for audio in clips:
        x = {"input_values": normalise_audio(audio)[None]}
        (ref,), (q,), (c,) = run(fp32, x), run(trt, x), run(cpu, x)
        int8_error = np.abs(q - ref)
        # same arithmetic: only the float summation order differs, which now and then moves a value across
        # a later rounding boundary (one INT8 step); far below the INT8 error itself
        assert np.abs(c - q).mean() <= 0.05 * int8_error.mean()
        assert np.abs(c - q).max() <= 0.25 * int8_error.max()
        assert (c.argmax(-1) == q.argmax(-1)).mean() >= 0.99
        # and as close to FP32 as the TensorRT-bound graph is
        assert np.abs(c - ref).mean() <= 1.05 * int8_error.mean()


def test_tiny_model_input_graph_untouched_and_ort_fuses_the_flavour(tiny_variants, tmp_path) -> None:
    _, trt, cpu, _ = tiny_variants
    before = trt.read_bytes()
    cpu_flavour(onnx.load(str(trt)))
    assert trt.read_bytes() == before
    trt_ops, cpu_ops = optimised_ops(trt, tmp_path, "trt"), optimised_ops(cpu, tmp_path, "cpu")
    # TensorRT-bound graph on ORT: q/k/v share a DQ (not fused), Convs stay float behind DQs
    assert trt_ops["MatMul"] > 0 and trt_ops["Conv"] > 0 and trt_ops["DequantizeLinear"] > 0
    # the flavour: every MatMul fused into MatMulIntegerToFloat, feature-encoder convs too; only the first
    # conv (1 input channel) and the grouped positional conv stay float, with one DQ on their inputs
    assert cpu_ops["MatMul"] == 0 and cpu_ops["FusedMatMul"] == 0
    assert cpu_ops["MatMulIntegerToFloat"] > trt_ops["MatMulIntegerToFloat"] + trt_ops["MatMul"]
    assert cpu_ops["Conv"] == 2 and cpu_ops["DequantizeLinear"] == 2


def test_calibrate_verb_writes_the_flavour_on_request(tiny_sets, tmp_path, capsys) -> None:
    from workbench.cli import main
    from workbench.model.synthetic import save_random_wav2vec2

    model = save_random_wav2vec2(tmp_path / "tiny", "tiny", seed=0)
    args = ["calibrate", "--model", str(model), "--set", str(tiny_sets.calib.path), "--method", "max",
            "--engines", str(tmp_path / "engines")]
    assert main(args) == 0
    assert not list((tmp_path / "engines").rglob("*.ort-cpu.onnx"))  # the default output is unchanged
    trt = next(p for p in (tmp_path / "engines").rglob("model.int8-*.onnx"))
    before = trt.read_bytes()
    capsys.readouterr()
    assert main(args + ["--ort-cpu"]) == 0
    (cpu,) = (tmp_path / "engines").rglob("*.ort-cpu.onnx")
    assert str(cpu) in capsys.readouterr().out and trt.read_bytes() == before
    assert cpu.read_bytes() == cpu_flavour(onnx.load(str(trt)))[0].SerializeToString()

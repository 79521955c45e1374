"""The ONNX Runtime CPU flavour of a Q/DQ variant: same numbers as the TensorRT-bound graph, fused by ORT.

Hand-built graphs check each rewrite exactly (uint8 activations, Conv as im2col + MatMul for odd lengths,
strides and a bias, shared DQs, folded weights of a grouped Conv); a tiny random Wav2Vec2 checks the whole
path: outputs close to the TensorRT-bound INT8 graph and to FP32, the input graph untouched, and ORT's
optimised graph made of fused integer ops where the TensorRT-bound graph is not.

The flavours run in a plain ORT session (as anyone would run the file) at the default optimisation level,
so the integer kernels this CPU picks are the ones checked. uint8 weights (U8U8 kernels) are checked on
every CPU; int8 weights (U8S8 kernels) only where ORT computes them exactly (x86 with VNNI, or not x86):
on an x86 CPU without VNNI they saturate (``workbench.backends.cpu_int8``), and that case is skipped with
the reason, and shown to saturate by ``test_int8_weights_saturate_where_the_cpu_lacks_vnni``.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from workbench.backends.cpu_int8 import int8_weight_type, u8s8_exact
from workbench.backends.onnxruntime import OnnxRuntimeRunner, session_options
from workbench.quantize.ort_cpu import METADATA_REASON, METADATA_WEIGHTS, build_cpu_variant, cpu_flavour

RNG = np.random.default_rng(0)
U8S8_EXACT, U8S8_WHY = u8s8_exact()
# uint8 weights everywhere; int8 weights only where ORT's U8S8 kernels are exact on this CPU
WEIGHTS = [
    pytest.param("u8", id="u8"),
    pytest.param("s8", id="s8", marks=pytest.mark.skipif(not U8S8_EXACT, reason=f"int8 weights: {U8S8_WHY}")),
]


def run(
    model: onnx.ModelProto | Path, feeds: dict[str, np.ndarray], reference: bool = False
) -> list[np.ndarray]:
    """A plain ORT session (default optimisation: the fused integer kernels); ``reference``: no optimisation
    at all, so every DequantizeLinear runs and the arithmetic is float (what the Q/DQ graph means)."""
    src = str(model) if isinstance(model, Path) else model.SerializeToString()
    opts = ort.SessionOptions()
    if reference:
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(src, opts, providers=["CPUExecutionProvider"]).run(None, feeds)


def optimised_ops(model: onnx.ModelProto | Path, tmp_path: Path, name: str) -> Counter:
    """Op types of the graph ORT actually runs (level 'all'), dumped with optimized_model_filepath."""
    opts = session_options(None, "all")
    opts.optimized_model_filepath = str(tmp_path / f"{name}.optimised.onnx")
    src = str(model) if isinstance(model, Path) else model.SerializeToString()
    ort.InferenceSession(src, opts, providers=["CPUExecutionProvider"])
    return Counter(n.op_type for n in onnx.load(opts.optimized_model_filepath).graph.node)


def qdq_conv_model(
    cin: int,
    cout: int,
    kernel: int,
    stride: int,
    bias: bool = False,
    group: int = 1,
    pads: tuple[int, int] = (0, 0),
    consumers: int = 1,
) -> onnx.ModelProto:
    """x -> Q/DQ (int8, zero point 0) -> Conv with a per-channel DQ'd int8 weight, like build_variant writes."""
    w = RNG.standard_normal((cout, cin // group, kernel)).astype(np.float32)
    ws = (np.abs(w).max(axis=(1, 2)) / 127).astype(np.float32)
    wq = np.clip(np.round(w / ws[:, None, None]), -127, 127).astype(np.int8)
    inits = [
        numpy_helper.from_array(np.array(0.02, np.float32), "xs"),
        numpy_helper.from_array(np.array(0, np.int8), "xz"),
        numpy_helper.from_array(wq, "wq"),
        numpy_helper.from_array(ws, "ws"),
        numpy_helper.from_array(np.zeros(cout, np.int8), "wz"),
    ]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"], name="q"),
        helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"], name="dq"),
        helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"], name="wdq", axis=0),
    ]
    inputs = ["xd", "wd"]
    if bias:
        inits.append(numpy_helper.from_array(RNG.standard_normal(cout).astype(np.float32), "b"))
        inputs.append("b")
    outputs = []
    for i in range(consumers):
        nodes.append(
            helper.make_node(
                "Conv", inputs, [f"y{i}"], name=f"conv{i}", strides=[stride], group=group, pads=list(pads)
            )
        )
        outputs.append(
            helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, ["batch", "channels", "frames"])
        )
    graph = helper.make_graph(
        nodes,
        "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, cin, None])],
        outputs,
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize(
    "cin,kernel,stride,length,bias",
    [
        (32, 3, 2, 101, False),
        (32, 3, 2, 100, True),
        (16, 4, 2, 37, False),
        (64, 2, 2, 9, True),
        (32, 5, 3, 5, False),
    ],
)
@pytest.mark.parametrize("weights", WEIGHTS)
def test_conv_becomes_integer_matmul_with_the_same_output(
    cin, kernel, stride, length, bias, weights, tmp_path
) -> None:
    model = qdq_conv_model(cin, 24, kernel, stride, bias)
    x = RNG.standard_normal((2, cin, length)).astype(np.float32)
    flavoured, stats = cpu_flavour(model, weights)
    assert stats["conv_as_matmul"] == 1 and stats["uint8_activations"] == 1
    assert stats["weights"] == weights and stats["uint8_weights"] == (weights == "u8")
    assert not any(n.op_type == "Conv" for n in flavoured.graph.node)
    weight_types = {i.data_type for i in flavoured.graph.initializer if i.name.startswith("conv0_w_matmul_")}
    assert weight_types == {TensorProto.FLOAT, TensorProto.UINT8 if weights == "u8" else TensorProto.INT8}
    (want,), (got,) = run(model, {"x": x}, reference=True), run(flavoured, {"x": x})
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


# ---------------------------------------------------------------- int8 or uint8 weights: what this CPU computes
def saturating_case() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """A quantized Conv whose activations all sit at the top of the range: every neighbouring pair of
    products 255 * w reaches past int16 wherever two neighbouring weights add up to more than 128."""
    model = qdq_conv_model(32, 24, 3, 1)
    return model, {"x": np.full((1, 32, 40), 4.0, np.float32)}  # 4.0 / 0.02 clips to 127 -> uint8 255


def test_int8_weights_saturate_where_the_cpu_lacks_vnni() -> None:
    """The detection agrees with ORT: int8 weights are exact exactly where ``u8s8_exact`` says so; uint8
    weights are exact everywhere; the workbench's runner computes the int8 file exactly everywhere."""
    model, x = saturating_case()
    (want,) = run(model, x, reference=True)
    errors = {}
    for weights in ("u8", "s8"):
        flavoured, _ = cpu_flavour(model, weights)
        errors[weights] = float(np.abs(run(flavoured, x)[0] - want).max() / np.abs(want).max())
    assert errors["u8"] < 1e-5
    assert (errors["s8"] < 1e-5) == U8S8_EXACT, (errors, U8S8_WHY)
    s8 = cpu_flavour(model, "s8")[0].SerializeToString()
    with OnnxRuntimeRunner(s8) as runner:
        assert np.abs(runner.infer(x)["y0"] - want).max() < 1e-5 * np.abs(want).max()
    with OnnxRuntimeRunner(s8, exact_int8=False) as runner:  # ORT's default session: as plain as above
        assert (np.abs(runner.infer(x)["y0"] - want).max() < 1e-5 * np.abs(want).max()) == U8S8_EXACT
    # the per-layer comparison's Polygraphy runner uses the same session options
    from workbench.compare.layers import _runner

    with _runner(cpu_flavour(model, "s8")[0], ["y0"], "s8") as runner:
        assert np.abs(runner.infer(x)["y0"] - want).max() < 1e-5 * np.abs(want).max()


def test_weight_type_follows_the_cpu_flags(tmp_path) -> None:
    from workbench.backends.cpu_int8 import cpu_flags
    from workbench.errors import WorkbenchError

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(
        "processor\t: 0\nmodel name\t: X\nflags\t\t: fpu sse2 avx2 avx512f avx512_vnni\n\n"
        "processor\t: 1\nflags\t\t: fpu\n"
    )
    assert cpu_flags(cpuinfo) == {"fpu", "sse2", "avx2", "avx512f", "avx512_vnni"}
    assert cpu_flags(tmp_path / "missing") is None
    avx2, vnni = frozenset({"sse2", "avx2", "fma"}), frozenset({"avx2", "avx_vnni"})
    assert int8_weight_type("auto", "x86_64", avx2)[0] == "u8"
    assert int8_weight_type("auto", "x86_64", vnni)[0] == "s8"
    assert int8_weight_type("auto", "x86_64", frozenset({"avx512f", "avx512_vnni"}))[0] == "s8"
    assert int8_weight_type("auto", "aarch64", frozenset())[0] == "s8"
    assert int8_weight_type("auto", "AMD64", None)[0] in ("u8", "s8")  # this machine's flags
    type_, why = int8_weight_type("s8", "x86_64", avx2)
    assert type_ == "s8" and "NOT exact here" in why and "vpmaddubsw" in why
    assert int8_weight_type("u8", "x86_64", vnni)[0] == "u8"
    with pytest.raises(WorkbenchError, match="auto, u8, s8"):
        int8_weight_type("int8")


def test_the_flavour_records_its_weight_type() -> None:
    model, _ = saturating_case()
    for weights in ("u8", "s8"):
        flavoured, stats = cpu_flavour(model, weights, reason=f"because {weights}")
        meta = {p.key: p.value for p in flavoured.metadata_props}
        assert meta[METADATA_WEIGHTS] == weights and meta[METADATA_REASON] == f"because {weights}"
        assert stats["weights"] == weights
    with pytest.raises(ValueError, match="weights"):
        cpu_flavour(model, "int8")


# ---------------------------------------------------------------- a tiny Wav2Vec2, end to end
@pytest.fixture(scope="module")
def tiny_variants(tmp_path_factory: pytest.TempPathFactory):
    from tests.conftest import _speech_like
    from workbench.calibration.methods import MethodSpec
    from workbench.calibration.runner import calibrate_ranges
    from workbench.model.export import export_onnx
    from workbench.model.synthetic import random_wav2vec2
    from workbench.quantize.plan import INT8

    work = tmp_path_factory.mktemp("ort-cpu")
    fp32 = export_onnx(random_wav2vec2("tiny", seed=0), work / "fp32.onnx")
    clips = [_speech_like(2.0, seed=s) for s in range(3)]
    amax = calibrate_ranges(fp32, iter(clips), len(clips), MethodSpec("entropy"))
    trt = work / "int8.onnx"
    cpu = build_cpu_variant(fp32, amax, INT8, work / "int8.ort-cpu.onnx", trt_path=trt)
    return fp32, trt, cpu, [_speech_like(3.0, seed=10 + s) for s in range(3)]


@pytest.mark.parametrize("weights", WEIGHTS)
def test_tiny_model_cpu_flavour_matches_tensorrt_bound_int8(tiny_variants, weights, tmp_path) -> None:
    from workbench.model.features import normalise_audio

    fp32, trt, cpu, clips = tiny_variants
    if weights != "u8":  # the fixture's flavour has uint8 weights (build_cpu_variant's default)
        cpu = tmp_path / f"int8.ort-cpu-{weights}.onnx"
        cpu.write_bytes(cpu_flavour(onnx.load(str(trt)), weights)[0].SerializeToString())
    for audio in clips:
        x = {"input_values": normalise_audio(audio)[None]}
        (ref,), (q,), (c,) = run(fp32, x), run(trt, x, reference=True), run(cpu, x)
        int8_error = np.abs(q - ref)
        # same arithmetic: only the float summation order differs, which now and then moves a value across
        # a later rounding boundary (one INT8 step); far below the INT8 error itself
        assert np.abs(c - q).mean() <= 0.05 * int8_error.mean()
        assert np.abs(c - q).max() <= 0.25 * int8_error.max()
        assert (c.argmax(-1) == q.argmax(-1)).mean() >= 0.99
        # and as close to FP32 as the TensorRT-bound graph is
        assert np.abs(c - ref).mean() <= 1.05 * int8_error.mean()


def test_tiny_model_tensorrt_bound_graph_through_the_runner_is_exact_on_every_cpu(tiny_variants) -> None:
    """The workbench's ORT sessions fuse the TensorRT-bound graph's single-consumer DQ -> MatMul into integer
    kernels with int8 weights; where U8S8 saturates (x86 without VNNI) the runner has ORT make them uint8."""
    from workbench.model.features import normalise_audio

    _, trt, _, clips = tiny_variants
    x = {"input_values": normalise_audio(clips[0])[None]}
    (q,) = run(trt, x, reference=True)
    with OnnxRuntimeRunner(trt) as runner:
        got = runner.infer(x)["logits"]
    assert np.abs(got - q).max() <= 1e-3 * np.abs(q).max()
    assert "exact" in runner.describe()["int8_gemm"]


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
    args = [
        "calibrate",
        "--model",
        str(model),
        "--set",
        str(tiny_sets.calib.path),
        "--method",
        "max",
        "--no-recovery",  # the plain plan, whose flavour build_cpu_variant rebuilds below
        "--engines",
        str(tmp_path / "engines"),
    ]
    assert main(args) == 0
    assert not list((tmp_path / "engines").rglob("*.ort-cpu.onnx"))  # the default output is unchanged
    trt = next(p for p in (tmp_path / "engines").rglob("model.int8-*.onnx"))
    before = trt.read_bytes()
    capsys.readouterr()
    assert main(args + ["--ort-cpu"]) == 0
    (cpu,) = (tmp_path / "engines").rglob("*.ort-cpu.onnx")
    out = capsys.readouterr().out
    assert str(cpu) in out and trt.read_bytes() == before
    weights, why = int8_weight_type("auto")  # what this CPU computes exactly
    assert f"{'uint8' if weights == 'u8' else 'int8'} weights" in out and why in out
    # the flavour of the same INT8 plan with FP32 between the islands (the TensorRT-bound file has FP16 there)
    from workbench.calibration import cache as cache_mod
    from workbench.quantize.plan import INT8

    (cache,) = (tmp_path / "engines").rglob("calib-*.cache")
    again = build_cpu_variant(
        trt.with_name("model.fp32.onnx"),
        cache_mod.load(cache).amax(),
        INT8,
        tmp_path / "again.onnx",
        weights=weights,
        reason=why,
    )
    assert cpu.read_bytes() == again.read_bytes()
    assert (
        onnx.load(str(trt)).opset_import[0].version == 19
        and onnx.load(str(cpu)).opset_import[0].version == 17
    )
    assert main(args + ["--ort-cpu", "--ort-cpu-weights", "s8"]) == 0  # for another machine: as asked
    meta = {p.key: p.value for p in onnx.load(str(cpu)).metadata_props}
    assert meta[METADATA_WEIGHTS] == "s8" and meta[METADATA_REASON] == int8_weight_type("s8")[1]
    assert main(args + ["--ort-cpu-weights", "u8"]) == 1  # without --ort-cpu: one error line
    assert "--ort-cpu" in capsys.readouterr().err

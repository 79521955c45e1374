"""TensorRT back-end: engines built on the CPU with TensorRT-RTX from small ONNX graphs made here.

Builds need a TensorRT builder (``tensorrt`` or ``tensorrt_rtx_bindings``) and skip without one;
running an engine needs a GPU TensorRT supports and skips otherwise. The import-isolation test
blocks every TensorRT module and needs nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from workbench.backends.tensorrt.cache_header import cache_algorithm, stamped
from workbench.backends.tensorrt.profile import Range, batch_range, input_shapes, samples_from_durations
from workbench.errors import WorkbenchError
from workbench.optional import has_module

HAS_BUILDER = has_module("tensorrt") or has_module("tensorrt_rtx_bindings")
needs_builder = pytest.mark.skipif(
    not HAS_BUILDER,
    reason="no TensorRT builder: pip install tensorrt-rtx-cu13-libs tensorrt-rtx-cu13-bindings",
)
SMALL = Range(4, 8, 16)  # "samples" axis of the toy graphs


def _save(model: onnx.ModelProto, path: Path) -> Path:
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def _matmul_fp32(path: Path) -> Path:
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((16, 8)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
        "fp32",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "n", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "n", 8])],
        [w],
    )
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def _qdq_int8(path: Path) -> Path:
    """Conv (per-channel weight Q/DQ) -> transpose -> MatMul, every float input through Q/DQ."""
    rng = np.random.default_rng(1)
    inits = [
        numpy_helper.from_array(rng.standard_normal((8, 1, 3)).astype(np.float32), "conv_w"),
        numpy_helper.from_array(np.full(8, 0.02, np.float32), "conv_w_scale"),
        numpy_helper.from_array(np.zeros(8, np.int8), "conv_w_zp"),
        numpy_helper.from_array(rng.standard_normal((8, 4)).astype(np.float32), "mm_w"),
        numpy_helper.from_array(np.full(4, 0.02, np.float32), "mm_w_scale"),
        numpy_helper.from_array(np.zeros(4, np.int8), "mm_w_zp"),
        numpy_helper.from_array(np.array(0.05, np.float32), "act_scale"),
        numpy_helper.from_array(np.array(0, np.int8), "act_zp"),
    ]
    n = helper.make_node
    nodes = [
        n("QuantizeLinear", ["x", "act_scale", "act_zp"], ["x_q"], name="x_q"),
        n("DequantizeLinear", ["x_q", "act_scale", "act_zp"], ["x_dq"], name="x_dq"),
        n("QuantizeLinear", ["conv_w", "conv_w_scale", "conv_w_zp"], ["cw_q"], name="cw_q", axis=0),
        n("DequantizeLinear", ["cw_q", "conv_w_scale", "conv_w_zp"], ["cw_dq"], name="cw_dq", axis=0),
        n("Conv", ["x_dq", "cw_dq"], ["c"], name="conv", pads=[1, 1]),
        n("Transpose", ["c"], ["ct"], name="tr", perm=[0, 2, 1]),
        n("QuantizeLinear", ["ct", "act_scale", "act_zp"], ["ct_q"], name="ct_q"),
        n("DequantizeLinear", ["ct_q", "act_scale", "act_zp"], ["ct_dq"], name="ct_dq"),
        n("QuantizeLinear", ["mm_w", "mm_w_scale", "mm_w_zp"], ["mw_q"], name="mw_q", axis=1),
        n("DequantizeLinear", ["mw_q", "mm_w_scale", "mm_w_zp"], ["mw_dq"], name="mw_dq", axis=1),
        n("MatMul", ["ct_dq", "mw_dq"], ["y"], name="mm"),
    ]
    graph = helper.make_graph(
        nodes,
        "int8",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 1, "samples"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "samples", 4])],
        inits,
    )
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def _fp16_cast(path: Path) -> Path:
    """FP32 IO; the MatMul runs in FP16 between Cast nodes (as the quantize module writes fp16 nodes)."""
    w = numpy_helper.from_array(np.random.default_rng(2).standard_normal((16, 8)).astype(np.float16), "w16")
    nodes = [
        helper.make_node("Cast", ["x"], ["x16"], name="to_fp16", to=TensorProto.FLOAT16),
        helper.make_node("MatMul", ["x16", "w16"], ["y16"], name="mm"),
        helper.make_node("Cast", ["y16"], ["y"], name="to_fp32", to=TensorProto.FLOAT),
    ]
    graph = helper.make_graph(
        nodes,
        "fp16",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "n", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "n", 8])],
        [w],
    )
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def _build(onnx_path: Path, engines: Path, **kw):
    from workbench.backends.tensorrt.builder import BuildSettings, build_engine

    return build_engine(onnx_path, BuildSettings(batches=(1, 2, 4), samples=SMALL, **kw), engines)


# ---------------------------------------------------------------- pure helpers (no TensorRT needed)


def test_profile_ranges() -> None:
    assert batch_range([32, 1, 8]) == Range(1, 8, 32)
    assert batch_range([4]) == Range(4, 4, 4)
    r = samples_from_durations([2.0, 1.5, 6.25, 3.0])
    assert (r.min, r.opt, r.max) == (24_000, 48_000, 100_000)
    shapes = input_shapes([("input_values", ["batch", "samples"]), ("k", [3, None])], Range(1, 8, 32), r)
    assert shapes["input_values"] == {"min": [1, 24_000], "opt": [8, 48_000], "max": [32, 100_000]}
    assert shapes["k"]["max"] == [3, 100_000]
    with pytest.raises(WorkbenchError):
        batch_range([0, 4])
    with pytest.raises(WorkbenchError):
        samples_from_durations([])


def test_cache_header_parsing() -> None:
    assert cache_algorithm(b"TRT-8601-EntropyCalibration2\nx: 3c010204\n") == "EntropyCalibration2"
    assert cache_algorithm(b"TRT-100-MinMaxCalibration\n") == "MinMaxCalibration"
    with pytest.raises(WorkbenchError):
        cache_algorithm(b"not a cache\n")


def test_cli_and_imports_work_with_tensorrt_blocked(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "for m in ('tensorrt', 'tensorrt_rtx_bindings', 'tensorrt_rtx', 'tensorrt_libs', 'tensorrt_rtx_libs'):\n"
        "    sys.modules[m] = None\n"
        "import workbench.cli, workbench.backends.tensorrt.builder, workbench.backends.tensorrt.runner\n"
        "import workbench.backends.tensorrt.calibrator as c\n"
        "assert not hasattr(c, 'CacheCalibrator')\n"
        "from workbench.errors import WorkbenchError\n"
        "from workbench.backends.tensorrt.loader import load_tensorrt\n"
        "try:\n"
        "    load_tensorrt()\n"
        "except WorkbenchError as e:\n"
        "    assert 'tensorrt-rtx-cu13-bindings' in str(e), e\n"
        "else:\n"
        "    raise SystemExit('load_tensorrt succeeded with TensorRT blocked')\n"
        "sys.argv = ['workbench', '--help']\n"
        "try:\n"
        "    workbench.cli.main(['--help'])\n"
        "except SystemExit as e:\n"
        "    assert e.code == 0\n"
        "rc = workbench.cli.main(['build', '--onnx', sys.argv[0]])\n"
        "assert rc == 1, rc\n"
        "print('OK')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert out.returncode == 0, out.stderr
    assert "build" in out.stdout and out.stdout.strip().endswith("OK")
    assert "no usable TensorRT module" in out.stderr  # the build verb says what to install


# ---------------------------------------------------------------- builds (TensorRT or TensorRT-RTX)


@needs_builder
def test_fp32_matmul_build_and_engine_cache(tmp_path: Path) -> None:
    onnx_path = _matmul_fp32(tmp_path / "mm.onnx")
    result = _build(onnx_path, tmp_path / "engines")
    assert not result.cached and result.engine_bytes > 1000
    assert result.engine_path.read_bytes()[:4] != b"\0\0\0\0"
    layer = result.summary.by_name("mm")
    assert layer.type == "MATRIX_MULTIPLY" and layer.precision == "fp32"
    meta = json.loads(result.sidecar_path.read_text())
    assert meta["onnx_sha256"] and meta["shapes"]["x"]["max"] == [4, 16, 16] and meta["build_time_s"] > 0
    assert json.loads(result.summary_path.read_text())["compute_precisions"] == {"fp32": 1}
    again = _build(onnx_path, tmp_path / "engines")
    assert again.cached and again.engine_path == result.engine_path
    other = _build(onnx_path, tmp_path / "engines", optimization_level=0)  # other settings, other key
    assert not other.cached and other.key != result.key
    result.engine_path.write_bytes(b"damaged")  # a damaged cached engine is rebuilt, never used
    assert not _build(onnx_path, tmp_path / "engines").cached


@needs_builder
def test_qdq_int8_graph_parses_to_int8_layers(tmp_path: Path) -> None:
    result = _build(_qdq_int8(tmp_path / "q.onnx"), tmp_path / "engines")
    assert result.engine_bytes > 1000
    summary = result.summary
    assert summary.by_name("conv").precision == "int8"
    assert summary.by_name("mm").precision == "int8"
    assert summary.compute_precisions() == {"int8": 2}
    quantize = [l for l in summary.layers if l.type == "QUANTIZE"]
    assert quantize and all(l.outputs[0].dtype == "int8" for l in quantize)


@needs_builder
def test_fp16_cast_graph_parses_to_fp16(tmp_path: Path) -> None:
    result = _build(_fp16_cast(tmp_path / "h.onnx"), tmp_path / "engines")
    assert result.engine_bytes > 1000
    mm = result.summary.by_name("mm")
    assert mm.precision == "fp16" and mm.outputs[0].dtype == "fp16"
    assert result.summary.layer_types()["CAST"] == 2


@needs_builder
def test_unparseable_onnx_is_a_user_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"this is not onnx")
    with pytest.raises(WorkbenchError):
        _build(bad, tmp_path / "engines")


@pytest.mark.slow
@needs_builder
def test_build_verb_prints_engine_and_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from workbench.cli import main

    onnx_path = _qdq_int8(tmp_path / "q.onnx")
    rc = main(
        [
            "build",
            "--backend",
            "tensorrt",
            "--onnx",
            str(onnx_path),
            "--batch",
            "1,2",
            "--min-seconds",
            "0.001",
            "--opt-seconds",
            "0.001",
            "--max-seconds",
            "0.002",
            "--engines-dir",
            str(tmp_path / "engines"),
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "engine: " in out and "int8 2" in out and " s, " in out
    assert list((tmp_path / "engines").glob("q-*.engine"))


def test_runner_executes_engine(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if not HAS_BUILDER or not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU and a TensorRT builder/runtime")
    if not has_module("tensorrt"):
        pytest.skip(
            "TensorRT-RTX's runtime refuses many data-centre GPUs (e.g. compute capability 9.0); "
            "run this where NVIDIA TensorRT is installed"
        )
    from workbench.backends.tensorrt.runner import TensorRTRunner

    onnx_path = _matmul_fp32(tmp_path / "mm.onnx")
    result = _build(onnx_path, tmp_path / "engines")
    x = np.random.default_rng(3).standard_normal((2, 8, 16)).astype(np.float32)
    w = numpy_helper.to_array(onnx.load(str(onnx_path)).graph.initializer[0])
    with TensorRTRunner(result.engine_path) as runner:
        y = runner.infer({"x": x})["y"]
        assert runner.last_inference_time() and runner.last_inference_time() > 0
    np.testing.assert_allclose(y, x @ w, rtol=1e-2, atol=1e-2)


# ---------------------------------------------------------------- the demo model's variants (slow)


@pytest.fixture(scope="module")
def demo_fp32(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("workbench.quantize.qdq", reason="the quantize module has not landed")
    from workbench.model.export import export_onnx
    from workbench.model.loading import load_model
    from workbench.resources import demo_model_dir

    return export_onnx(load_model(demo_model_dir()), tmp_path_factory.mktemp("demo") / "demo.onnx")


@pytest.mark.slow
@needs_builder
@pytest.mark.parametrize("plan_name", ["fp32", "fp16", "int8", "mixed"])
def test_demo_model_variants_keep_the_plan_precisions(
    demo_fp32: Path, tmp_path: Path, plan_name: str
) -> None:
    """Every MatMul/Conv the plan puts in INT8 (FP16, FP32) is INT8 (FP16, FP32) in the parsed network."""
    from workbench.backends.tensorrt.builder import BuildSettings, build_engine
    from workbench.calibration.runner import activation_tensors
    from workbench.quantize.plan import PrecisionPlan, quantizable_nodes
    from workbench.quantize.qdq import build_variant

    model = onnx.load(str(demo_fp32))
    nodes = quantizable_nodes(model)
    amax = {name: 8.0 for name in activation_tensors(model)}  # ranges do not matter for the build
    plans = {
        "fp32": PrecisionPlan("fp32"),
        "fp16": PrecisionPlan("fp16", "fp16"),
        "int8": PrecisionPlan("int8", "int8"),
        "mixed": PrecisionPlan("mixed", "int8", {n: "fp16" for n in nodes if "feature_extractor" in n}),
    }
    plan = plans[plan_name]
    variant = build_variant(demo_fp32, amax, plan, tmp_path / f"{plan_name}.onnx")
    result = build_engine(
        variant, BuildSettings(batches=(1, 2), samples=Range(16_000, 32_000, 64_000)), tmp_path / "engines"
    )
    assert result.engine_bytes > 1_000_000
    got = {n: result.summary.by_name(n).precision for n in nodes}
    wanted = {n: plan.precision_of(n) for n in nodes}
    assert got == wanted
    if plan_name == "mixed":
        assert set(got.values()) == {"int8", "fp16"}


def test_external_data_is_part_of_the_cache_key(tmp_path: Path) -> None:
    from workbench.backends.tensorrt.builder import onnx_content_hash

    model = onnx.load(str(_matmul_fp32(tmp_path / "mm.onnx")))
    path = tmp_path / "ext.onnx"
    onnx.save(
        model,
        str(path),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location="ext.data",
        size_threshold=0,
    )
    before = onnx_content_hash(path)
    data = (tmp_path / "ext.data").read_bytes()
    (tmp_path / "ext.data").write_bytes(bytes([data[0] ^ 1]) + data[1:])  # same graph file, other weights
    assert onnx_content_hash(path) != before
    (tmp_path / "ext.data").unlink()
    with pytest.raises(WorkbenchError):
        onnx_content_hash(path)


def test_legacy_cache_calibrator_serves_the_cache(tmp_path: Path) -> None:
    from workbench.backends.tensorrt import calibrator

    if not hasattr(calibrator, "CacheCalibrator"):
        pytest.skip("implicit INT8 calibrators exist only in NVIDIA TensorRT <= 10 (not installed here)")
    cache = tmp_path / "calib.cache"
    cache.write_bytes(b"TRT-100-EntropyCalibration2\ninput_values: 3c010204\n")
    calib = calibrator.CacheCalibrator(cache, batch_size=4)
    served = calib.read_calibration_cache()
    assert served.split(b"\n", 1)[1] == cache.read_bytes().split(b"\n", 1)[1]  # scales unchanged
    assert (
        served.split(b"\n", 1)[0]
        == stamped(cache.read_bytes(), calibrator._trt.__version__).split(b"\n", 1)[0]
    )
    assert calib.get_batch(["input_values"]) is None and calib.get_batch_size() == 4

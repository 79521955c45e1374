"""The built engine's precisions against the plan: inspector JSON in TensorRT's documented format (TensorRT 10's
``Format/Datatype``, TensorRT 11's ``Datatype`` + ``Format`` and ``I/O Tensors``), an INT8 fallback and an FP16
mismatch detected, a clean plan passing. The plan is read back from a small ONNX graph made here (Q/DQ Conv,
FP16 MatMul through Casts, FP32 MatMul). A real engine's inspector needs a TensorRT runtime on a GPU it supports,
which neither machine of this project has: that test skips with the reason."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from workbench.backends.tensorrt.inspector import check_plan, dtype_of, parse_engine_information
from workbench.errors import WorkbenchError
from workbench.optional import has_module
from workbench.quantize.plan import precisions_of_onnx

SEP = "\x1f"  # how the inspector separates several ONNX origins in "Metadata"


def mixed_graph(path: Path) -> Path:
    """x -> Q/DQ -> Conv (INT8) -> transpose -> Cast fp16 -> MatMul (FP16) -> Cast fp32 -> MatMul (FP32)."""
    rng = np.random.default_rng(0)
    n = helper.make_node
    inits = [
        numpy_helper.from_array(rng.standard_normal((8, 1, 3)).astype(np.float32), "cw"),
        numpy_helper.from_array(np.array(0.02, np.float32), "ws"),
        numpy_helper.from_array(np.array(0, np.int8), "wz"),
        numpy_helper.from_array(np.array(0.05, np.float32), "xs"),
        numpy_helper.from_array(np.array(0, np.int8), "xz"),
        numpy_helper.from_array(rng.standard_normal((8, 8)).astype(np.float16), "w16"),
        numpy_helper.from_array(rng.standard_normal((8, 4)).astype(np.float32), "w32"),
    ]
    nodes = [
        n("QuantizeLinear", ["x", "xs", "xz"], ["xq"], name="x_q"),
        n("DequantizeLinear", ["xq", "xs", "xz"], ["xdq"], name="x_dq"),
        n("QuantizeLinear", ["cw", "ws", "wz"], ["cwq"], name="cw_q"),
        n("DequantizeLinear", ["cwq", "ws", "wz"], ["cwdq"], name="cw_dq"),
        n("Conv", ["xdq", "cwdq"], ["c"], name="/conv/Conv", pads=[1, 1]),
        n("Transpose", ["c"], ["ct"], name="tr", perm=[0, 2, 1]),
        n("Cast", ["ct"], ["ct16"], name="to16", to=TensorProto.FLOAT16),
        n("MatMul", ["ct16", "w16"], ["m16"], name="/proj16/MatMul"),
        n("Cast", ["m16"], ["m32"], name="to32", to=TensorProto.FLOAT),
        n("MatMul", ["m32", "w32"], ["y"], name="/head/MatMul"),
    ]
    graph = helper.make_graph(
        nodes,
        "mixed",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 1, "s"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", "s", 4])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def tensor(name: str, dtype: str, trt11: bool) -> dict:
    if trt11:
        return {
            "Name": name,
            "Location": "Device",
            "Dimensions": [1, -1, 8],
            "Datatype": dtype,
            "Format": "Row major linear format",
        }
    words = {
        "Int8": "Thirty-two wide channel vectorized row major Int8 format",
        "Half": "Row major linear FP16 format",
        "Float": "Row major linear FP32 format",
    }
    return {"Name": name, "Location": "Device", "Dimensions": [1, -1, 8], "Format/Datatype": words[dtype]}


def engine_json(conv: str = "Int8", proj: str = "Half", head: str = "Float", trt11: bool = False) -> str:
    """An engine's inspector output (detailed verbosity) for ``mixed_graph``, with the given input types."""
    layers = [
        {
            "Name": "Reformatting CopyNode for Input Tensor 0 to x_q + /conv/Conv",
            "LayerType": "Reformat",
            "Inputs": [tensor("x", "Float", trt11)],
            "Outputs": [tensor("x_reformatted", "Float", trt11)],
        },
        {
            "Name": "x_q",
            "LayerType": "Scale",
            "Inputs": [tensor("x", "Float", trt11)],
            "Outputs": [tensor("xq", "Int8", trt11)],
            "Metadata": "[ONNX Layer: x_q]",
        },
        {
            "Name": "cw_q + x_dq + /conv/Conv",
            "LayerType": "CaskConvolution",
            "Inputs": [tensor("xq", conv, trt11)],
            "Outputs": [tensor("c", "Float", trt11)],
            "TacticName": "sm90_xmma_fprop_implicit_gemm",
            "Metadata": SEP.join(f"[ONNX Layer: {n}]" for n in ("cw_q", "cw_dq", "x_dq", "/conv/Conv")),
        },
        {
            "Name": "tr + to16",
            "LayerType": "Shuffle",
            "Inputs": [tensor("c", "Float", trt11)],
            "Outputs": [tensor("ct16", "Half", trt11)],
            "Metadata": "[ONNX Layer: tr]\x1f[ONNX Layer: to16]",
        },
        {
            "Name": "/proj16/MatMul",
            "LayerType": "gemm",
            "Inputs": [tensor("ct16", proj, trt11)],
            "Outputs": [tensor("m16", proj, trt11)],
            "Metadata": "[ONNX Layer: /proj16/MatMul]",
        },
        {
            "Name": "to32 + /head/MatMul",
            "LayerType": "CaskGemmMatrixMultiply",
            "Inputs": [tensor("m32", head, trt11)],
            "Outputs": [tensor("y", head, trt11)],
        },  # no Metadata: matched through the fused name
    ]
    io = (
        {
            "I/O Tensors": [
                {"Name": "x", "IOMode": "Input", "DataType": "Float"},
                {"Name": "y", "IOMode": "Output", "DataType": "Float"},
            ]
        }
        if trt11
        else {"Bindings": ["x", "y"]}
    )
    return json.dumps({"Layers": layers, **io})


@pytest.fixture(scope="module")
def plan(tmp_path_factory) -> dict[str, str]:
    path = mixed_graph(tmp_path_factory.mktemp("inspector") / "mixed.onnx")
    return {node: precision for node, _, precision in precisions_of_onnx(path)}


def test_the_plan_is_read_back_from_the_graph(plan) -> None:
    assert plan == {"/conv/Conv": "int8", "/proj16/MatMul": "fp16", "/head/MatMul": "fp32"}


@pytest.mark.parametrize("trt11", [False, True], ids=["tensorrt10", "tensorrt11"])
def test_a_clean_engine_passes(plan, trt11) -> None:
    layers = parse_engine_information(engine_json(trt11=trt11))
    assert [l.precision for l in layers][2:] == ["int8", "fp32", "fp16", "fp32"]
    result = check_plan(layers, plan)
    assert result.passed and result.checked == 3 and "match the plan on all 3" in result.summary()


@pytest.mark.parametrize("trt11", [False, True], ids=["tensorrt10", "tensorrt11"])
def test_int8_fallback_is_detected(plan, trt11) -> None:
    result = check_plan(parse_engine_information(engine_json(conv="Half", trt11=trt11)), plan)
    assert not result.passed and [m.node for m in result.int8_fallback] == ["/conv/Conv"]
    assert (
        result.int8_fallback[0].realized == "fp16"
        and result.int8_fallback[0].layer == "cw_q + x_dq + /conv/Conv"
    )
    assert "1 planned INT8 but not INT8: /conv/Conv (fp16 in cw_q + x_dq + /conv/Conv)" in result.summary()


def test_fp16_mismatch_and_reduced_fp32_are_detected(plan) -> None:
    result = check_plan(parse_engine_information(engine_json(proj="Float", head="Half")), plan)
    assert [(m.node, m.realized) for m in result.fp16_mismatch] == [("/proj16/MatMul", "fp32")]
    assert [(m.node, m.realized) for m in result.fp32_mismatch] == [("/head/MatMul", "fp16")]
    assert not result.int8_fallback and not result.passed
    assert result.to_json()["fp16_mismatch"][0]["layer"] == "/proj16/MatMul"


def test_nodes_the_engine_does_not_name_are_unverified(plan) -> None:
    data = json.loads(engine_json())
    data["Layers"] = [l for l in data["Layers"] if l["Name"] != "/proj16/MatMul"]
    result = check_plan(parse_engine_information(data), plan)
    assert result.not_found == ["/proj16/MatMul"] and not result.passed and "unverified" in result.summary()


@pytest.mark.parametrize(
    "text,match",
    [
        ("not json", "not JSON"),
        ('{"Bindings": ["x"]}', 'no "Layers" list'),
        (
            '{"Layers": ["cw_q + x_dq + /conv/Conv"], "Bindings": ["x"]}',
            "without detailed profiling verbosity",
        ),
    ],
)
def test_inspector_output_without_precisions_is_refused(text, match) -> None:
    with pytest.raises(WorkbenchError, match=match):
        parse_engine_information(text)


def test_data_type_words() -> None:
    assert dtype_of({"Format/Datatype": "Channel major FP16 format where channel % 2 == 0"}) == "fp16"
    assert dtype_of({"Format/Datatype": "Row major linear BF16 format"}) == "bf16"
    assert dtype_of({"Datatype": "Int8", "Format": "Row major linear format"}) == "int8"
    assert dtype_of({"Datatype": "Float"}) == "fp32" and dtype_of({"Name": "x"}) is None


@pytest.mark.skipif(
    not (has_module("tensorrt") or has_module("tensorrt_rtx_bindings")),
    reason="no TensorRT builder installed",
)
def test_a_real_engine_inspector_where_a_runtime_can_load_it(plan, tmp_path) -> None:
    """Build the mixed graph with the installed TensorRT; inspect it where the runtime can load the engine."""
    from workbench.backends.tensorrt.builder import BuildSettings, build_engine
    from workbench.backends.tensorrt.inspector import engine_information
    from workbench.backends.tensorrt.profile import Range

    built = build_engine(
        mixed_graph(tmp_path / "mixed.onnx"), BuildSettings((1, 2), Range(16, 32, 64)), tmp_path
    )
    try:
        text = engine_information(built.engine_path)
    except Exception as exc:
        pytest.skip(
            f"the engine built ({built.engine_bytes} bytes) but this TensorRT runtime cannot load it to "
            f"inspect it here (no CUDA GPU here; on the H200 TensorRT-RTX refuses compute capability 9.0): {exc}"
        )
    assert check_plan(parse_engine_information(text), plan).passed

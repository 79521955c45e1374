"""Multiply-accumulates per node of a small graph built in code, counted by hand."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from workbench.errors import WorkbenchError
from workbench.quantize.macs import node_macs, opt_samples
from workbench.quantize.plan import PrecisionPlan


def _graph() -> onnx.ModelProto:
    """input [batch, samples] -> Unsqueeze -> Conv(4x1x3) -> Conv(4x2x3, group 2) -> Transpose -> MatMul(4x5)
    -> ReduceMean over time -> Gemm(5x3)."""

    def weight(name: str, shape: tuple[int, ...]) -> onnx.TensorProto:
        return numpy_helper.from_array(np.ones(shape, np.float32), name)

    nodes = [
        helper.make_node("Unsqueeze", ["input_values", "axes1"], ["x1"], name="unsqueeze"),
        helper.make_node("Conv", ["x1", "w1"], ["c1"], name="conv1"),
        helper.make_node("Conv", ["c1", "w2"], ["c2"], name="conv2", group=2),
        helper.make_node("Transpose", ["c2"], ["t"], name="transpose", perm=[0, 2, 1]),
        helper.make_node("MatMul", ["t", "w3"], ["m"], name="matmul"),
        helper.make_node("ReduceMean", ["m"], ["r"], name="mean", axes=[1], keepdims=0),
        helper.make_node("Gemm", ["r", "w4"], ["logits"], name="gemm"),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny",
        [helper.make_tensor_value_info("input_values", TensorProto.FLOAT, ["batch", "samples"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, None)],
        [
            numpy_helper.from_array(np.array([1], np.int64), "axes1"),
            weight("w1", (4, 1, 3)),
            weight("w2", (4, 2, 3)),
            weight("w3", (4, 5)),
            weight("w4", (5, 3)),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_macs_of_a_small_graph_by_hand() -> None:
    counted = node_macs(_graph(), samples=10)
    # conv1: out [1, 4, 8] = 32 outputs x (1 x 3) = 96; conv2 (group 2): out [1, 4, 6] = 24 x (2 x 3) = 144;
    # matmul: [1, 6, 4] x [4, 5] -> 30 outputs x 4 = 120; gemm: [1, 5] x [5, 3] -> 3 outputs x 5 = 15
    assert counted.macs == {"conv1": 96, "conv2": 144, "matmul": 120, "gemm": 15}
    assert counted.total == 375 and counted.unresolved == ()
    longer = node_macs(_graph(), samples=20)
    assert longer.macs["conv1"] == 4 * 18 * 3 and longer.macs["gemm"] == 15  # the gemm sees the mean only


def test_int8_share_of_macs_against_the_node_share() -> None:
    counted = node_macs(_graph(), samples=10)
    plan = PrecisionPlan("p", "fp16", {"conv2": "int8", "gemm": "int8"})
    assert counted.int8_share(plan) == pytest.approx((144 + 15) / 375)
    assert plan.int8_share(list(counted.macs)) == pytest.approx(0.5)  # 2 of 4 nodes
    assert counted.int8_share(PrecisionPlan("all", "int8")) == 1.0


def test_opt_length_and_bad_length() -> None:
    assert opt_samples([1.0, 3.0, 2.0]) == 32000  # the median, as the engine profile's opt
    assert opt_samples(None) == 64000  # the default profile's 4 s
    with pytest.raises(WorkbenchError, match="positive input length"):
        node_macs(_graph(), samples=0)


def test_compute_shares_of_a_built_graph_read_back() -> None:
    """The shares a sign-off reports, from the precisions read back from a graph (Q/DQ before conv2)."""
    from workbench.quantize.macs import compute_shares

    counted = node_macs(_graph(), samples=10)
    rows = [
        ("conv1", "Conv", "fp16"),
        ("conv2", "Conv", "int8"),
        ("matmul", "MatMul", "fp16"),
        ("gemm", "Gemm", "fp32"),
    ]
    shares = compute_shares(counted, rows)
    assert shares == {"int8_macs_share": pytest.approx(144 / 375), "int8_nodes": 1, "compute_nodes": 4}


def test_compute_shares_of_onnx_runtime_dynamic_quantization(tmp_path) -> None:
    """ONNX Runtime's quantize_dynamic renames the MatMul it replaces (``<name>_quant``, a MatMulInteger): its
    MACs still count as INT8 (this table read 0 % for the dynamic INT8 candidate before)."""
    from workbench.quantize.dynamic import build_dynamic
    from workbench.quantize.macs import compute_shares
    from workbench.quantize.plan import precisions_of_onnx

    fp32 = tmp_path / "tiny.onnx"
    onnx.save(_graph(), str(fp32))
    dynamic = build_dynamic(fp32, tmp_path / "tiny.dynamic.onnx", "s8")
    rows = precisions_of_onnx(dynamic)
    assert ("matmul_quant", "MatMulInteger", "int8") in rows
    assert ("gemm_MatMul_quant", "MatMulInteger", "int8") in rows  # a Gemm becomes MatMul + Add first
    shares = compute_shares(node_macs(_graph(), samples=10), rows)
    assert shares["int8_macs_share"] == pytest.approx((120 + 15) / 375)
    assert shares["int8_nodes"] == 2


def test_the_dynamic_build_leaves_the_root_logger_as_it_found_it(tmp_path) -> None:
    """ONNX Runtime's quantizer logs through the root logger, whose first use installs a root handler (an implicit
    ``logging.basicConfig``); left there, it printed every later workbench progress line a second time."""
    import logging

    from workbench.quantize.dynamic import build_dynamic

    fp32 = tmp_path / "tiny.onnx"
    onnx.save(_graph(), str(fp32))
    root = logging.getLogger()
    saved = root.handlers[:]
    root.handlers[:] = []  # as in a CLI process: nobody configured the root logger
    try:
        build_dynamic(fp32, tmp_path / "tiny.dynamic.onnx", "u8")
        assert root.handlers == []
    finally:
        root.handlers[:] = saved

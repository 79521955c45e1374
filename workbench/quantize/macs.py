"""Multiply-accumulates per quantizable node at a concrete input length, and a plan's INT8 share of them.

Nodes differ in compute by orders of magnitude (a 256x32 LM head and a 256x1024 feed-forward matrix are
one node each), so the search's objective and its reports count compute, not nodes. The ONNX graph's input
is fixed to ``[batch, samples]`` (the engine profile's opt length) and ONNX shape inference (with data
propagation, so the Shape/Reshape chains resolve) gives every tensor's shape; from those:

- MatMul: the output's element count times the shared (inner) dimension;
- Gemm: M x N x K (``transA`` read for K);
- Conv: the output's element count times the weight's ``C_in / group x kernel`` elements.

A node whose shapes do not resolve gets no count (``unresolved``) and is left out of both sides of a share.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import onnx

from workbench.config import QUANTIZABLE_OPS, SAMPLE_RATE, EngineProfile
from workbench.errors import WorkbenchError

if TYPE_CHECKING:
    from workbench.quantize.plan import PrecisionPlan


# ONNX Runtime's quantize_dynamic names the integer node that replaces a MatMul/Conv after it with these suffixes
# (a Gemm becomes a MatMul and an Add first)
DYNAMIC_SUFFIXES: tuple[str, ...] = ("_MatMul_quant", "_quant")


@dataclass(frozen=True)
class NodeMacs:
    """Multiply-accumulates of each quantizable node at ``samples`` input samples (batch 1)."""

    samples: int
    macs: dict[str, int]  # node name -> MACs
    unresolved: tuple[str, ...] = ()

    @property
    def total(self) -> int:
        return sum(self.macs.values())

    def int8_share(self, plan: PrecisionPlan) -> float:
        """The share of the counted MACs that ``plan`` puts in INT8 (0 when nothing was counted)."""
        total = self.total
        if total == 0:
            return 0.0
        return sum(m for node, m in self.macs.items() if plan.precision_of(node) == "int8") / total

    def of_node(self, node: str) -> int:
        """MACs of ``node``, also under the names ONNX Runtime's dynamic quantization gives its integer twin
        (``<FP32 node name>_quant``, ``<Gemm name>_MatMul_quant``: a ``MatMulInteger`` / ``ConvInteger`` node)."""
        for name in (node, *(node.removesuffix(s) for s in DYNAMIC_SUFFIXES if node.endswith(s))):
            if name in self.macs:
                return self.macs[name]
        return 0

    def of_nodes(self, nodes: Sequence[str]) -> int:
        return sum(self.of_node(n) for n in nodes)

    def to_json(self) -> dict[str, object]:
        return {
            "samples": self.samples,
            "seconds": self.samples / SAMPLE_RATE,
            "total": self.total,
            "unresolved": list(self.unresolved),
        }


def _dims(value: onnx.ValueInfoProto) -> list[int] | None:
    shape = value.type.tensor_type.shape
    dims: list[int] = []
    for d in shape.dim:
        if not d.HasField("dim_value") or d.dim_value <= 0:
            return None
        dims.append(int(d.dim_value))
    return dims


def fixed_input(model: onnx.ModelProto, samples: int, batch: int = 1) -> onnx.ModelProto:
    """A copy of ``model`` whose first input is ``[batch, samples]`` (other inputs' free axes likewise)."""
    if samples < 1 or batch < 1:
        raise WorkbenchError(
            f"MACs need a positive input length and batch, got {samples} samples, batch {batch}"
        )
    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    del fixed.graph.value_info[:]
    initializers = {i.name for i in fixed.graph.initializer}
    for value in fixed.graph.input:
        if value.name in initializers:
            continue
        for axis, dim in enumerate(value.type.tensor_type.shape.dim):
            if not dim.HasField("dim_value") or dim.dim_value <= 0:
                dim.Clear()
                dim.dim_value = batch if axis == 0 else samples
    return fixed


def _macs_of(node: onnx.NodeProto, shapes: Mapping[str, list[int]]) -> int | None:
    inputs = [shapes.get(name) for name in node.input]
    out = shapes.get(node.output[0]) if node.output else None
    if out is None or not inputs or any(i is None for i in inputs[:2]):
        return None
    a, b = inputs[0], inputs[1]
    assert a is not None and b is not None
    if node.op_type == "MatMul":
        inner = a[-1] if len(a) >= 1 else 1
        return math.prod(out) * inner
    if node.op_type == "Gemm":
        trans_a = next((attr.i for attr in node.attribute if attr.name == "transA"), 0)
        inner = a[0] if trans_a else a[-1]
        return math.prod(out) * inner
    if node.op_type == "Conv":
        return math.prod(out) * math.prod(b[1:])
    return None


def node_macs(model: onnx.ModelProto, samples: int) -> NodeMacs:
    """MACs of every MatMul/Gemm/Conv node of ``model`` with its input fixed to ``[1, samples]``."""
    inferred = onnx.shape_inference.infer_shapes(fixed_input(model, samples), data_prop=True)
    shapes: dict[str, list[int]] = {}
    for value in [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]:
        dims = _dims(value)
        if dims is not None:
            shapes[value.name] = dims
    for init in inferred.graph.initializer:
        shapes[init.name] = [int(d) for d in init.dims]
    for node in inferred.graph.node:  # Constant nodes hold weights in some exports
        if node.op_type == "Constant" and node.output:
            for attr in node.attribute:
                if attr.name == "value":
                    shapes[node.output[0]] = [int(d) for d in attr.t.dims]
    macs: dict[str, int] = {}
    unresolved: list[str] = []
    for node in inferred.graph.node:
        if node.op_type not in QUANTIZABLE_OPS:
            continue
        count = _macs_of(node, shapes)
        if count is None:
            unresolved.append(node.name)
        else:
            macs[node.name] = count
    return NodeMacs(samples, macs, tuple(unresolved))


def opt_samples(durations_s: Sequence[float] | None = None) -> int:
    """The engine profile's opt length in samples: the median of ``durations_s`` as the TensorRT build derives
    it from a set, else the default profile's opt duration."""
    values = sorted(float(d) for d in (durations_s or []) if d > 0)
    if not values:
        return round(EngineProfile().opt_s * SAMPLE_RATE)
    return round(values[len(values) // 2] * SAMPLE_RATE)


def compute_shares(macs: NodeMacs, precisions: Sequence[tuple[str, str, str]]) -> dict[str, object]:
    """INT8 share of MACs and of compute nodes of a built graph, from its (node, op, precision) rows as
    ``workbench.quantize.plan.precisions_of_graph`` reads them back (nodes named as in the FP32 export)."""
    int8 = [node for node, _, precision in precisions if precision == "int8"]
    counted = macs.of_nodes([node for node, _, _ in precisions])
    return {
        "int8_macs_share": macs.of_nodes(int8) / counted if counted else 0.0,
        "int8_nodes": len(int8),
        "compute_nodes": len(precisions),
    }

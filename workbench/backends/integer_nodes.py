"""Run the INT8 nodes of a TensorRT-bound FP16 Q/DQ graph on ONNX Runtime's CPU integer kernels.

A variant for TensorRT computes in FP16 between its Q/DQ islands, so its QuantizeLinear/DequantizeLinear carry
FP16 scales (``workbench.quantize.qdq``). ONNX Runtime's CPU provider fuses Q/DQ around a MatMul, Conv or Gemm
into its integer kernels (``MatMulIntegerToFloat``, ``QLinearMatMul``, ...) only with float32 scales, so on the
CPU such a graph ran every INT8 node as a float GEMM on dequantized values, with FP16 Q and DQ kernels that are
scalar loops: the INT8 variants of the demo model ran at about half the speed of their FP32 source.

``with_integer_nodes`` rewrites, in memory and only for ONNX Runtime CPU sessions, each MatMul/Conv/Gemm whose
float inputs all come from FP16-scale DequantizeLinear nodes: the scales become float32 (the same values), the
activation's QuantizeLinear reads a float32 cast of its FP16 input (the same quantized integers), the node computes
in float32 and a Cast writes its output in FP16 under the original name, so every other node and tensor is
unchanged (each activation's FP16 Q/DQ pair gives way to one float32 pair per INT8 reader). ONNX Runtime then
fuses the INT8 MatMuls into its integer kernels: int8 x int8 products summed exactly in int32 and scaled in
float32, as TensorRT's INT8 kernels compute, instead of products of dequantized values that were rounded to FP16
first (a relative error of about 2^-11 per operand that the
quantization of later layers amplifies into different transcripts, as any rounding difference does). The file
on disk, which TensorRT builds, is not touched.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

INTEGER_OPS = frozenset({"MatMul", "Conv", "Gemm"})
# ONNX Runtime optimisers a rewritten graph's session turns off: common-subexpression elimination merges the
# per-reader QuantizeLinear copies back into one, and a quantized activation with several readers is not fused
DISABLED_OPTIMIZERS: tuple[str, ...] = ("CommonSubexpressionElimination",)
REWRITTEN = (
    "INT8 nodes of FP16 Q/DQ graphs on ONNX Runtime's integer kernels (Q/DQ scales made float32 at load, outputs "
    "cast to FP16; workbench.backends.integer_nodes)"
)


@dataclass(frozen=True)
class Rewrite:
    """What ``with_integer_nodes`` changed: the INT8 nodes moved onto float32 Q/DQ, the activations cast to float32
    for them, and the FP16 Q/DQ nodes their private float32 pairs replaced."""

    nodes: int
    activations: int
    dropped: int


def has_fp16_qdq_nodes(model: onnx.ModelProto) -> bool:
    """Whether some MatMul/Conv/Gemm of ``model`` reads an FP16-scale DequantizeLinear (what the rewrite targets)."""
    return bool(_eligible(model.graph, _Constants(model.graph), _producers(model.graph)))


def with_integer_nodes(model: onnx.ModelProto) -> tuple[onnx.ModelProto, Rewrite]:
    """A copy of ``model`` whose FP16 Q/DQ INT8 nodes compute through float32 Q/DQ (see the module docstring).

    ONNX Runtime fuses an activation's QuantizeLinear -> DequantizeLinear into an integer kernel only where that
    pair feeds that one node, so an activation several INT8 nodes read (the q/k/v projections read one) gets its
    own float32 Q/DQ pair per reader, all reading one float32 cast; the FP16 pairs they replace are dropped."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    rewriter = _Rewriter(out.graph)
    eligible = _eligible(out.graph, rewriter.constants, rewriter.producers)
    for node, sources in eligible:
        for slot, dq in enumerate(sources):
            rewriter.read_through_float32(node, slot, dq)
        rewriter.compute_in_float32(node)
    return out, Rewrite(len(eligible), len(rewriter.casts), rewriter.finish())


class _Rewriter:
    """The nodes ``with_integer_nodes`` adds before and after existing ones, and the ones it replaces."""

    def __init__(self, graph: onnx.GraphProto) -> None:
        self.graph = graph
        self.constants = _Constants(graph)
        self.producers = _producers(graph)
        self.readers: dict[str, int] = defaultdict(int)
        for node in graph.node:
            for name in node.input:
                self.readers[name] += 1
        self.before: dict[str, list[onnx.NodeProto]] = defaultdict(list)
        self.after: dict[str, list[onnx.NodeProto]] = defaultdict(list)
        self.casts: dict[str, str] = {}  # an FP16 QuantizeLinear's input -> its float32 cast
        self.replaced: set[str] = set()

    def read_through_float32(self, node: onnx.NodeProto, slot: int, dq: onnx.NodeProto) -> None:
        """``node``'s input ``slot`` from a float32 DequantizeLinear: ``dq`` itself for a weight only ``node``
        reads, else a private copy (of the activation's QuantizeLinear too, reading one float32 cast)."""
        q = self.producers.get(dq.input[0])
        if q is not None and q.op_type != "QuantizeLinear":
            q = None
        scale = self.constants.as_float32(dq.input[1])
        if q is None and self.readers[dq.output[0]] == 1:  # a weight's own DequantizeLinear
            dq.input[1] = scale
            return
        pair = f"{node.name}_{slot}"
        read = dq.input[0]
        if q is not None:
            source = q.input[0]
            if source not in self.casts:
                self.casts[source] = f"{source}_float32"
                self.before[q.name].append(_cast(source, self.casts[source], TensorProto.FLOAT))
            read = f"{q.output[0]}_for_{pair}"
            self.before[q.name].append(_copy_of(q, [self.casts[source], scale, *q.input[2:]], read))
            self.replaced.add(q.name)
        private = f"{dq.output[0]}_for_{pair}"
        self.after[(q or dq).name].append(_copy_of(dq, [read, scale, *dq.input[2:]], private))
        node.input[slot] = private
        self.replaced.add(dq.name)

    def compute_in_float32(self, node: onnx.NodeProto) -> None:
        """``node``'s bias (Conv, Gemm) in float32 (a constant converted, a computed one cast) and its output cast
        back to FP16 under its own name."""
        if len(node.input) > 2 and node.input[2]:
            bias = node.input[2]
            node.input[2] = self.constants.as_float32(bias)
            if node.input[2] == bias and self.constants.value(bias) is None:
                node.input[2] = f"{bias}_float32_for_{node.name}"
                self.before[node.name].append(_cast(bias, node.input[2], TensorProto.FLOAT))
        name = node.output[0]
        node.output[0] = f"{name}_float32"
        self.after[node.name].append(_cast(node.output[0], name, TensorProto.FLOAT16, f"{name}_to_fp16"))

    def finish(self) -> int:
        """Put the added nodes in place, drop the replaced ones nothing reads; how many were dropped."""
        ordered: list[onnx.NodeProto] = []
        for node in self.graph.node:
            ordered += self.before.get(node.name, [])
            ordered.append(node)
            ordered += self.after.get(node.name, [])
        kept = _without_unread(ordered, self.replaced, {o.name for o in self.graph.output})
        del self.graph.node[:]
        self.graph.node.extend(kept)
        del self.graph.value_info[:]  # stale types of the rewritten outputs; ONNX Runtime infers them again
        return len(ordered) - len(kept)


def _cast(source: str, target: str, to: int, name: str | None = None) -> onnx.NodeProto:
    return helper.make_node("Cast", [source], [target], to=to, name=name or target)


def _producers(graph: onnx.GraphProto) -> dict[str, onnx.NodeProto]:
    """Each tensor's writing node, by tensor name."""
    return {name: node for node in graph.node for name in node.output}


def _eligible(
    graph: onnx.GraphProto, constants: _Constants, producers: dict[str, onnx.NodeProto]
) -> list[tuple[onnx.NodeProto, list[onnx.NodeProto]]]:
    """The MatMul/Conv/Gemm nodes whose float inputs all come from FP16-scale DequantizeLinear nodes."""
    found = []
    for node in graph.node:
        if node.op_type not in INTEGER_OPS:
            continue
        sources = [producers.get(name) for name in node.input[:2]]
        if all(
            s is not None and s.op_type == "DequantizeLinear" and constants.dtype(s.input[1]) == np.float16
            for s in sources
        ):
            found.append((node, [s for s in sources if s is not None]))
    return found


def _without_unread(nodes: list[onnx.NodeProto], names: set[str], outputs: set[str]) -> list[onnx.NodeProto]:
    """``nodes`` without those named in ``names`` that nothing reads any more (a dropped DequantizeLinear leaves its
    QuantizeLinear unread: repeated until none is left)."""
    while True:
        read = {name for node in nodes for name in node.input} | outputs
        kept = [n for n in nodes if n.name not in names or any(o in read for o in n.output)]
        if len(kept) == len(nodes):
            return kept
        nodes = kept


def _copy_of(node: onnx.NodeProto, inputs: list[str], output: str) -> onnx.NodeProto:
    """A node like ``node`` (operator and attributes) reading ``inputs`` and writing ``output``, named after it."""
    copy = helper.make_node(node.op_type, inputs, [output], name=output)
    copy.attribute.extend(node.attribute)
    return copy


class _Constants:
    """The graph's initializers and Constant nodes by name, and float32 copies of FP16 ones made on demand."""

    def __init__(self, graph: onnx.GraphProto) -> None:
        self.graph = graph
        self.initializers = {t.name: t for t in graph.initializer}
        self.nodes = {n.output[0]: n for n in graph.node if n.op_type == "Constant" and n.attribute}

    def value(self, name: str) -> np.ndarray | None:
        if name in self.initializers:
            return numpy_helper.to_array(self.initializers[name])
        node = self.nodes.get(name)
        if node is not None and node.attribute[0].type == onnx.AttributeProto.TENSOR:
            return numpy_helper.to_array(node.attribute[0].t)
        return None

    def dtype(self, name: str) -> np.dtype | None:
        value = self.value(name)
        return None if value is None else value.dtype

    def as_float32(self, name: str) -> str:
        """The name of a float32 initializer holding the constant ``name`` (itself when already float32)."""
        value = self.value(name)
        if value is None or value.dtype == np.float32:
            return name
        new = f"{name}_float32"
        if new not in self.initializers:
            tensor = numpy_helper.from_array(value.astype(np.float32), new)
            self.graph.initializer.append(tensor)
            self.initializers[new] = tensor
        return new

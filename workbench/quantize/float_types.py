"""Float types of a variant: every float tensor in the type of the node that writes it, one Cast per crossing.

Input: a graphsurgeon graph and, per node name, the float type the node computes in (``fp16``/``fp32``;
nodes that write no float tensor have none). Every float input of a node is given in the node's type:
a constant is stored again in that type (once per constant and type), a tensor written in the other type
goes through one Cast (shared by every reader that wants that type). So Casts appear only where an FP16
region meets an FP32 one (a graph input, a graph output, an FP32 island), never between two nodes of
the same type. The graph keeps its IO types: an FP16 graph output is written under another name and cast
back. The model's own Casts to float follow the node's type, and a Cast that becomes a no-op is removed;
Constant and ConstantOfShape nodes store their value in the node's type (so the graph keeps its nodes).

Exceptions, by the ONNX spec: Shape/Size/Cast read any input type (never cast); Resize's ``roi``/``scales``
and Upsample's ``scales`` stay as written (float32).
"""

from __future__ import annotations

import numpy as np
import onnx

DTYPES: dict[str, np.dtype] = {"fp16": np.dtype(np.float16), "fp32": np.dtype(np.float32)}
ONNX_TYPES: dict[np.dtype, int] = {
    np.dtype(np.float16): onnx.TensorProto.FLOAT16,
    np.dtype(np.float32): onnx.TensorProto.FLOAT,
}
LABELS: dict[np.dtype, str] = {np.dtype(np.float16): "fp16", np.dtype(np.float32): "fp32"}
ANY_TYPE_INPUTS = ("Shape", "Size", "Cast")
KEEP_INPUT_SLOTS = {("Resize", 1), ("Resize", 2), ("Upsample", 1)}
FLOAT_ONNX = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16)


def _np(dtype) -> np.dtype | None:
    try:
        return (
            np.dtype(onnx.helper.tensor_dtype_to_np_dtype(dtype))
            if isinstance(dtype, int)
            else np.dtype(dtype)
        )
    except (TypeError, KeyError):
        return None


class _Typer:
    """One pass over a toposorted graph; ``types`` holds the source graph's element types by tensor name."""

    def __init__(self, graph, compute_types: dict[str, str], types: dict[str, int]) -> None:
        import onnx_graphsurgeon as gs

        self.gs = gs
        self.graph = graph
        self.compute_types = compute_types
        self.types = types
        self.current: dict[str, np.dtype] = {}
        self.casts: dict[tuple[str, np.dtype], object] = {}
        self.constants: dict[tuple[str, np.dtype], object] = {}

    def float_type(self, tensor) -> np.dtype | None:
        """The float type a tensor is in now (float16/float32), None for anything else."""
        if isinstance(tensor, self.gs.Constant):
            dtype = tensor.values.dtype
            return dtype if dtype in ONNX_TYPES else None
        if tensor.name in self.current:
            return self.current[tensor.name]
        if self.types.get(tensor.name) in FLOAT_ONNX:
            return _np(self.types[tensor.name])
        dtype = _np(tensor.dtype) if tensor.dtype is not None else None
        return dtype if dtype in ONNX_TYPES else None

    def convert(self, tensor, target: np.dtype):
        if self.float_type(tensor) == target:
            return tensor
        label = LABELS[target]
        if isinstance(tensor, self.gs.Constant):
            key = (tensor.name, target)
            if key not in self.constants:
                self.constants[key] = self.gs.Constant(f"{tensor.name}_{label}", tensor.values.astype(target))
            return self.constants[key]
        key = (tensor.name, target)
        if key not in self.casts:
            out = self.gs.Variable(f"{tensor.name}_{label}", dtype=target, shape=tensor.shape)
            self.graph.nodes.append(
                self.gs.Node(
                    "Cast",
                    f"{tensor.name}_cast_{label}",
                    inputs=[tensor],
                    outputs=[out],
                    attrs={"to": ONNX_TYPES[target]},
                )
            )
            self.current[out.name] = target
            self.casts[key] = out
        return self.casts[key]

    def node(self, node) -> None:
        ctype = self.compute_types.get(node.name)
        target = DTYPES[ctype] if ctype else None
        slots = [
            (i, t)
            for i, t in enumerate(node.inputs)
            if t.name
            and self.float_type(t) is not None
            and node.op not in ANY_TYPE_INPUTS
            and (node.op, i) not in KEEP_INPUT_SLOTS
        ]
        if target is None and len({self.float_type(t) for _, t in slots}) > 1:
            target = DTYPES["fp32"]  # a node without float output reading mixed types (Equal, Less): widen
        if target is not None:
            for i, tensor in slots:
                node.inputs[i] = self.convert(tensor, target)
            if node.op == "Cast" and node.attrs.get("to") in FLOAT_ONNX:
                node.attrs["to"] = ONNX_TYPES[target]
            value = node.attrs.get("value") if node.op in ("Constant", "ConstantOfShape") else None
            if isinstance(value, self.gs.Constant) and value.values.dtype in ONNX_TYPES:
                node.attrs["value"] = self.gs.Constant(value.name, np.asarray(value.values).astype(target))
        for out in node.outputs:
            if target is not None and (
                self.types.get(out.name) in FLOAT_ONNX or self.float_type(out) is not None
            ):
                out.dtype = target
                self.current[out.name] = target

    def outputs(self) -> None:
        """Graph outputs keep their declared type: an output written in the other type is cast back."""
        for out in list(self.graph.outputs):
            declared = (
                _np(self.types.get(out.name, onnx.TensorProto.UNDEFINED))
                if out.name in self.types
                else self.float_type(out)
            )
            now = self.current.get(out.name)
            if (
                declared is None
                or declared not in ONNX_TYPES
                or now is None
                or now == declared
                or not out.inputs
            ):
                continue
            inner = self.gs.Variable(f"{out.name}_{LABELS[now]}", dtype=now, shape=out.shape)
            producer = out.inputs[0]
            producer.outputs[producer.outputs.index(out)] = inner
            for reader in list(out.outputs):
                reader.inputs[reader.inputs.index(out)] = inner
            self.graph.nodes.append(
                self.gs.Node(
                    "Cast",
                    f"{out.name}_cast_{LABELS[declared]}",
                    inputs=[inner],
                    outputs=[out],
                    attrs={"to": ONNX_TYPES[declared]},
                )
            )
            out.dtype = declared
            self.current[inner.name], self.current[out.name] = now, declared

    def drop_noop_casts(self) -> int:
        outputs = {t.name for t in self.graph.outputs}
        dropped = 0
        for node in list(self.graph.nodes):
            if node.op != "Cast" or not node.outputs or node.outputs[0].name in outputs:
                continue
            src, dst = node.inputs[0], node.outputs[0]
            if self.float_type(src) is not None and self.float_type(src) == _np(node.attrs.get("to")):
                for reader in list(dst.outputs):
                    for i, t in enumerate(reader.inputs):
                        if t is dst:
                            reader.inputs[i] = src
                node.outputs.clear()
                dropped += 1
        return dropped


def assign_float_types(graph, compute_types: dict[str, str], types: dict[str, int]) -> dict[str, int]:
    """Type every float tensor of ``graph`` (in place) by ``compute_types``; returns counts of what was added."""
    graph.toposort()
    typer = _Typer(graph, compute_types, types)
    for node in list(graph.nodes):
        typer.node(node)
    typer.outputs()
    dropped = typer.drop_noop_casts()
    graph.cleanup().toposort()
    return {
        "casts": len(typer.casts),
        "converted_constants": len(typer.constants),
        "dropped_noop_casts": dropped,
    }

"""Precision plan: int8 / fp16 / fp32 per compute node (MatMul / Gemm / Conv), a float type for every other
node (``rest``), and the nodes kept in FP32 by the FP16 guard, each with its reason.

``rest`` is the precision of every node that is not a compute node: ``fp16`` (the default for any plan whose
default is not fp32: the graph between Q/DQ islands runs in FP16, as TensorRT's strongly typed networks
and NVIDIA's ONNX quantizer want it) or ``fp32`` (the FP32 baseline, and the ORT-CPU flavour). ``keep_fp32``
names nodes (of any op) that run in FP32 whatever ``rest`` says, because FP16 would overflow or lose the
result there (``workbench.quantize.guard`` decides them from calibration statistics).

``placements(model)`` resolves the plan over every node of a model: what the plan file, the layer
comparison, the search and the dashboard's precision strip show.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import onnx

from workbench.artifacts import write_json_atomic
from workbench.config import QUANTIZABLE_OPS
from workbench.errors import WorkbenchError
from workbench.inputs.plan import FIX as PLAN_FIX
from workbench.inputs.plan import FLOAT_TYPES, PRECISIONS, check_plan
from workbench.inputs.problem import Where
from workbench.inputs.read import read_json

NO_FLOAT = "none"  # a node that writes no float tensor (shape and index arithmetic, Shape itself)
FLOAT_ELEM_TYPES = (
    onnx.TensorProto.FLOAT,
    onnx.TensorProto.FLOAT16,
    onnx.TensorProto.DOUBLE,
    onnx.TensorProto.BFLOAT16,
)


def quantizable_nodes(model: onnx.ModelProto) -> list[str]:
    """Names of the compute nodes a plan can place, in graph order."""
    return [n.name for n in model.graph.node if n.op_type in QUANTIZABLE_OPS]


# tensor_types of the last models seen, by their structure (``_structure``): the variants of one model are built from
# the same source again and again, and shape inference over every weight is most of what building one costs
_TYPES_SEEN: dict[tuple, dict[str, int]] = {}
_TYPES_KEPT = 8


def _attribute_key(attribute: onnx.AttributeProto) -> tuple:
    """What of a node attribute can change an inferred type or shape: a tensor's type and dims, not its values."""
    tensor = (attribute.t.data_type, tuple(attribute.t.dims)) if attribute.HasField("t") else None
    graphs = tuple(
        g.SerializeToString()
        for g in [*([attribute.g] if attribute.HasField("g") else []), *attribute.graphs]
    )
    return (
        attribute.name,
        attribute.type,
        attribute.i,
        attribute.f,
        attribute.s,
        tuple(attribute.ints),
        tuple(attribute.floats),
        tuple(attribute.strings),
        tensor,
        graphs,
    )


def _structure(model: onnx.ModelProto) -> tuple:
    """Everything ``tensor_types`` reads of ``model`` but the weights' values: nodes, attributes, initializer types
    and dims, graph inputs and outputs, opsets."""
    graph = model.graph
    return (
        tuple(
            (
                n.op_type,
                n.domain,
                tuple(n.input),
                tuple(n.output),
                tuple(_attribute_key(a) for a in n.attribute),
            )
            for n in graph.node
        ),
        tuple((i.name, i.data_type, tuple(i.dims)) for i in graph.initializer),
        tuple(v.SerializeToString() for v in [*graph.input, *graph.output, *graph.value_info]),
        tuple((o.domain, o.version) for o in model.opset_import),
    )


def tensor_types(model: onnx.ModelProto) -> dict[str, int]:
    """Element type of every tensor (graph inputs, initializers, node outputs), by ONNX shape inference; remembered
    for the last few model structures (weights' values never change a type)."""
    key = _structure(model)
    seen = _TYPES_SEEN.get(key)
    if seen is None:
        seen = _inferred_types(model)
        _TYPES_SEEN[key] = seen
        while len(_TYPES_SEEN) > _TYPES_KEPT:
            _TYPES_SEEN.pop(next(iter(_TYPES_SEEN)))
    return dict(seen)


def _inferred_types(model: onnx.ModelProto) -> dict[str, int]:
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    types = {
        v.name: v.type.tensor_type.elem_type
        for v in [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]
        if v.type.HasField("tensor_type")
    }
    types.update({i.name: i.data_type for i in model.graph.initializer})
    for node in model.graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            types[node.output[0]] = node.attribute[0].t.data_type
    return types


def float_nodes(model: onnx.ModelProto, types: dict[str, int] | None = None) -> set[str]:
    """Nodes that write a float tensor (the rest, Shape included, only make shapes, indices and masks)."""
    types = tensor_types(model) if types is None else types
    return {n.name for n in model.graph.node if any(types.get(t) in FLOAT_ELEM_TYPES for t in n.output if t)}


@dataclass(frozen=True)
class Placement:
    """One node under a plan: its precision, the float type it computes in, and why it is FP32 (if kept)."""

    node: str
    op: str
    precision: str  # int8 / fp16 / fp32, or "none" for a node that writes no float tensor
    compute_type: str | None  # fp16 / fp32 (an int8 node's float side), None for "none"
    reason: str | None = None

    def to_json(self) -> dict:
        out = {"node": self.node, "op": self.op, "precision": self.precision}
        if self.reason:
            out["reason"] = self.reason
        return out


ADDED_OPS = ("QuantizeLinear", "DequantizeLinear", "Cast")  # written by the workbench; not nodes of a plan
# ONNX Runtime's integer compute ops (dynamic quantization, QOperator graphs): compute nodes in INT8
INTEGER_COMPUTE_OPS = frozenset(
    {
        "MatMulInteger",
        "ConvInteger",
        "QLinearMatMul",
        "QLinearConv",
        "MatMulIntegerToFloat",
        "DynamicQuantizeMatMul",
    }
)


def _type_name(elem: int | None) -> str:
    return "fp16" if elem == onnx.TensorProto.FLOAT16 else "fp32"


def precisions_of_graph(model: onnx.ModelProto, every_node: bool = False) -> list[tuple[str, str, str]]:
    """(node, op, precision) in graph order, read back from the graph itself (element types by shape
    inference): a compute node is int8 when an input comes from DequantizeLinear or it is one of ONNX
    Runtime's integer ops (``INTEGER_COMPUTE_OPS``: dynamic quantization), else the type of its data
    input (fp16 also when an input is cast to or stored as float16); with ``every_node`` every other node too
    (Q/DQ and Cast apart), by the type of its first float output, ``none`` when it writes no float tensor."""
    types = tensor_types(model)
    producer = {out: node for node in model.graph.node for out in node.output}
    rows = []
    for node in model.graph.node:
        if node.op_type in QUANTIZABLE_OPS:
            sources = [producer.get(name) for name in node.input[:2] if name]
            if any(src is not None and src.op_type == "DequantizeLinear" for src in sources):
                rows.append((node.name, node.op_type, "int8"))
            else:
                half = any(types.get(name) == onnx.TensorProto.FLOAT16 for name in node.input[:2] if name)
                rows.append((node.name, node.op_type, "fp16" if half else "fp32"))
        elif node.op_type in INTEGER_COMPUTE_OPS:
            rows.append((node.name, node.op_type, "int8"))
        elif every_node and node.op_type not in ADDED_OPS:
            floats = [types.get(o) for o in node.output if o and types.get(o) in FLOAT_ELEM_TYPES]
            rows.append((node.name, node.op_type, _type_name(floats[0]) if floats else NO_FLOAT))
    return rows


def precisions_of_onnx(path: Path, every_node: bool = False) -> list[tuple[str, str, str]]:
    """``precisions_of_graph`` of an ONNX file (external weights are not read)."""
    return precisions_of_graph(onnx.load(str(path), load_external_data=False), every_node)


def precision_counts(path: Path) -> dict[str, int]:
    """Compute nodes per precision (int8 / fp16 / fp32) of an ONNX file."""
    counts: dict[str, int] = {}
    for _, _, precision in precisions_of_onnx(path):
        counts[precision] = counts.get(precision, 0) + 1
    return dict(sorted(counts.items()))


@dataclass(frozen=True)
class PrecisionPlan:
    """``default`` precision for every compute node, ``overrides`` per node name; ``rest`` for every other
    node (None: fp32 when ``default`` is fp32, else fp16); ``keep_fp32`` node -> why it stays FP32."""

    name: str
    default: str = "fp32"
    overrides: dict[str, str] = field(default_factory=dict)
    rest: str | None = None
    keep_fp32: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for value in [self.default, *self.overrides.values()]:
            if value not in PRECISIONS:
                raise WorkbenchError(f"plan {self.name!r}: precision {value!r} is not one of {PRECISIONS}")
        if self.rest is None:
            object.__setattr__(self, "rest", "fp32" if self.default == "fp32" else "fp16")
        if self.rest not in FLOAT_TYPES:
            raise WorkbenchError(f"plan {self.name!r}: rest {self.rest!r} is not one of {FLOAT_TYPES}")

    @property
    def rest_type(self) -> str:
        """``rest`` as ``__post_init__`` settled it: always one of the float types."""
        return self.rest or ("fp32" if self.default == "fp32" else "fp16")

    def precision_of(self, node: str) -> str:
        return self.overrides.get(node, self.default)

    def int8_share(self, nodes: list[str]) -> float:
        return sum(self.precision_of(n) == "int8" for n in nodes) / max(1, len(nodes))

    @property
    def is_fp32(self) -> bool:
        """Every node in FP32: the baseline, identical to the source graph."""
        return (
            self.rest == "fp32"
            and self.default == "fp32"
            and all(v == "fp32" for v in self.overrides.values())
        )

    def with_guard(self, keep_fp32: dict[str, str] | None) -> PrecisionPlan:
        """The plan with the FP16 guard's FP32 nodes added (its own entries win)."""
        if not keep_fp32:
            return self
        return replace(self, keep_fp32={**keep_fp32, **self.keep_fp32})

    def placement(self, node: onnx.NodeProto, has_float: bool) -> Placement:
        reason = self.keep_fp32.get(node.name)
        if node.op_type in QUANTIZABLE_OPS:
            precision = self.precision_of(node.name)
            if precision == "int8":  # integer arithmetic; the guard can only widen its float side
                return Placement(
                    node.name, node.op_type, "int8", "fp32" if reason else self.rest_type, reason
                )
            if reason:
                return Placement(node.name, node.op_type, "fp32", "fp32", reason)
            return Placement(node.name, node.op_type, precision, precision)
        if not has_float:
            return Placement(node.name, node.op_type, NO_FLOAT, None)
        if reason:
            return Placement(node.name, node.op_type, "fp32", "fp32", reason)
        return Placement(node.name, node.op_type, self.rest_type, self.rest_type)

    def placements(self, model: onnx.ModelProto, types: dict[str, int] | None = None) -> list[Placement]:
        """Every node of ``model`` (graph order) under this plan. A Constant node holding a float follows its
        readers when they all compute in one type (so an FP32 island's constants need no Cast)."""
        floats = float_nodes(model, types)
        placed = [self.placement(n, n.name in floats) for n in model.graph.node]
        side = {n.name: p.compute_type for n, p in zip(model.graph.node, placed)}
        readers: dict[str, set] = {}
        for node in model.graph.node:
            for name in node.input:
                readers.setdefault(name, set()).add(side[node.name])
        for i, node in enumerate(model.graph.node):
            wanted = readers.get(node.output[0], set()) - {None} if node.op_type == "Constant" else set()
            if placed[i].compute_type and len(wanted) == 1 and not placed[i].reason:
                (ctype,) = wanted
                placed[i] = replace(placed[i], precision=ctype, compute_type=ctype)
        return placed

    def to_json(self) -> dict:
        out = {
            "name": self.name,
            "default": self.default,
            "overrides": dict(sorted(self.overrides.items())),
            "rest": self.rest,
        }
        if self.keep_fp32:
            out["keep_fp32"] = dict(sorted(self.keep_fp32.items()))
        return out

    @classmethod
    def from_json(cls, obj: dict) -> PrecisionPlan:
        return cls(
            obj["name"],
            obj.get("default", "fp32"),
            dict(obj.get("overrides", {})),
            obj.get("rest"),
            dict(obj.get("keep_fp32", {})),
        )

    def save(self, path: Path, model: onnx.ModelProto | None = None, recovery: dict | None = None) -> None:
        """Write the plan; with ``model`` also every node's placement (``nodes``) and counts per precision; with
        ``recovery`` what the accuracy-recovery techniques did to the graph it was built from (for reading)."""
        obj = self.to_json()
        if recovery:
            obj["recovery"] = recovery
        if model is not None:
            nodes = self.placements(model)
            counts: dict[str, int] = {}
            for p in nodes:
                counts[p.precision] = counts.get(p.precision, 0) + 1
            obj["counts"] = dict(sorted(counts.items()))
            obj["nodes"] = [p.to_json() for p in nodes]
        write_json_atomic(Path(path), obj)

    def unknown_nodes(self, model: onnx.ModelProto) -> list[str]:
        """Override names that are not quantizable nodes of ``model`` and kept names that are not nodes of it."""
        known = set(quantizable_nodes(model))
        every = {n.name for n in model.graph.node}
        return sorted(
            {n for n in self.overrides if n not in known} | {n for n in self.keep_fp32 if n not in every}
        )

    @classmethod
    def load(cls, path: Path) -> PrecisionPlan:
        """A plan file given by the user: a JSON object with a file-name-safe ``name``, ``default`` and
        ``overrides`` (node -> precision), optionally ``rest`` and ``keep_fp32`` (node -> reason), as ``search``
        writes it (``plan.<name>.json``; its ``nodes`` and ``counts`` are for reading and are ignored here)."""
        where = Where(f"precision plan {path}", PLAN_FIX)
        return cls.from_json(check_plan(read_json(Path(path), where), where))


FP32 = PrecisionPlan("fp32", "fp32")
FP16 = PrecisionPlan("fp16", "fp16")
INT8 = PrecisionPlan("int8", "int8")
BUILT_PLANS = (
    FP32,
    FP16,
    INT8,
)  # the plans the workbench builds itself; their names name its own variant files


def check_user_plan_name(plan: PrecisionPlan, option: str = "--plan") -> None:
    """Refuse a user's plan whose name is a built plan's (any case: some file systems fold it): its variant,
    plan file and layer table would overwrite the built model's (``plan int8`` replaced INT8 everywhere)."""
    reserved = {p.name for p in BUILT_PLANS}
    if plan.name.lower() in reserved:
        raise WorkbenchError(
            f"{option}: the plan's name {plan.name!r} is reserved for the workbench's own "
            f"{'/'.join(sorted(reserved))} variants; rename it in the plan file (e.g. 'my-{plan.name.lower()}')"
        )

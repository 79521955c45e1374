"""Precision plan: per compute node (MatMul / Gemm / Conv) one of int8, fp16, fp32."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import onnx

from workbench.artifacts import write_json_atomic
from workbench.config import QUANTIZABLE_OPS
from workbench.errors import WorkbenchError
from workbench.inputs.plan import FIX as PLAN_FIX
from workbench.inputs.plan import PRECISIONS, check_plan
from workbench.inputs.problem import Where
from workbench.inputs.read import read_json



def quantizable_nodes(model: onnx.ModelProto) -> list[str]:
    """Names of the compute nodes a plan can place, in graph order."""
    return [n.name for n in model.graph.node if n.op_type in QUANTIZABLE_OPS]


def precisions_of_graph(model: onnx.ModelProto) -> list[tuple[str, str, str]]:
    """(node, op, precision) for every compute node in graph order, read back from the graph itself: int8 when
    an input comes from DequantizeLinear, fp16 when an input is cast to or stored as float16, else fp32."""
    producer = {out: node for node in model.graph.node for out in node.output}
    fp16_inits = {i.name for i in model.graph.initializer if i.data_type == onnx.TensorProto.FLOAT16}
    rows = []
    for node in model.graph.node:
        if node.op_type not in QUANTIZABLE_OPS:
            continue
        sources = [producer.get(name) for name in node.input[:2] if name]
        if any(src is not None and src.op_type == "DequantizeLinear" for src in sources):
            precision = "int8"
        elif any(name in fp16_inits for name in node.input[:2]) or any(
                src is not None and src.op_type == "Cast" and any(a.name == "to" and a.i == onnx.TensorProto.FLOAT16
                                                                  for a in src.attribute) for src in sources):
            precision = "fp16"
        else:
            precision = "fp32"
        rows.append((node.name, node.op_type, precision))
    return rows


def precisions_of_onnx(path: Path) -> list[tuple[str, str, str]]:
    """``precisions_of_graph`` of an ONNX file (external weights are not read)."""
    return precisions_of_graph(onnx.load(str(path), load_external_data=False))


def precision_counts(path: Path) -> dict[str, int]:
    """Compute nodes per precision (int8 / fp16 / fp32) of an ONNX file."""
    counts: dict[str, int] = {}
    for _, _, precision in precisions_of_onnx(path):
        counts[precision] = counts.get(precision, 0) + 1
    return dict(sorted(counts.items()))


@dataclass(frozen=True)
class PrecisionPlan:
    """``default`` precision for every quantizable node, ``overrides`` per node name."""

    name: str
    default: str = "fp32"
    overrides: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for value in [self.default, *self.overrides.values()]:
            if value not in PRECISIONS:
                raise WorkbenchError(f"plan {self.name!r}: precision {value!r} is not one of {PRECISIONS}")

    def precision_of(self, node: str) -> str:
        return self.overrides.get(node, self.default)

    def int8_share(self, nodes: list[str]) -> float:
        return sum(self.precision_of(n) == "int8" for n in nodes) / max(1, len(nodes))

    def to_json(self) -> dict:
        return {"name": self.name, "default": self.default, "overrides": dict(sorted(self.overrides.items()))}

    @classmethod
    def from_json(cls, obj: dict) -> "PrecisionPlan":
        return cls(obj["name"], obj.get("default", "fp32"), dict(obj.get("overrides", {})))

    def save(self, path: Path) -> None:
        write_json_atomic(Path(path), self.to_json())

    def unknown_nodes(self, model: onnx.ModelProto) -> list[str]:
        """Override names that are not quantizable nodes of ``model`` (typos, another model)."""
        known = set(quantizable_nodes(model))
        return sorted(n for n in self.overrides if n not in known)

    @classmethod
    def load(cls, path: Path) -> "PrecisionPlan":
        """A plan file given by the user: a JSON object with a file-name-safe ``name``, ``default`` and
        ``overrides`` (node -> precision), as ``search`` writes it (``plan.<name>.json``)."""
        where = Where(f"precision plan {path}", PLAN_FIX)
        obj = check_plan(read_json(Path(path), where), where)
        return cls(obj["name"], obj.get("default", "fp32"), dict(obj.get("overrides", {})))


FP32 = PrecisionPlan("fp32", "fp32")
FP16 = PrecisionPlan("fp16", "fp16")
INT8 = PrecisionPlan("int8", "int8")

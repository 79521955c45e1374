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

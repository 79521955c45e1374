"""Precision plan: per compute node (MatMul / Gemm / Conv) one of int8, fp16, fp32."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import onnx

from workbench.artifacts import write_json_atomic
from workbench.config import QUANTIZABLE_OPS
from workbench.errors import WorkbenchError

PRECISIONS = ("int8", "fp16", "fp32")
PLAN_NAME = re.compile(r"[A-Za-z0-9][\w.+-]{0,119}")


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
        shape = ('give a JSON object {"name": ..., "default": "int8", "overrides": {"<node>": "fp16"}}, '
                 "like the plan.<name>.json that python -m workbench search writes")
        try:
            obj = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise WorkbenchError(f"cannot read precision plan {path}: {exc.strerror or exc}; {shape}") from exc
        except ValueError as exc:
            raise WorkbenchError(f"precision plan {path} is not valid JSON ({exc}); {shape}") from exc
        if (not isinstance(obj, dict) or not isinstance(obj.get("name"), str)
                or not isinstance(obj.get("overrides", {}), dict)):
            raise WorkbenchError(f"precision plan {path} is not a plan; {shape}")
        if not PLAN_NAME.fullmatch(obj["name"]):
            raise WorkbenchError(f"precision plan {path}: name {obj['name']!r} must be letters, digits, '.', '_', "
                                 "'+' or '-' (it names the variant's file); rename it in the file")
        return cls.from_json(obj)


FP32 = PrecisionPlan("fp32", "fp32")
FP16 = PrecisionPlan("fp16", "fp16")
INT8 = PrecisionPlan("int8", "int8")

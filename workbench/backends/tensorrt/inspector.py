"""What the built engine really runs: per-layer precisions from TensorRT's engine inspector, checked against the plan.

A request for INT8 is not proof of INT8: a TensorRT build can fall back to FP16/FP32 kernels without an error
(a public report: an "INT8" speech engine with 0 of 105 layers in INT8). So the sign-off reads the engine's own
description and compares every planned compute node (MatMul/Gemm/Conv, precision read back from the ONNX
graph) with the layer that implements it.

Input: the JSON of ``IEngineInspector.get_engine_information(LayerInformationFormat.JSON)`` for an engine built
with ``ProfilingVerbosity.DETAILED`` (``builder.py`` sets it). Documented shape: an object with ``"Layers"`` (one
object per engine layer) and ``"Bindings"`` (TensorRT 10: I/O tensor names) or ``"I/O Tensors"`` (TensorRT 11).
A layer has ``"Name"`` (fused layers join their parts with `` + ``), ``"LayerType"``, ``"Inputs"`` and
``"Outputs"`` (each tensor: ``"Name"``, ``"Dimensions"``, ``"Format/Datatype"`` such as "Row major linear FP16
format", which TensorRT 11 splits into ``"Format"`` and ``"Datatype"``), and usually ``"Metadata"`` naming the
ONNX nodes it came from (``[ONNX Layer: name]``, several separated by control characters), ``"TacticName"``.
An engine built with less verbosity lists bare layer names, which carry no precision: refused with what to do.

Only parsing and comparison live here (no TensorRT import); ``engine_information`` is the one call into a
TensorRT runtime, and needs a GPU that runtime supports.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError

# data types named in "Format/Datatype" (TensorRT 10) or "Datatype" (TensorRT 11), in the workbench's names
_DTYPES = {
    "INT8": "int8",
    "FP16": "fp16",
    "HALF": "fp16",
    "FP32": "fp32",
    "FLOAT": "fp32",
    "BF16": "bf16",
    "FP8": "fp8",
    "INT4": "int4",
    "FP4": "fp4",
    "INT32": "int32",
    "INT64": "int64",
    "BOOL": "bool",
    "UINT8": "uint8",
}
_DTYPE_WORD = re.compile(r"\b(" + "|".join(sorted(_DTYPES, key=len, reverse=True)) + r")\b", re.IGNORECASE)
_ONNX_LAYER = re.compile(r"\[ONNX Layer: ([^\]]+)\]")
# order in which a layer's activation types decide its compute precision (an INT8 input means an INT8 kernel)
COMPUTE_ORDER: tuple[str, ...] = ("fp4", "int4", "fp8", "int8", "fp16", "bf16", "fp32")
REFORMAT_TYPES = ("Reformat", "Reformatting")
FIX = (
    "build the engine with detailed profiling verbosity (the workbench's build does) and pass "
    "IEngineInspector.get_engine_information(LayerInformationFormat.JSON)"
)


@dataclass(frozen=True)
class EngineLayer:
    """One layer of a built engine: its ONNX origin and the data types of its tensors."""

    name: str
    type: str
    onnx_nodes: tuple[str, ...]
    input_types: tuple[str, ...]
    output_types: tuple[str, ...]
    tactic: str | None = None

    @property
    def precision(self) -> str | None:
        """The compute precision: the narrowest activation type among its inputs (outputs when it has none)."""
        types = set(self.input_types) or set(self.output_types)
        return next((t for t in COMPUTE_ORDER if t in types), None)

    @property
    def is_reformat(self) -> bool:
        return self.type.startswith(REFORMAT_TYPES) or self.name.startswith(REFORMAT_TYPES)

    def names(self) -> set[str]:
        """ONNX node names this layer implements: its metadata's, else the parts of its (fused) name."""
        if self.onnx_nodes:
            return set(self.onnx_nodes)
        return {part.strip() for part in self.name.split(" + ") if part.strip()}


def dtype_of(tensor: Mapping[str, Any]) -> str | None:
    """A tensor entry's data type: from ``Datatype`` (TensorRT 11) or ``Format/Datatype`` (TensorRT 10)."""
    text = " ".join(str(tensor.get(k, "")) for k in ("Datatype", "Format/Datatype"))
    found = _DTYPE_WORD.search(text)
    return _DTYPES[found.group(1).upper()] if found else None


def parse_engine_information(
    text: str | Mapping[str, Any], source: str = "engine inspector JSON"
) -> list[EngineLayer]:
    """Engine layers from the inspector's JSON (string or parsed); a user error when it is not that format or
    was made with less than detailed verbosity."""
    try:
        data = json.loads(text) if isinstance(text, str) else text
    except ValueError as exc:
        raise WorkbenchError(f"{source} is not JSON ({exc}); {FIX}") from exc
    layers = data.get("Layers") if isinstance(data, Mapping) else None
    if not isinstance(layers, list):
        raise WorkbenchError(f'{source} has no "Layers" list; {FIX}')
    out = []
    for number, layer in enumerate(layers):
        if not isinstance(layer, Mapping):
            raise WorkbenchError(
                f"{source}: layer {number} is a bare name ({str(layer)[:60]!r}), so the engine was "
                f"built without detailed profiling verbosity and carries no precisions; {FIX}"
            )
        inputs = [t for t in layer.get("Inputs") or [] if isinstance(t, Mapping)]
        outputs = [t for t in layer.get("Outputs") or [] if isinstance(t, Mapping)]
        metadata = str(layer.get("Metadata") or "")
        out.append(
            EngineLayer(
                name=str(layer.get("Name", f"layer {number}")),
                type=str(layer.get("LayerType", "")),
                onnx_nodes=tuple(m.strip() for m in _ONNX_LAYER.findall(metadata)),
                input_types=tuple(t for t in (dtype_of(x) for x in inputs) if t),
                output_types=tuple(t for t in (dtype_of(x) for x in outputs) if t),
                tactic=str(layer["TacticName"]) if layer.get("TacticName") is not None else None,
            )
        )
    return out


@dataclass(frozen=True)
class Mismatch:
    """A planned node whose engine layer runs in another precision."""

    node: str
    planned: str
    realized: str | None
    layer: str


@dataclass
class EnginePrecisionCheck:
    """The plan against the engine: nodes checked, the ones that fell back or changed, the ones not found."""

    checked: int
    int8_fallback: list[Mismatch] = field(default_factory=list)  # planned INT8, runs in another precision
    fp16_mismatch: list[Mismatch] = field(default_factory=list)  # planned FP16, runs in another precision
    fp32_mismatch: list[Mismatch] = field(default_factory=list)  # planned FP32, runs reduced
    not_found: list[str] = field(default_factory=list)  # no engine layer names the node: cannot be verified

    @property
    def passed(self) -> bool:
        return not (self.int8_fallback or self.fp16_mismatch or self.fp32_mismatch or self.not_found)

    def summary(self) -> str:
        if self.passed:
            return f"engine precisions match the plan on all {self.checked} compute nodes"
        parts = []
        for label, items in (
            ("planned INT8 but not INT8", self.int8_fallback),
            ("planned FP16 but not FP16", self.fp16_mismatch),
            ("planned FP32 but reduced", self.fp32_mismatch),
        ):
            if items:
                shown = ", ".join(f"{m.node} ({m.realized or 'unknown'} in {m.layer})" for m in items[:8])
                parts.append(f"{len(items)} {label}: {shown}" + (" ..." if len(items) > 8 else ""))
        if self.not_found:
            parts.append(
                f"{len(self.not_found)} not named by any engine layer (unverified): "
                + ", ".join(self.not_found[:8])
                + (" ..." if len(self.not_found) > 8 else "")
            )
        return f"engine precisions differ from the plan on {self.checked} compute nodes: " + "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "checked": self.checked,
            "summary": self.summary(),
            "int8_fallback": [asdict(m) for m in self.int8_fallback],
            "fp16_mismatch": [asdict(m) for m in self.fp16_mismatch],
            "fp32_mismatch": [asdict(m) for m in self.fp32_mismatch],
            "not_found": list(self.not_found),
        }


def check_plan(layers: list[EngineLayer], plan: Mapping[str, str]) -> EnginePrecisionCheck:
    """Compare ``plan`` (compute node -> int8/fp16/fp32, e.g. read back from the candidate's ONNX graph) with
    the engine's layers. A node implemented by a layer that fuses several planned nodes is judged on whether
    its planned type is among that layer's tensor types; a node with a layer of its own, on that layer's
    compute precision."""
    compute = [l for l in layers if not l.is_reformat]
    result = EnginePrecisionCheck(checked=len(plan))
    for node, planned in plan.items():
        layer = next((l for l in compute if node in l.names()), None)
        if layer is None:
            result.not_found.append(node)
            continue
        planned_here = [n for n in layer.names() if n in plan]
        if len(planned_here) > 1:
            types = set(layer.input_types) | set(layer.output_types)
            realized = planned if planned in types else layer.precision
        else:
            realized = layer.precision
        if realized == planned:
            continue
        mismatch = Mismatch(node, planned, realized, layer.name)
        {"int8": result.int8_fallback, "fp16": result.fp16_mismatch}.get(
            planned, result.fp32_mismatch
        ).append(mismatch)
    return result


def engine_information(engine_path: Path, trt: Any = None) -> str:
    """The inspector's JSON for an engine file (needs a TensorRT runtime that can load it: a supported GPU)."""
    from workbench.backends.tensorrt.loader import load_tensorrt

    trt = trt or load_tensorrt()
    t = trt.module
    runtime = t.Runtime(t.Logger(t.Logger.ERROR))
    engine = runtime.deserialize_cuda_engine(Path(engine_path).read_bytes())
    if engine is None:
        raise WorkbenchError(
            f"{trt.flavour} {trt.version} could not load {engine_path} to inspect it (built by "
            "another version, or no GPU this runtime supports); inspect it where it runs"
        )
    inspector = engine.create_engine_inspector()
    return str(inspector.get_engine_information(t.LayerInformationFormat.JSON))

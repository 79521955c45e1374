"""The candidates a sign-off judges for a deployment target: the files that target would really run.

``tensorrt`` and ``ort-cuda``: the candidates as given (the TensorRT-bound Q/DQ graphs, FP16 between the
INT8 islands).

``ort-cpu`` (``CPU_TARGET``): what a CPU deployment with ONNX Runtime ships, so that WER and latency are
measured on the files that would be deployed:

- the baseline (the first candidate, FP32) as given;
- for every candidate with INT8 (Q/DQ), its ONNX Runtime CPU flavour (``workbench.quantize.ort_cpu``): the
  same plan and the same scales (``amax``, the calibration cache the candidate was built with), built from the
  same recovered source when that cache was made with accuracy recovery (``recovered``: the smoothed graph the
  ranges belong to, bias correction for the plan's INT8 nodes), FP32
  between the islands and in the groups the plan keeps in FP16 (the CPU has no fast FP16 arithmetic),
  laid out so ORT's CPU kernels fuse it, with int8 or uint8 weights as this CPU computes them exactly
  (``workbench.backends.cpu_int8``). It is named ``<name>-cpu`` and written beside the candidate
  (``<stem>.ort-cpu-<u8|s8>-<candidate hash 12>.onnx``; one made alike is reused). The plan is read from the candidate's ``.plan.json`` (written with
  every variant the workbench builds); a Q/DQ candidate without one is flavoured as it is, when it has
  no FP16 in it;
- ONNX Runtime's dynamic INT8 quantization of the baseline (``workbench.quantize.dynamic``), the usual
  CPU baseline, named ``int8-dynamic``;
- candidates already in ORT's integer form, or float without FP16, as given; FP16 candidates are left
  out, with the reason.

Every file made here carries what it was made from and how (``workbench.quantize.metadata``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError

from workbench.artifacts import sha256_bytes, sha256_file, write_bytes_atomic
from workbench.backends.cpu_int8 import int8_weight_type
from workbench.config import ORT_CPU_WEIGHTS
from workbench.errors import WorkbenchError
from workbench.quantize.dynamic import OP_TYPES, build_dynamic, quantizable_count
from workbench.quantize.dynamic import settings as dynamic_settings
from workbench.quantize.metadata import made_of, provenance, set_metadata
from workbench.quantize.ort_cpu import build_cpu_variant, cpu_flavour
from workbench.quantize.plan import PrecisionPlan
from workbench.quantize.qdq import plan_path
from workbench.quantize.recovered import RANGE_TECHNIQUES, RecoveredSource

CPU_TARGET = "ort-cpu"
DYNAMIC_NAME = "int8-dynamic"
CPU_SUFFIX = "-cpu"
QDQ_OPS = frozenset({"QuantizeLinear", "DequantizeLinear"})
INTEGER_OPS = frozenset(
    {
        "MatMulInteger",
        "ConvInteger",
        "DynamicQuantizeLinear",
        "DynamicQuantizeMatMul",
        "MatMulIntegerToFloat",
        "QLinearMatMul",
        "QLinearConv",
    }
)
FP16_LEFT_OUT = (
    "computes in FP16: ONNX Runtime's CPU execution provider has no fast FP16 kernels, so a CPU deployment "
    "ships FP32 or INT8"
)


@dataclass(frozen=True)
class TargetCandidate:
    """One file the target runs: its name, path, the candidate it was made from (None: judged as given) and
    how, in words."""

    name: str
    path: Path
    made_from: str | None
    how: str

    def to_json(self) -> dict:
        return {"name": self.name, "path": str(self.path), "made_from": self.made_from, "how": self.how}


@dataclass(frozen=True)
class TargetCandidates:
    """The candidates of a sign-off for ``target`` (the baseline first) and those left out, with why."""

    target: str
    candidates: list[TargetCandidate]
    left_out: dict[str, str] = field(default_factory=dict)

    def pairs(self) -> list[tuple[str, Path]]:
        return [(c.name, c.path) for c in self.candidates]

    def notes(self) -> list[str]:
        made = [f"{c.name}: {c.how}" for c in self.candidates if c.made_from is not None]
        return made + [f"{name} left out for {self.target}: {why}" for name, why in self.left_out.items()]

    def to_json(self) -> dict:
        return {
            "target": self.target,
            "candidates": [c.to_json() for c in self.candidates],
            "left_out": dict(self.left_out),
        }


def has_fp16(model: onnx.ModelProto) -> bool:
    """Float16 initializers or casts to float16 anywhere in the graph."""
    half = onnx.TensorProto.FLOAT16
    return any(i.data_type == half for i in model.graph.initializer) or any(
        n.op_type == "Cast" and any(a.name == "to" and a.i == half for a in n.attribute)
        for n in model.graph.node
    )


def kind_of(model: onnx.ModelProto) -> str:
    """``qdq`` (QuantizeLinear/DequantizeLinear pairs), ``integer`` (ORT's integer ops), ``fp16`` (float16
    tensors or casts to it) or ``float``."""
    ops = {n.op_type for n in model.graph.node}
    if ops & QDQ_OPS:
        return "qdq"
    if ops & INTEGER_OPS:
        return "integer"
    return "fp16" if has_fp16(model) else "float"


def cpu_plan(plan: PrecisionPlan) -> PrecisionPlan:
    """``plan`` as a CPU runs it: INT8 where it says INT8, FP32 everywhere else (FP16 becomes FP32)."""
    return replace(
        plan,
        default="fp32" if plan.default == "fp16" else plan.default,
        overrides={n: "fp32" if p == "fp16" else p for n, p in plan.overrides.items()},
        rest="fp32",
    )


def ranges_digest(amax: dict[str, float]) -> str:
    """SHA-256 of the activation ranges (what a CPU flavour's scales come from)."""
    return sha256_bytes(json.dumps(sorted(amax.items())).encode())


def _reusable(out: Path, made_from: str, how: dict) -> bool:
    """``out`` exists and says it was made from ``made_from`` exactly as ``how`` says (nothing to rebuild)."""
    if not out.is_file():
        return False
    try:
        return made_of(out) == (made_from, json.loads(json.dumps(how)))
    except (OSError, ValueError, DecodeError):  # unreadable or not ONNX: made again
        return False


def recovery_techniques(plan_file: Path) -> list[str]:
    """The accuracy-recovery techniques a variant's plan file says its graph was built with ([] when none)."""
    try:
        data = json.loads(Path(plan_file).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    recovery = data.get("recovery") if isinstance(data, dict) else None
    if not isinstance(recovery, dict):
        return []
    return [str(t) for t in recovery.get("techniques", []) if t not in RANGE_TECHNIQUES]


def carried_recovery(
    plan_file: Path, recovered: RecoveredSource | None
) -> tuple[RecoveredSource | None, str]:
    """What of the candidate's accuracy recovery (its plan file's techniques) its CPU flavour carries: the recovered
    source to build it from (None: the baseline) and the words for the sign-off record. The source is carried when
    the calibration's techniques are the candidate's; otherwise the words say which it does not carry and why."""
    techniques = recovery_techniques(plan_file)
    if not techniques:
        return None, ""
    listed = ", ".join(techniques)
    own = [t for t in recovered.techniques if t not in RANGE_TECHNIQUES] if recovered is not None else []
    if own == techniques:
        return (
            recovered,
            f"; with the candidate's accuracy recovery ({listed}), built from its recovered source",
        )
    made_with = f"made with {', '.join(own)}" if own else "made without accuracy recovery"
    return None, (
        f"; built from the FP32 baseline, without the candidate's accuracy recovery ({listed}) but its ranges: "
        f"the calibration cache given was {made_with}"
    )


def recovery_key(recovered: RecoveredSource) -> dict:
    """What a CPU flavour's provenance says of the recovered source it was built from: the options, the techniques,
    whether the graph is smoothed, the hashes of the cache's recovery files."""
    return {**recovered.provenance(), "files": recovered.record.get("files", {})}


def cpu_flavour_of(
    name: str,
    path: Path,
    baseline: Path,
    amax: dict[str, float] | None,
    weights: tuple[str, str],
    recovered: RecoveredSource | None = None,
) -> TargetCandidate:
    """The ONNX Runtime CPU flavour of the Q/DQ candidate ``name`` at ``path`` (see the module docstring),
    written beside it as ``<stem>.ort-cpu-<weights>-<source hash 12>.onnx``; a file there made alike is reused.
    ``recovered``: the recovered source of the calibration ``amax`` comes from (``carried_recovery``)."""
    path = Path(path)
    source_hash = sha256_file(path)
    out = path.with_name(f"{path.stem}.ort-cpu-{weights[0]}-{source_hash[:12]}.onnx")
    weight_words = f"{'uint8' if weights[0] == 'u8' else 'int8'} weights ({weights[1]})"
    how: dict = {"tool": "workbench.quantize.ort_cpu", "weights": weights[0], "weights_reason": weights[1]}
    if plan_path(path).is_file():
        if amax is None:
            raise WorkbenchError(missing_ranges_message(name))
        plan = cpu_plan(PrecisionPlan.load(plan_path(path)))
        carried, recovery_words = carried_recovery(plan_path(path), recovered)
        how.update(plan=plan.to_json(), baseline=sha256_file(baseline), ranges=ranges_digest(amax))
        if carried is not None:
            how["recovery"] = recovery_key(carried)
        if not _reusable(out, source_hash, how):
            build_cpu_variant(
                baseline,
                amax,
                plan,
                out,
                weights=weights[0],
                reason=weights[1],
                metadata=provenance(source_hash, how),
                recovered=carried,
            )
        words = f"ONNX Runtime CPU flavour of {name} (its plan, FP32 outside INT8), {weight_words}{recovery_words}"
    else:
        how["plan"] = "as in the Q/DQ graph"
        if not _reusable(out, source_hash, how):
            model = onnx.load(str(path))
            if has_fp16(model):
                raise WorkbenchError(
                    f"candidate {name} ({path}) mixes INT8 with FP16 and has no plan file beside it "
                    f"({plan_path(path).name}); --target {CPU_TARGET} needs FP32 between the INT8 islands: "
                    "give the variant the workbench built (its plan is written beside it) or an FP32-rest "
                    "Q/DQ file"
                )
            flavoured, _ = cpu_flavour(model, weights[0], weights[1])
            set_metadata(flavoured, provenance(source_hash, how))
            write_bytes_atomic(out, flavoured.SerializeToString())
        words = f"ONNX Runtime CPU flavour of {name} (its Q/DQ graph as given), {weight_words}"
    return TargetCandidate(f"{name}{CPU_SUFFIX}", out, name, words)


def dynamic_of(baseline_name: str, baseline: Path, weights: tuple[str, str]) -> TargetCandidate | None:
    """ONNX Runtime's dynamic INT8 quantization of the baseline (None when it has no MatMul to quantize),
    written beside it as ``<stem>.dynamic-int8-<weights>-<baseline hash 12>.onnx``; one made alike is reused."""
    baseline = Path(baseline)
    count = quantizable_count(onnx.load(str(baseline), load_external_data=False))
    if count == 0:
        return None
    base_hash = sha256_file(baseline)
    out = baseline.with_name(f"{baseline.stem}.dynamic-int8-{weights[0]}-{base_hash[:12]}.onnx")
    if not _reusable(out, base_hash, dynamic_settings(weights[0], weights[1], count)):
        build_dynamic(baseline, out, weights[0], weights[1])
    return TargetCandidate(
        DYNAMIC_NAME,
        out,
        baseline_name,
        f"ONNX Runtime dynamic INT8 quantization of {baseline_name} (quantize_dynamic, "
        f"{'/'.join(OP_TYPES)} weights {'uint8' if weights[0] == 'u8' else 'int8'}, activations "
        "quantized at run time)",
    )


def missing_ranges_message(name: str) -> str:
    return (
        f"--target {CPU_TARGET} builds the CPU flavour of candidate {name} from its plan and the calibration "
        "cache it was built with: give that cache as --cache (or --as-given to judge the files as they are)"
    )


def check_target_inputs(
    target: str, candidates: list[tuple[str, Path]], has_ranges: bool, as_given: bool = False
) -> None:
    """The check that needs no model work: for ``ort-cpu``, a candidate with a plan file needs the ranges
    (the cache) its CPU flavour is built from."""
    if as_given or target != CPU_TARGET or has_ranges:
        return
    for name, path in candidates[1:]:
        if plan_path(Path(path)).is_file():
            raise WorkbenchError(missing_ranges_message(name))


def candidates_for_target(
    target: str,
    candidates: list[tuple[str, Path]],
    amax: dict[str, float] | None = None,
    weights: str = ORT_CPU_WEIGHTS,
    as_given: bool = False,
    recovered: RecoveredSource | None = None,
) -> TargetCandidates:
    """The candidates ``target`` runs, made from ``candidates`` (the baseline first; see the module docstring).
    ``amax``: the activation ranges the Q/DQ candidates were built with (needed for ``ort-cpu`` when a
    candidate has a plan file); ``weights``: auto, u8 or s8 (``workbench.backends.cpu_int8``); ``as_given``:
    the candidates as they are, whatever the target; ``recovered``: the recovered source of the calibration
    ``amax`` comes from (None: made without accuracy recovery), which the CPU flavours of its candidates carry."""
    if as_given or target != CPU_TARGET:
        return TargetCandidates(
            target, [TargetCandidate(n, Path(p), None, "as given") for n, p in candidates]
        )
    chosen = int8_weight_type(weights)
    (base_name, base_path), rest = candidates[0], candidates[1:]
    out = [TargetCandidate(base_name, Path(base_path), None, "baseline, as given")]
    left_out: dict[str, str] = {}
    for name, path in rest:
        kind = kind_of(onnx.load(str(path), load_external_data=False))
        if kind == "qdq":
            out.append(cpu_flavour_of(name, Path(path), Path(base_path), amax, chosen, recovered))
        elif kind == "fp16":
            left_out[name] = FP16_LEFT_OUT
        else:
            out.append(TargetCandidate(name, Path(path), None, f"as given ({kind})"))
    dynamic = dynamic_of(base_name, Path(base_path), chosen)
    if dynamic is not None and dynamic.name not in {c.name for c in out}:
        out.append(dynamic)
    return TargetCandidates(target, out, left_out)

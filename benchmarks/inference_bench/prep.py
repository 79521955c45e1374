"""Clips and precision variants for the inference benchmark: export, calibration (entropy) and every variant."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from workbench.artifacts import sha256_bytes, sha256_file
from workbench.config import DEMO_MODEL_RESOURCE
from workbench.errors import WorkbenchError
from workbench.resources import demo_model_dir

if TYPE_CHECKING:
    from workbench.quantize.plan import PrecisionPlan

CPU_VARIANTS = ("fp32", "fp16", "int8", "int8-cpu", "mixed", "mixed-cpu")
# Not in the default grid, named with --variants: the CPU flavour with its weight type forced (``int8-cpu`` takes
# what this CPU computes exactly, workbench.backends.cpu_int8). ``int8-cpu-s8`` runs in ORT's default session
# (no int8 -> uint8 at load), so it times the U8S8 kernels as they are: on an x86 CPU without VNNI they saturate
# and its outputs are wrong (the accuracy check shows by how much); it is there to measure what uint8 costs.
WEIGHT_VARIANTS = ("int8-cpu-u8", "int8-cpu-s8")
CUDA_VARIANTS = ("fp32", "fp16", "fp16-unguarded", "fp16-casts", "fp16-ort", "int8", "mixed")
# The fixed mixed plan: Wav2Vec2 INT8 is known to break in the first convolutions of the feature encoder
# (a public OpenVINO run recovered after keeping conv layers 1-3 in float, docs/design.md); keep those three
# in float (FP32 on a CPU, the fast float there; FP16 on a GPU), everything else INT8.
FIXED_MIXED_FLOAT = re.compile(r"/feature_extractor/conv_layers\.[012]/")


def fixed_mixed_plan(model, float_precision: str = "fp32") -> PrecisionPlan:
    """INT8 everywhere except the first three feature-encoder convolutions (``float_precision``)."""
    from workbench.quantize.plan import PrecisionPlan, quantizable_nodes

    keep = [n for n in quantizable_nodes(model) if FIXED_MIXED_FLOAT.search(n)]
    return PrecisionPlan(
        f"mixed-fixed (feature_extractor.conv_layers.0-2 {float_precision}, rest int8)",
        "int8",
        {n: float_precision for n in keep},
    )


def clip_source(set_name: str | None, count: int, seed: int = 0) -> tuple[list[np.ndarray], dict]:
    """``count`` clips of a stored speech set when it exists, else speech-like synthetic clips."""
    from workbench.workspace import resolve_workspace

    # (the GPU machine has no soundfile, and no sets)
    if set_name and (resolve_workspace().calib_sets / set_name).exists():
        from workbench.speech.store import load_set

        speech_set = load_set(set_name)
        utts = speech_set.utterances[:count]
        return [speech_set.audio(u) for u in utts], {
            "kind": "speech set",
            "name": speech_set.name,
            "content_hash": speech_set.content_hash,
            "clips": len(utts),
        }
    from calibration import speech_like_clips  # benchmarks/calibration.py: harmonics + noise, 5 s each

    clips = speech_like_clips(count, seed)
    return list(clips), {
        "kind": "speech-like synthetic (benchmarks/calibration.py)",
        "seed": seed,
        "clips": count,
        "content_hash": sha256_bytes(clips.tobytes()),
    }


@dataclass
class Variant:
    model: str
    name: str
    path: str
    plan: dict | None = None
    rewrites: dict | None = None
    sha256: str = ""
    exact_int8: bool = True  # OnnxRuntimeRunner's exact_int8 (False: ORT's default integer kernels)


def _export(model_name: str, out: Path) -> tuple[Path, dict]:
    from workbench.model.export import export_onnx

    if model_name == "demo":
        from workbench.model.folders import model_hash
        from workbench.model.loading import load_model

        export_onnx(load_model(demo_model_dir()), out)
        return out, {"source": f"workbench/{DEMO_MODEL_RESOURCE}", "model_hash": model_hash(demo_model_dir())}
    from workbench.model.synthetic import SIZES, random_wav2vec2

    export_onnx(random_wav2vec2(model_name, seed=0), out)
    return out, {"source": f"random Wav2Vec2ForCTC, size {model_name}, seed 0", "dims": SIZES[model_name]}


def prepare_model(
    model_name: str,
    variants: list[str],
    work: Path,
    calib: list[np.ndarray],
    mixed_plan: Path | None,
    log=print,
    float_precision: str = "fp32",
) -> tuple[list[Variant], dict]:
    """Export FP32, calibrate when an INT8 variant is asked for, collect float statistics for the FP16 guard when
    an FP16-carrying variant is, write every variant; returns them + info."""
    from dataclasses import replace

    import onnx

    from workbench.artifacts import write_bytes_atomic
    from workbench.backends.cpu_int8 import int8_weight_type
    from workbench.calibration.methods import MethodSpec
    from workbench.calibration.runner import calibrate_ranges
    from workbench.quantize.float_stats import collect_float_stats
    from workbench.quantize.guard import fp32_islands
    from workbench.quantize.ort_cpu import cpu_flavour
    from workbench.quantize.plan import FP16, INT8, PrecisionPlan
    from workbench.quantize.qdq import build_variant

    folder = work / model_name
    folder.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    fp32, info = _export(model_name, folder / "fp32.onnx")
    info["export_s"] = round(time.perf_counter() - start, 1)
    out: list[Variant] = []
    amax = None
    if any(v.startswith(("int8", "mixed")) for v in variants):
        start = time.perf_counter()
        amax = calibrate_ranges(fp32, iter(calib), len(calib), MethodSpec("entropy"))
        info["calibration"] = {
            "method": "entropy",
            "clips": len(calib),
            "tensors": len(amax),
            "seconds": round(time.perf_counter() - start, 1),
        }
    guard: dict[str, str] = {}
    if any(v in ("fp16", "int8", "mixed") for v in variants):
        start = time.perf_counter()
        stats = collect_float_stats(fp32, iter(calib), len(calib), progress=False)
        guard = fp32_islands(onnx.load(str(fp32)), stats)
        info["fp16_guard"] = {
            "clips": len(calib),
            "seconds": round(time.perf_counter() - start, 1),
            "fp32_nodes": guard,
        }
    plans: dict[str, PrecisionPlan] = {"int8": INT8.with_guard(guard), "fp16": FP16.with_guard(guard)}
    if any(v.startswith("mixed") for v in variants):
        plans["mixed"] = (
            PrecisionPlan.load(mixed_plan)
            if mixed_plan
            else fixed_mixed_plan(onnx.load(str(fp32), load_external_data=False), float_precision)
        ).with_guard(guard)
    for name in variants:
        path = folder / f"{name}.onnx"
        variant = Variant(model_name, name, str(path))
        if name == "fp32":
            path = fp32
            variant.path = str(fp32)
        elif name == "fp16":
            build_variant(fp32, {}, plans["fp16"], path)
            variant.plan = plans["fp16"].to_json()
        elif name == "fp16-unguarded":
            build_variant(fp32, {}, FP16, path)
            variant.plan = FP16.to_json()
        elif name == "fp16-casts":
            casts = PrecisionPlan("fp16-casts", "fp16", rest="fp32")
            build_variant(fp32, {}, casts, path)
            variant.plan = casts.to_json()
        elif name == "fp16-ort":
            from onnxruntime.transformers.float16 import convert_float_to_float16

            half = convert_float_to_float16(onnx.load(str(fp32)), keep_io_types=True)
            write_bytes_atomic(path, half.SerializeToString())
            variant.plan = {"name": "onnxruntime float16 converter, keep_io_types=True"}
        elif name in ("int8", "mixed"):
            build_variant(fp32, amax, plans[name], path)
            variant.plan = plans[name].to_json()
        elif name in ("int8-cpu", "mixed-cpu") + WEIGHT_VARIANTS:
            base, _, forced = name.partition("-cpu")
            plan = replace(plans[base], rest="fp32")  # CPU: FP32 between the islands
            fp32_rest = folder / f"{base}.fp32-rest.onnx"
            if not fp32_rest.exists():
                build_variant(fp32, amax, plan, fp32_rest)
            weights, why = int8_weight_type(forced.lstrip("-") or "auto")
            flavoured, stats = cpu_flavour(onnx.load(str(fp32_rest)), weights, why)
            write_bytes_atomic(path, flavoured.SerializeToString())
            variant.plan, variant.rewrites = plan.to_json(), {**stats, "weights_reason": why}
            variant.exact_int8 = name != "int8-cpu-s8"
        else:
            raise WorkbenchError(
                f"unknown variant {name!r}; choose from {CPU_VARIANTS + WEIGHT_VARIANTS + CUDA_VARIANTS}"
            )
        variant.sha256 = sha256_file(path)
        out.append(variant)
        log(f"  {model_name}/{name}: {path.stat().st_size / 2**20:.1f} MB")
    return out, info

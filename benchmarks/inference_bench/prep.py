"""Clips and precision variants for the inference benchmark: export, calibration (entropy) and every variant."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workbench.artifacts import sha256_bytes, sha256_file
from workbench.config import DEMO_MODEL_RESOURCE
from workbench.errors import WorkbenchError
from workbench.resources import demo_model_dir

CPU_VARIANTS = ("fp32", "fp16", "int8", "int8-cpu", "mixed", "mixed-cpu")
# Not in the default grid, named with --variants: the CPU flavour with its weight type forced (``int8-cpu`` takes
# what this CPU computes exactly, workbench.backends.cpu_int8). ``int8-cpu-s8`` runs in ORT's default session
# (no int8 -> uint8 at load), so it times the U8S8 kernels as they are: on an x86 CPU without VNNI they saturate
# and its outputs are wrong (the accuracy check shows by how much); it is there to measure what uint8 costs.
WEIGHT_VARIANTS = ("int8-cpu-u8", "int8-cpu-s8")
CUDA_VARIANTS = ("fp32", "fp16", "fp16-ort")
# The fixed mixed plan: Wav2Vec2 INT8 is known to break in the first convolutions of the feature encoder
# (a public OpenVINO run recovered after keeping conv layers 1-3 in float, docs/design.md); keep those three
# in FP32 (the fast float on a CPU), everything else INT8.
FIXED_MIXED_FLOAT = re.compile(r"/feature_extractor/conv_layers\.[012]/")


def fixed_mixed_plan(model) -> "PrecisionPlan":
    """INT8 everywhere except the first three feature-encoder convolutions (FP32)."""
    from workbench.quantize.plan import PrecisionPlan, quantizable_nodes

    keep = [n for n in quantizable_nodes(model) if FIXED_MIXED_FLOAT.search(n)]
    return PrecisionPlan("mixed-fixed (feature_extractor.conv_layers.0-2 fp32, rest int8)", "int8",
                         {n: "fp32" for n in keep})


def clip_source(set_name: str | None, count: int, seed: int = 0) -> tuple[list[np.ndarray], dict]:
    """``count`` clips of a stored speech set when it exists, else speech-like synthetic clips."""
    from workbench.workspace import resolve_workspace

    # (the GPU machine has no soundfile, and no sets)
    if set_name and (resolve_workspace().calib_sets / set_name).exists():
        from workbench.speech.store import load_set

        speech_set = load_set(set_name)
        utts = speech_set.utterances[:count]
        return [speech_set.audio(u) for u in utts], {"kind": "speech set", "name": speech_set.name,
                                                      "content_hash": speech_set.content_hash, "clips": len(utts)}
    from calibration import speech_like_clips  # benchmarks/calibration.py: harmonics + noise, 5 s each

    clips = speech_like_clips(count, seed)
    return list(clips), {"kind": "speech-like synthetic (benchmarks/calibration.py)", "seed": seed,
                         "clips": count, "content_hash": sha256_bytes(clips.tobytes())}


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
        from workbench.model.loading import load_model, model_hash

        export_onnx(load_model(demo_model_dir()), out)
        return out, {"source": f"workbench/{DEMO_MODEL_RESOURCE}", "model_hash": model_hash(demo_model_dir())}
    from workbench.model.synthetic import SIZES, random_wav2vec2

    export_onnx(random_wav2vec2(model_name, seed=0), out)
    return out, {"source": f"random Wav2Vec2ForCTC, size {model_name}, seed 0", "dims": SIZES[model_name]}


def prepare_model(model_name: str, variants: list[str], work: Path, calib: list[np.ndarray],
                  mixed_plan: Path | None, log=print) -> tuple[list[Variant], dict]:
    """Export FP32, calibrate when an INT8 variant is asked for, write every variant; returns them + info."""
    import onnx

    from workbench.backends.cpu_int8 import int8_weight_type
    from workbench.calibration.methods import MethodSpec
    from workbench.calibration.runner import calibrate_ranges
    from workbench.quantize.ort_cpu import cpu_flavour
    from workbench.quantize.plan import FP16, INT8, PrecisionPlan
    from workbench.quantize.qdq import build_variant
    from workbench.artifacts import write_bytes_atomic

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
        info["calibration"] = {"method": "entropy", "clips": len(calib), "tensors": len(amax),
                               "seconds": round(time.perf_counter() - start, 1)}
    plans: dict[str, PrecisionPlan] = {"int8": INT8}
    if any(v.startswith("mixed") for v in variants):
        plans["mixed"] = PrecisionPlan.load(mixed_plan) if mixed_plan else \
            fixed_mixed_plan(onnx.load(str(fp32), load_external_data=False))
    for name in variants:
        path = folder / f"{name}.onnx"
        variant = Variant(model_name, name, str(path))
        if name == "fp32":
            path = fp32
            variant.path = str(fp32)
        elif name == "fp16":
            build_variant(fp32, {}, FP16, path)
            variant.plan = FP16.to_json()
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
            trt = folder / f"{base}.onnx"
            if not trt.exists():
                build_variant(fp32, amax, plans[base], trt)
            weights, why = int8_weight_type(forced.lstrip("-") or "auto")
            flavoured, stats = cpu_flavour(onnx.load(str(trt)), weights, why)
            write_bytes_atomic(path, flavoured.SerializeToString())
            variant.plan, variant.rewrites = plans[base].to_json(), {**stats, "weights_reason": why}
            variant.exact_int8 = name != "int8-cpu-s8"
        else:
            raise WorkbenchError(f"unknown variant {name!r}; choose from "
                                 f"{CPU_VARIANTS + WEIGHT_VARIANTS + CUDA_VARIANTS}")
        variant.sha256 = sha256_file(path)
        out.append(variant)
        log(f"  {model_name}/{name}: {path.stat().st_size / 2**20:.1f} MB")
    return out, info

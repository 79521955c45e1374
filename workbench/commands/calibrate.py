"""``python -m workbench calibrate``: export, calibrate with a method, cache, INT8 Q/DQ variant."""

from __future__ import annotations

import argparse

from workbench.calibration.methods import METHODS
from pathlib import Path

from workbench.config import DEMO_MODEL_DIR, ENGINES_DIR


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default=str(DEMO_MODEL_DIR), help="HF Wav2Vec2ForCTC folder or hub id")
    parser.add_argument("--set", default="demo-calib", help="calibration set name under calib_sets/ or a path")
    parser.add_argument("--method", default="entropy", choices=METHODS)
    parser.add_argument("--percentile", type=float, default=99.99)
    parser.add_argument("--bins", type=int, default=2048, help="histogram bins (TensorRT uses 2048)")
    parser.add_argument("--engines", type=Path, default=ENGINES_DIR, help="artifact root (default: engines/)")
    parser.add_argument("--ort-cpu", action="store_true",
                        help="also write the INT8 variant's ONNX Runtime CPU flavour (same arithmetic, fused by "
                             "ORT's CPU kernels; the TensorRT-bound graph is unchanged)")


def run(args: argparse.Namespace) -> int:
    from workbench.calibrate_pipeline import run_calibrate
    from workbench.calibration.methods import MethodSpec

    result = run_calibrate(args.model, args.set, MethodSpec(args.method, args.percentile, args.bins),
                           root=args.engines, ort_cpu=args.ort_cpu)
    p = result.parity
    print(f"FP32 ONNX:    {result.fp32_onnx}")
    print(f"  parity vs PyTorch on {p.clips} clips: max |logit diff| {p.max_abs_logit_diff:.2e}, "
          f"token agreement {p.token_agreement:.4f}, identical transcripts {p.transcripts_equal}/{p.clips}")
    state = "reused (all provenance keys match)" if result.reused_cache else "computed"
    print(f"cache:        {result.cache} ({result.tensors} tensors, {state})")
    if result.cache_problems and result.cache_problems != ["no cache yet"]:
        print("  previous cache not used: " + "; ".join(result.cache_problems))
    print(f"INT8 variant: {result.int8_onnx}")
    if result.int8_ort_cpu:
        print(f"  ONNX Runtime CPU flavour: {result.int8_ort_cpu}")
    return 0

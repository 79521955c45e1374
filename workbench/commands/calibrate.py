"""``python -m workbench calibrate``: export, calibrate with a method, cache, INT8 Q/DQ variant (the calibrate job)."""

from __future__ import annotations

import argparse
from pathlib import Path

from workbench.calibration.methods import METHODS
from workbench.commands.options import (
    add_backend_argument,
    add_model_and_calib_set,
    add_ray_argument,
    add_recovery_arguments,
    model_or_demo,
    print_lines,
    recovery_or_default,
)
from workbench.config import DEFAULT_METHOD, DEFAULT_PERCENTILE, ORT_CPU_WEIGHT_TYPES, ORT_CPU_WEIGHTS
from workbench.values import chunk_seconds, number_in, stride_seconds, whole_number
from workbench.workspace import area_default


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_and_calib_set(parser)
    parser.add_argument("--root", type=Path, default=area_default("calib_sets"), help=argparse.SUPPRESS)
    parser.add_argument("--method", default=DEFAULT_METHOD, choices=METHODS)
    parser.add_argument(
        "--percentile",
        type=number_in(50.0, 100.0, low_open=True),
        default=DEFAULT_PERCENTILE,
        help="percentile method's cut",
    )
    parser.add_argument(
        "--bins", type=whole_number(128), default=2048, help="histogram bins (TensorRT uses 2048)"
    )
    parser.add_argument(
        "--engines",
        type=Path,
        default=area_default("engines"),
        help="artifact root (default: engines/ of the workspace)",
    )
    parser.add_argument(
        "--ort-cpu",
        action="store_true",
        help="also write the INT8 variant's ONNX Runtime CPU flavour (same arithmetic, fused by "
        "ORT's CPU kernels; the TensorRT-bound graph is unchanged)",
    )
    parser.add_argument(
        "--ort-cpu-weights",
        choices=ORT_CPU_WEIGHT_TYPES,
        default=None,
        help=f"weights of the CPU flavour (default {ORT_CPU_WEIGHTS}): auto = int8 where ORT's "
        "U8S8 kernels are exact on this CPU (x86 with VNNI, or not x86), else uint8 (U8U8, "
        "exact on every CPU); u8 / s8 for a file that runs on another machine",
    )
    add_recovery_arguments(parser)
    add_backend_argument(parser, "the statistics pass")
    parser.add_argument(
        "--chunk-seconds",
        type=chunk_seconds(),
        help="deployment feeds long audio in chunks of this length: calibrate on the chunks (default: whole clips)",
    )
    parser.add_argument(
        "--stride-seconds",
        type=stride_seconds(),
        help="left,right (or one value for both) seconds of each chunk whose outputs are dropped (default: chunk / 6)",
    )
    add_ray_argument(parser, "the statistics pass (clip shards; histograms add exactly)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def run(args: argparse.Namespace) -> int:
    from workbench.quiet import progress_bars

    progress_bars(not args.no_progress)
    from workbench.calibration.methods import MethodSpec
    from workbench.errors import WorkbenchError
    from workbench.evaluate.inference import ChunkSettings
    from workbench.inputs.out_folder import refuse_inside_set
    from workbench.jobs import calibrate

    if args.ort_cpu_weights and not args.ort_cpu:
        raise WorkbenchError(
            "--ort-cpu-weights sets the weights of the ONNX Runtime CPU flavour: add --ort-cpu"
        )
    if args.stride_seconds is not None and args.chunk_seconds is None:
        raise WorkbenchError("--stride-seconds needs --chunk-seconds")
    refuse_inside_set(args.engines, "--engines")
    assumed = model_or_demo(args, "calibrated")
    recovery, said = recovery_or_default(args, None)
    chunks = (
        ChunkSettings.of(args.chunk_seconds, args.stride_seconds) if args.chunk_seconds is not None else None
    )
    result = calibrate.run(
        calibrate.CalibrateInputs(
            args.model,
            args.calib_set,
            MethodSpec(args.method, args.percentile, args.bins),
            engines=args.engines,
            ort_cpu=args.ort_cpu,
            ort_cpu_weights=args.ort_cpu_weights or ORT_CPU_WEIGHTS,
            calib_root=args.root,
            backend=args.backend,
            chunks=chunks,
            recovery=recovery,
            ray=args.ray,
            assumed=(*assumed, *said),
        )
    )
    print_lines(result.lines())
    return 0

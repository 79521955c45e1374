"""``python -m workbench build --backend tensorrt --onnx PATH``: ONNX variant -> cached TensorRT engine.

The profile's lengths come from a calibration set's recorded profile (``--calib-set``) or explicit seconds;
its batch range from ``--batch``. Prints the engine path, build time and precision summary counts
(the build job, ``workbench.jobs.build``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from workbench.commands.options import print_lines
from workbench.config import EngineProfile
from workbench.errors import WorkbenchError
from workbench.values import batch_sizes, seconds, whole_number
from workbench.workspace import area_default


def add_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = EngineProfile()
    parser.add_argument("--backend", choices=["tensorrt"], default="tensorrt", help="engine back-end")
    parser.add_argument(
        "--onnx", type=Path, required=True, help="ONNX model (FP32, FP16, Q/DQ INT8 or mixed)"
    )
    parser.add_argument(
        "--calib-set",
        "--set",
        dest="calib_set",
        help="calibration set whose engine profile (or durations) gives min/opt/max length",
    )
    parser.add_argument(
        "--batch",
        type=batch_sizes(),
        default="1,8,32",
        help="batch sizes, comma separated (min/opt/max of them)",
    )
    parser.add_argument(
        "--min-seconds", type=seconds(), default=defaults.min_s, help="shortest audio (without --calib-set)"
    )
    parser.add_argument(
        "--opt-seconds", type=seconds(), default=defaults.opt_s, help="typical audio (without --calib-set)"
    )
    parser.add_argument(
        "--max-seconds", type=seconds(), default=defaults.max_s, help="longest audio (without --calib-set)"
    )
    parser.add_argument(
        "--flavour",
        choices=["auto", "tensorrt", "tensorrt-rtx"],
        default="auto",
        help="which TensorRT to use (auto: tensorrt, else TensorRT-RTX)",
    )
    parser.add_argument(
        "--legacy-int8-cache",
        type=Path,
        help="TensorRT <= 10 only: implicit INT8 from this calibration cache (FP32 ONNX)",
    )
    parser.add_argument("--opt-level", type=whole_number(0, 5), help="builder optimisation level (0-5)")
    parser.add_argument(
        "--engines-dir",
        type=Path,
        default=area_default("engines"),
        help="engine cache folder (default: engines/ of the workspace)",
    )
    parser.add_argument("--force", action="store_true", help="rebuild even when the engine cache has it")
    parser.add_argument("--root", type=Path, default=area_default("calib_sets"), help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    from workbench.inputs.out_folder import refuse_inside_set
    from workbench.jobs import build

    refuse_inside_set(args.engines_dir, "--engines-dir")
    batches = args.batch
    seconds = EngineProfile()
    if not args.calib_set:
        try:
            seconds = EngineProfile(args.min_seconds, args.opt_seconds, args.max_seconds)
        except ValueError as exc:
            raise WorkbenchError(str(exc)) from exc
    inputs = build.BuildInputs(
        args.onnx,
        batches,
        args.calib_set,
        seconds,
        args.flavour,
        args.legacy_int8_cache,
        args.opt_level,
        args.engines_dir,
        args.force,
        args.root,
    )
    print_lines(build.run(inputs).lines())
    return 0

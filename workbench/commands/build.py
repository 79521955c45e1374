"""``python -m workbench build --backend tensorrt --onnx PATH``: ONNX variant -> cached TensorRT engine.

The profile's lengths come from a calibration set's durations (``--set``) or explicit seconds;
its batch range from ``--batch``. Prints the engine path, build time and precision summary counts.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from workbench.config import CALIB_SETS_DIR, ENGINES_DIR, SAMPLE_RATE, EngineProfile
from workbench.commands.options import parse_positive_ints
from workbench.errors import WorkbenchError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = EngineProfile()
    parser.add_argument("--backend", choices=["tensorrt"], default="tensorrt", help="engine back-end")
    parser.add_argument("--onnx", type=Path, required=True, help="ONNX model (FP32, FP16, Q/DQ INT8 or mixed)")
    parser.add_argument("--set", dest="set_name", help="calibration set whose durations give min/opt/max length")
    parser.add_argument("--batch", default="1,8,32", help="batch sizes, comma separated (min/opt/max of them)")
    parser.add_argument("--min-seconds", type=float, default=defaults.min_s, help="shortest audio (without --set)")
    parser.add_argument("--opt-seconds", type=float, default=defaults.opt_s, help="typical audio (without --set)")
    parser.add_argument("--max-seconds", type=float, default=defaults.max_s, help="longest audio (without --set)")
    parser.add_argument("--flavour", choices=["auto", "tensorrt", "tensorrt-rtx"], default="auto",
                        help="which TensorRT to use (auto: tensorrt, else TensorRT-RTX)")
    parser.add_argument("--legacy-int8-cache", type=Path,
                        help="TensorRT <= 10 only: implicit INT8 from this calibration cache (FP32 ONNX)")
    parser.add_argument("--opt-level", type=int, help="builder optimisation level (0-5)")
    parser.add_argument("--engines-dir", type=Path, default=ENGINES_DIR, help="engine cache folder")
    parser.add_argument("--force", action="store_true", help="rebuild even when the engine cache has it")
    parser.add_argument("--root", type=Path, default=CALIB_SETS_DIR, help=argparse.SUPPRESS)


def parse_batches(value: str) -> tuple[int, ...]:
    return parse_positive_ints(value, "--batch")


def run(args: argparse.Namespace) -> int:
    from workbench.backends.tensorrt.builder import BuildSettings, build_engine
    from workbench.backends.tensorrt.loader import load_tensorrt
    from workbench.backends.tensorrt.profile import samples_from_durations, samples_from_set

    batches = parse_batches(args.batch)
    provenance = None
    if args.set_name:
        samples, provenance = samples_from_set(args.set_name, args.root)
    else:
        try:
            EngineProfile(args.min_seconds, args.opt_seconds, args.max_seconds)
        except ValueError as exc:
            raise WorkbenchError(str(exc)) from exc
        samples = samples_from_durations([args.min_seconds, args.opt_seconds, args.max_seconds])
    trt = load_tensorrt(None if args.flavour == "auto" else args.flavour)
    settings = BuildSettings(batches=batches, samples=samples, optimization_level=args.opt_level,
                             legacy_int8_cache=args.legacy_int8_cache, calibration_set=provenance)
    result = build_engine(args.onnx, settings, args.engines_dir, trt=trt, force=args.force)
    s = samples
    print(f"engine: {result.engine_path}{'  (from engine cache)' if result.cached else ''}")
    print(f"built with {trt.flavour} {trt.version} in {result.build_time_s:.2f} s, {result.engine_bytes} bytes")
    print(f"profile: batch {'/'.join(map(str, settings.key_fields()['batches']))}, samples "
          f"{s.min}/{s.opt}/{s.max} ({s.min / SAMPLE_RATE:.2f}-{s.max / SAMPLE_RATE:.2f} s)")
    print(f"precision: {result.summary.counts_line()}")
    print(f"layer summary: {result.summary_path}")
    return 0

"""``python -m workbench compare``: layer-by-layer FP32 vs quantized table and per-group sensitivity ranking.

Writes ``layers-<candidate>.json/.csv`` and ``sensitivity-<method>-<calib12>-rest-<rest>.json/.csv``
under ``engines/<model hash 12>/compare/`` (or ``--out``); see ``workbench.jobs.compare``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from workbench.commands.options import add_model_arguments, add_ray_argument, analysis_fields, print_lines
from workbench.values import Number


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    parser.add_argument("--clips-set", help="set the clips come from (default: the calibration set)")
    parser.add_argument("--candidate", type=Path, help="quantized ONNX to compare (default: INT8 everywhere)")
    parser.add_argument(
        "--plan",
        type=Path,
        help="precision plan JSON: its variant is compared (and its "
        "precisions shown) instead of INT8 everywhere",
    )
    parser.add_argument(
        "--rest",
        choices=("fp32", "fp16"),
        default="fp32",
        help="precision of everything outside the group under test",
    )
    parser.add_argument("--inverse", action="store_true", help="also run all-INT8-except-the-group variants")
    parser.add_argument("--no-layers", action="store_true", help="skip the layer-by-layer table")
    parser.add_argument("--no-sensitivity", action="store_true", help="skip the sensitivity ranking")
    parser.add_argument(
        "--atol", type=Number(low=0.0), default=1e-2, help="Polygraphy absolute tolerance per tensor"
    )
    parser.add_argument(
        "--rtol", type=Number(low=0.0), default=1e-2, help="Polygraphy relative tolerance per tensor"
    )
    add_ray_argument(parser, "the sensitivity ranking (one task per variant)")


def run(args: argparse.Namespace) -> int:
    from workbench.jobs import compare

    inputs = compare.CompareInputs(
        **analysis_fields(args, "compared"),
        clips_set=args.clips_set,
        candidate=args.candidate,
        plan=args.plan,
        rest=args.rest,
        inverse=args.inverse,
        layers=not args.no_layers,
        sensitivity=not args.no_sensitivity,
        atol=args.atol,
        rtol=args.rtol,
        ray=args.ray,
    )
    print_lines(compare.run(inputs).lines())
    return 0

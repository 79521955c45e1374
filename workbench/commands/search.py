"""``python -m workbench search``: the mixed INT8/FP16 plan with the most INT8 that meets the WER budget.

WER is measured on a dev set (default: the calibration set; not the sign-off evaluation set) against
FP32 with paired bootstrap intervals; the budget comes from the gate file (defaults +0.3 points overall,
+1.0 per condition, on the upper end of the interval). Uses the sensitivity ranking (reused when its
provenance matches, else computed). Writes ``search-...json/.csv`` and the found plan + ONNX variant.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from workbench.commands.compare import add_model_arguments, prepare_from_args, print_files, user_set
from workbench.errors import WorkbenchError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    parser.add_argument("--dev-set", help="set WER is measured on during the search (default: the calibration "
                                          "set); keep it apart from the sign-off evaluation set")
    parser.add_argument("--dev-per-condition", type=int,
                        help="use only the first N utterances per condition of the dev set (default: all)")
    parser.add_argument("--gates", type=Path, help="gate file (JSON/TOML) with the WER budget")
    parser.add_argument("--signoff-set", help="the set the sign-off will judge on: only its size is read, to "
                                              "judge dev intervals widened to that size (recommended)")
    parser.add_argument("--sensitivity", type=Path, help="sensitivity JSON from `compare` (default: reuse or make)")
    parser.add_argument("--strategy", choices=("bisect", "gallop"), default="bisect",
                        help="how k (groups kept in FP16) is searched")
    parser.add_argument("--refine", type=int, default=2, help="greedy refinement evaluations after bisection")
    parser.add_argument("--keep", choices=("fp16", "fp32"), default="fp16", help="precision of kept groups")
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples per evaluation")
    parser.add_argument("--seed", type=int, default=0)


def run(args: argparse.Namespace) -> int:
    from workbench.compare.jobs import check_dev_apart, run_search
    from workbench.evaluate.gates import load_gate_config

    if args.dev_per_condition is not None and args.dev_per_condition < 1:
        raise WorkbenchError("--dev-per-condition must be at least 1")
    if args.resamples < 100:
        raise WorkbenchError("--resamples must be at least 100")
    if args.refine < 0:
        raise WorkbenchError("--refine must be 0 or more")
    if args.sensitivity is not None and not args.sensitivity.is_file():
        raise WorkbenchError(f"--sensitivity {args.sensitivity} is not a file; give a sensitivity-*.json written by "
                             "python -m workbench compare, or drop --sensitivity to reuse or compute one")
    gates = load_gate_config(args.gates)
    # the sets are read before the model is loaded or calibrated, so a bad set fails at once
    dev_set = user_set(args.dev_set, "dev", args)
    signoff_set = user_set(args.signoff_set, "sign-off", args)
    check_dev_apart(dev_set or user_set(args.calib_set, "calibration", args), signoff_set)
    prepared = prepare_from_args(args)
    result = run_search(prepared, dev_set or prepared.calib_set, gates, sensitivity=args.sensitivity,
                        per_condition=args.per_condition, dev_per_condition=args.dev_per_condition,
                        strategy=args.strategy, refine=args.refine, keep=args.keep, resamples=args.resamples,
                        seed=args.seed, granularity=args.granularity, out=args.out, threads=args.threads,
                        progress=not args.no_progress, signoff_set=signoff_set)
    print_search_summary(result.data)
    print_files(result.files)
    return 0


def print_search_summary(data: dict[str, Any]) -> None:
    """How many evaluations the search took and the plan it found."""
    found = data["found"]
    print(f"full WER evaluations: {data['evaluations']} (one group at a time in ranking order: "
          f"{data['one_at_a_time_evaluations'] if data['one_at_a_time_evaluations'] is not None else 'n/a'}; "
          f"every group on its own: {data['per_group_evaluations']})")
    if data["int8_everywhere_passes"]:
        print("INT8 everywhere already meets the budget on the dev set")
    if found is None:
        print("no plan meets the budget on the dev set (not even every group in FP16)")
        return
    print(f"found plan {found['name']}: INT8 share {found['int8_share'] * 100:.1f}% of MatMul/Gemm/Conv nodes, "
          f"{len(found['fp16_groups'])} groups kept in FP16")

"""``python -m workbench search``: the mixed INT8/FP16 plan with the most INT8 that meets the WER budget.

WER (CER for character languages, or as ``--error-unit`` says) is measured on a dev set (default: the
calibration set; not the sign-off evaluation set) against FP32 with paired bootstrap intervals; the budget comes from the gate file (defaults +0.3 points overall,
+1.0 per condition, on the upper end of the interval), judged on the sign-off interval each dev interval
predicts (widened to the sign-off set's speakers, ``--signoff-set``, and moved out for a sign-off pass with
probability ``--confidence``; an optional ``--margin`` holds back a share of each gate on top). Uses the sensitivity ranking (reused when its
provenance matches, else computed). ``--dev-criterion disagreement`` judges plans instead by disagreement with FP32 on
``--unlabelled-dev-set`` within a disagreement budget (``workbench.search.disagreement``). Writes
``search-...json/.csv`` and the found plan + ONNX variant; see ``workbench.jobs.search``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from workbench.commands.options import (
    add_batch_size_argument,
    add_inference_arguments,
    add_model_arguments,
    add_ray_argument,
    analysis_fields,
    inference_from,
    print_lines,
)
from workbench.config import (
    MIN_RESAMPLES,
    SEARCH,
    SEARCH_DEV_CRITERIA,
    SEARCH_OBJECTIVES,
    SEARCH_ORDERS,
    SEARCH_SELECTIONS,
)
from workbench.values import number_in, positive_number, whole_number


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    add_inference_arguments(parser)
    parser.add_argument(
        "--dev-set",
        help="set WER is measured on during the search (default: the calibration "
        "set); keep it apart from the sign-off evaluation set",
    )
    parser.add_argument(
        "--dev-per-condition",
        type=whole_number(1),
        help="use only the first N utterances per condition of the dev set (default: all)",
    )
    parser.add_argument("--gates", type=Path, help="gate file (JSON/TOML) with the WER budget")
    parser.add_argument(
        "--dev-criterion",
        choices=SEARCH_DEV_CRITERIA,
        default=SEARCH.dev_criterion,
        help="what a plan is judged on: its WER delta vs FP32 on --dev-set (wer, default), or its disagreement "
        "with FP32's transcripts on --unlabelled-dev-set within a disagreement budget (disagreement; "
        "workbench/search/disagreement.py)",
    )
    parser.add_argument(
        "--unlabelled-dev-set",
        metavar="NAME",
        help="with --dev-criterion disagreement: audio without transcripts (data import --role unlabelled) the "
        "plans are judged on; keep it apart from the sign-off set",
    )
    parser.add_argument(
        "--max-disagreement",
        type=positive_number("points"),
        metavar="POINTS",
        help="with --dev-criterion disagreement: the budget, in points of FP32's words overall (each condition's "
        "scaled as the gates scale); default: calibrated on --dev-set from INT8 everywhere's WER delta per point of "
        "disagreement",
    )
    parser.add_argument(
        "--signoff-set",
        help="the set the sign-off will judge on: only its speakers and conditions "
        "are read, to judge dev intervals widened to its number of speakers "
        "(recommended)",
    )
    parser.add_argument(
        "--confidence",
        type=number_in(0.5, 1.0, high_open=True),
        default=SEARCH.confidence,
        help="keep only plans whose sign-off the dev set predicts to pass with this probability "
        f"(0.5-0.99; higher keeps more in FP16; default {SEARCH.confidence:g})",
    )
    parser.add_argument(
        "--margin",
        type=number_in(0.0, 1.0, high_open=True),
        default=SEARCH.margin,
        help="share of each gate held back on top: a candidate passes when its predicted upper end "
        f"is within (1 - margin) x the gate (default {SEARCH.margin:g})",
    )
    parser.add_argument(
        "--sensitivity", type=Path, help="sensitivity JSON from `compare` (default: reuse or make)"
    )
    parser.add_argument(
        "--strategy",
        choices=("bisect", "gallop"),
        default="bisect",
        help="how k (groups kept in FP16) is searched",
    )
    parser.add_argument(
        "--refine", type=whole_number(0), default=2, help="greedy refinement evaluations after bisection"
    )
    parser.add_argument(
        "--finer",
        type=whole_number(0),
        default=0,
        help="evaluations after refinement that narrow kept groups to one part in FP16 (q/k/v projections, "
        "FFN in/out, single nodes), least sensitive group first (default 0: off)",
    )
    parser.add_argument(
        "--confirm",
        type=number_in(0.0, 1.0, high_open=True),
        default=0.0,
        metavar="SHARE",
        help="hold back this share of each condition's dev speakers: the search chooses on the rest, then the "
        "passing plans are judged again on the held-back speakers, best first, and the first that passes there is "
        "the found plan (default 0: off; workbench/search/confirm.py)",
    )
    parser.add_argument(
        "--selection",
        choices=SEARCH_SELECTIONS,
        default=SEARCH.selection,
        help="how the choice among the plans read on one dev set is accounted for: as-read (each plan judged on "
        "its dev reading), shrink (a winner's-curse correction: each dev estimate moved up by the expected maximum "
        "of the planned evaluations' errors) or confirm (chosen on part of the dev speakers, confirmed on the "
        f"held-back rest, --confirm SHARE, default {SEARCH.confirm_share:g}); default {SEARCH.selection} "
        "(workbench/search/selection.py)",
    )
    parser.add_argument("--keep", choices=("fp16", "fp32"), default="fp16", help="precision of kept groups")
    parser.add_argument(
        "--resamples",
        type=whole_number(MIN_RESAMPLES),
        default=1000,
        help=f"bootstrap resamples per evaluation (at least {MIN_RESAMPLES})",
    )
    parser.add_argument("--seed", type=whole_number(0), default=0)
    parser.add_argument(
        "--dev-blocks",
        type=whole_number(1),
        default=SEARCH.dev_blocks,
        help="buy the dev set in this many blocks: more are transcribed only while a candidate's judged "
        f"interval straddles the gate (default {SEARCH.dev_blocks}; 1: the whole dev set for every candidate)",
    )
    parser.add_argument(
        "--futility",
        type=number_in(0.0, 0.5, high_open=True),
        default=SEARCH.futility,
        help="give a candidate up after an earlier block when the predictive chance that the whole dev set "
        f"passes it is below this, e.g. 0.05 (default {SEARCH.futility:g}: never)",
    )
    parser.add_argument(
        "--objective",
        choices=SEARCH_OBJECTIVES,
        default=SEARCH.objective,
        help="what the search maximises among passing plans: the INT8 share of multiply-accumulates "
        "(macs, default) or of MatMul/Gemm/Conv nodes",
    )
    parser.add_argument(
        "--order",
        choices=SEARCH_ORDERS,
        default=SEARCH.order,
        help="the order groups go to FP16 in: their sensitivity score per multiply-accumulate (or per node, with "
        "--objective nodes), most first (damage-per-unit, default), or the sensitivity ranking itself (damage)",
    )
    parser.add_argument(
        "--latency-target",
        metavar="TARGET",
        help="ort-cpu: choose, among the plans that pass, the one measured fastest on ONNX Runtime's CPU EP "
        "(its CPU flavour, timed against FP32 here) instead of the one the objective scores highest",
    )
    add_batch_size_argument(parser)
    add_ray_argument(
        parser, "the sensitivity ranking and each plan's dev-set transcription (utterance shards)"
    )


def run(args: argparse.Namespace) -> int:
    from workbench.errors import WorkbenchError
    from workbench.evaluate.gates import load_gate_config
    from workbench.jobs import search

    inference, also = inference_from(args)
    if also:
        raise WorkbenchError("search judges every plan under one decoder; pass one --decoder")
    inputs = search.SearchInputs(
        **analysis_fields(args, "searched"),
        gates=load_gate_config(args.gates),
        dev_set=args.dev_set,
        dev_per_condition=args.dev_per_condition,
        signoff_set=args.signoff_set,
        sensitivity=args.sensitivity,
        strategy=args.strategy,
        refine=args.refine,
        finer=args.finer,
        confirm=args.confirm,
        selection=args.selection,
        keep=args.keep,
        resamples=args.resamples,
        seed=args.seed,
        margin=args.margin,
        confidence=args.confidence,
        dev_blocks=args.dev_blocks,
        futility=args.futility,
        objective=args.objective,
        order=args.order,
        batch_size=args.batch_size,
        latency_target=args.latency_target,
        inference=inference,
        ray=args.ray,
        dev_criterion=args.dev_criterion,
        unlabelled_dev_set=args.unlabelled_dev_set,
        max_disagreement=args.max_disagreement,
    )
    print_lines(search.run(inputs).lines())
    return 0

"""``python -m workbench demo``: run the whole job on the embedded defaults, as ``workbench run`` runs a project.

The demo is the embedded preset (``workbench.project.demo``: the demo model, synthetic speech sets, its recipe,
search, gates and two deployment targets) run by the pipeline behind ``workbench run`` (``workbench.pipeline.run``):
the same steps, each reused when its inputs' hash matches a finished result (a second demo in the same workspace
reuses every step and says so), the same per-step progress and ``summary.md``. The demo exits 0 whatever the
verdicts (it shows the job); ``workbench run`` exits 3 when nothing passes.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from workbench.commands.options import print_lines
from workbench.config import DEMO_DEV_PER_CONDITION, DEMO_EVAL_PER_CONDITION, SetBuildConfig
from workbench.project.demo import DEMO_BEAM_UTTERANCES, DEMO_OVERFLOW_CLIPS, DemoOptions
from workbench.values import whole_number
from workbench.workspace import area_default

if TYPE_CHECKING:  # the pipeline's imports (scipy, the speech store) wait for the demo to run
    from workbench.pipeline.run import StepOutcome


def timing_lines(steps: list[StepOutcome]) -> list[str]:
    """Each step's seconds and the total, and their CPU time, for the end of the demo's output."""
    total = sum(s.seconds for s in steps)
    cpu = sum(s.cpu_seconds for s in steps)
    return [
        "step times: " + ", ".join(f"{s.name} {s.seconds:.1f} s" for s in steps),
        f"total: {total:.1f} s ({int(total // 60)} min {total % 60:04.1f} s)",
        "CPU time: " + ", ".join(f"{s.name} {s.cpu_seconds:.1f} s" for s in steps) + f"; total {cpu:.1f} s",
    ]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = SetBuildConfig()
    parser.add_argument(
        "--workers", type=whole_number(1), default=defaults.workers, help="parallel TTS workers"
    )
    # smaller runs for tests and quick looks; the documented demo uses the defaults
    parser.add_argument(
        "--calib-per-condition",
        type=whole_number(1),
        default=defaults.calib_per_condition,
        help=argparse.SUPPRESS,
    )
    parser.add_argument(
        "--eval-per-condition",
        type=whole_number(1),
        default=DEMO_EVAL_PER_CONDITION,
        help=f"evaluation utterances per condition (default {DEMO_EVAL_PER_CONDITION}; fewer make the demo faster "
        "and the sign-off's intervals wider, docs/demo.md)",
    )
    parser.add_argument(
        "--dev-per-condition",
        type=whole_number(0),
        default=DEMO_DEV_PER_CONDITION,
        help=f"held-out dev utterances per condition, what the search judges on (default {DEMO_DEV_PER_CONDITION})",
    )
    parser.add_argument(
        "--seed", type=whole_number(0), default=defaults.seed, help=argparse.SUPPRESS
    )  # other texts and voices
    parser.add_argument("--root", type=Path, default=area_default("calib_sets"), help=argparse.SUPPRESS)
    parser.add_argument("--engines-root", type=Path, default=area_default("engines"), help=argparse.SUPPRESS)
    parser.add_argument("--reports-root", type=Path, default=area_default("reports"), help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help=argparse.SUPPRESS)  # tests: no latency runs
    parser.add_argument(
        "--full",
        action="store_true",
        help=f"every step at full size: beam search with the LM on every evaluation utterance (default: "
        f"{DEMO_BEAM_UTTERANCES} spread over the set), the overflow check on every calibration clip (default: "
        f"{DEMO_OVERFLOW_CLIPS}), latency at batch 1 and 8 (default: batch 1)",
    )
    parser.add_argument(
        "--shift-scale",
        action="store_true",
        help="calibrate with the per-channel shift and scale of the convolution and one-sided MatMul inputs too "
        "(calibrate --shift-scale, docs/recovery.md), and so compare, search and sign off with it",
    )


def run(args: argparse.Namespace) -> int:
    from workbench.pipeline.run import run_project
    from workbench.pipeline.summary import write_summaries
    from workbench.project.demo import demo_project

    sets = replace(
        SetBuildConfig(),
        calib_per_condition=args.calib_per_condition,
        eval_per_condition=args.eval_per_condition,
        dev_per_condition=args.dev_per_condition,
        seed=args.seed,
        workers=max(1, args.workers),
    )
    print(
        f"workspace: {args.workspace.root} (sets -> {args.root}, engines -> {args.engines_root}, "
        f"reports -> {args.reports_root})"
    )
    if not args.full:
        print(
            "scaled down to a few minutes on a 2-core machine (demo --full runs every step at full size): "
            "each sign-off says what it leaves out"
        )
    project = demo_project(DemoOptions(sets, quick=args.quick, full=args.full, shift_scale=args.shift_scale))
    result = run_project(project, Path(args.engines_root), Path(args.root), Path(args.reports_root))
    folders = [str(Path(args.reports_root) / str(t.report)) for t in project.targets]
    print(
        f"\ndemo finished: {len(result.steps)} step(s); sets under {args.root}, reports under {folders[0]} "
        f"(TensorRT) and {folders[1]} (ONNX Runtime CPU)"
    )
    print_lines(result.lines())
    for path in write_summaries(result):
        print(f"summary: {path}")
    print_lines(timing_lines(result.steps))
    return 0

"""``python -m workbench run [--config workbench.toml]``: the project's whole job, reusing what is unchanged.

Steps in order: sets, calibrate, compare, search, sign-off per target (``workbench.pipeline.run``). Exit status 0
when a candidate besides the FP32 baseline passes every gate on every target, ``config.RUN_NOTHING_PASSES`` (3)
when one target has none, 1 for a user error (a bad project file included). ``--junit FILE`` writes a JUnit report
for CI; ``summary.md`` is written beside the reports either way.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from workbench.workspace import area_default


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        type=Path,
        default=Path("workbench.toml"),
        help="the project file (default ./workbench.toml)",
    )
    parser.add_argument("--junit", type=Path, help="also write a JUnit XML report here (CI)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.add_argument("--engines", type=Path, default=area_default("engines"), help=argparse.SUPPRESS)
    parser.add_argument("--root", type=Path, default=area_default("calib_sets"), help=argparse.SUPPRESS)
    parser.add_argument("--reports-root", type=Path, default=area_default("reports"), help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    from workbench.inputs.out_folder import check_out_folder
    from workbench.pipeline.run import run_project
    from workbench.pipeline.summary import write_summaries
    from workbench.project.file import load_project

    project = load_project(args.config)
    if args.junit is not None:
        check_out_folder(args.junit.parent, "--junit")
    result = run_project(project, args.engines, args.root, args.reports_root, progress=not args.no_progress)
    for line in result.lines():
        print(line)
    for path in write_summaries(result, args.junit):
        print(f"summary: {path}")
    return result.exit_status

"""``python -m workbench report --record PATH``: re-render a sign-off record (refused if inputs changed)."""

from __future__ import annotations

import argparse
from pathlib import Path

from workbench.inputs.out_folder import check_out_folder
from workbench.report.record import load_record, require_unchanged_inputs
from workbench.report.render import verdict_line, write_report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--record", type=Path, required=True, help="report.json written by signoff")
    parser.add_argument(
        "--out", type=Path, help="folder for report.md/report.html (default: the record's folder)"
    )


def run(args: argparse.Namespace) -> int:
    check_out_folder(
        args.out or args.record.parent, "--out" if args.out else "the record's folder"
    )  # before the record's inputs are hashed and plots drawn
    record = load_record(args.record)
    require_unchanged_inputs(record)
    paths = write_report(record, args.out or args.record.parent, write_record=False)
    print(f"{paths['html']}\n{paths['markdown']}")
    print(f"verdict: {verdict_line(record)}")
    return 0

"""``python -m workbench report --record PATH``: re-render a sign-off record (refused if inputs changed)."""

from __future__ import annotations

import argparse
from pathlib import Path

from workbench.inputs.out_folder import check_out_folder
from workbench.inputs.replace import add_replace_argument, refuse_replacing


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--record", type=Path, required=True, help="report.json written by signoff")
    parser.add_argument(
        "--out", type=Path, help="folder for report.md/report.html (default: the record's folder)"
    )
    add_replace_argument(parser, "another sign-off's report (a report.json) in --out")


def run(args: argparse.Namespace) -> int:
    from workbench.report.record import load_record, require_unchanged_inputs
    from workbench.report.render import HTML_NAME, MARKDOWN_NAME, RECORD_NAME, verdict_line, write_report

    check_out_folder(
        args.out or args.record.parent, "--out" if args.out else "the record's folder"
    )  # before the record's inputs are hashed and plots drawn
    elsewhere = args.out is not None and Path(args.out).resolve() != Path(args.record).parent.resolve()
    if (
        elsewhere and (Path(args.out) / RECORD_NAME).exists()
    ):  # another sign-off: its renders match its record
        refuse_replacing(
            [Path(args.out) / name for name in (RECORD_NAME, MARKDOWN_NAME, HTML_NAME)],
            "sign-off report",
            "give another --out (or none: the record's own folder)",
            args.replace,
        )
    record = load_record(args.record)
    require_unchanged_inputs(record)
    paths = write_report(record, args.out or args.record.parent, write_record=False)
    print(f"{paths['html']}\n{paths['markdown']}")
    print(f"verdict: {verdict_line(record)}")
    return 0

"""``python -m workbench data build|show|list``: balanced calibration/evaluation speech sets (the sets job)."""

from __future__ import annotations

import argparse
from pathlib import Path

from workbench.commands.options import print_lines
from workbench.config import EngineProfile, SetBuildConfig
from workbench.errors import WorkbenchError
from workbench.workspace import area_default


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="data_command", metavar="<action>", required=True)
    build = sub.add_parser("build", help="make a calibration set and an evaluation set")
    defaults = SetBuildConfig()
    profile = EngineProfile()
    build.add_argument("--name", default=defaults.name, help="sets are written as calib_sets/NAME-calib and NAME-eval")
    build.add_argument("--source", default="synthetic", choices=["synthetic", "hf", "folder", "manifest"])
    build.add_argument("--path", help="hub id or saved dataset (hf), folder (folder) or JSONL file (manifest)")
    build.add_argument("--split", default="train", help="dataset split (hf)")
    build.add_argument("--audio-column", default="audio")
    build.add_argument("--text-column", default="text")
    build.add_argument("--speaker-column")
    build.add_argument("--accent-column")
    build.add_argument("--calib-per-condition", type=int, default=defaults.calib_per_condition)
    build.add_argument("--eval-per-condition", type=int, default=defaults.eval_per_condition)
    build.add_argument("--min-seconds", type=float, default=profile.min_s)
    build.add_argument("--opt-seconds", type=float, default=profile.opt_s)
    build.add_argument("--max-seconds", type=float, default=profile.max_s)
    build.add_argument("--seed", type=int, default=defaults.seed)
    build.add_argument("--workers", type=int, default=defaults.workers)
    build.add_argument("--root", type=Path, default=area_default("calib_sets"), help=argparse.SUPPRESS)
    show = sub.add_parser("show", help="print a set's balance table and card summary")
    show.add_argument("name", help="set name under calib_sets/ or a path")
    show.add_argument("--root", type=Path, default=area_default("calib_sets"), help=argparse.SUPPRESS)
    listing = sub.add_parser("list", help="list the sets under calib_sets/")
    listing.add_argument("--root", type=Path, default=area_default("calib_sets"), help=argparse.SUPPRESS)


def _config(args: argparse.Namespace) -> SetBuildConfig:
    if args.calib_per_condition < 1 or args.eval_per_condition < 1:
        raise WorkbenchError("--calib-per-condition and --eval-per-condition must be at least 1")
    try:
        profile = EngineProfile(args.min_seconds, args.opt_seconds, args.max_seconds)
    except ValueError as exc:
        raise WorkbenchError(str(exc)) from exc
    if not args.name.replace("-", "").replace("_", "").isalnum():
        raise WorkbenchError(f"set name {args.name!r} may hold only letters, digits, '-' and '_'")
    return SetBuildConfig(name=args.name, calib_per_condition=args.calib_per_condition,
                          eval_per_condition=args.eval_per_condition, seed=args.seed,
                          profile=profile, workers=max(1, args.workers))


def run(args: argparse.Namespace) -> int:
    from workbench.jobs import sets
    from workbench.speech.store import load_set

    if args.data_command == "build":
        inputs = sets.SetsInputs(_config(args), args.source, args.path, args.split, args.audio_column,
                                 args.text_column, args.speaker_column, args.accent_column, root=args.root)
        print_lines(sets.run(inputs).lines())
        return 0
    if args.data_command == "show":
        print_lines(sets.set_lines(load_set(args.name, root=args.root)))
        return 0
    listed = sorted(p for p in Path(args.root).glob("*") if (p / "card.json").exists())
    if not listed:
        print("no sets yet; build one with: python -m workbench data build")
    for path in listed:
        s = load_set(path)
        print(f"{s.name:30} {s.card['utterances']:5} utts  {s.card['made'].get('role', '?'):5}  {s.content_hash[:12]}")
    return 0

"""``python -m workbench data build|import|show|list|recard``: calibration and evaluation speech sets.

``build`` makes a balanced calibration/evaluation pair (the sets job); ``import`` stores a whole source
as one calibration-only, evaluation-only or unlabelled set (the import_set job); ``recard`` accepts a set's files as
they are now (``workbench.speech.recard``); ``list`` says which sets no longer match their cards.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from workbench.commands.options import print_lines
from workbench.config import LAYOUTS, ImportDefaults, SetBuildConfig
from workbench.errors import WorkbenchError
from workbench.inputs.replace import add_replace_argument, refuse_replacing
from workbench.values import number_in, seconds, whole_number
from workbench.workspace import area_default

LAYOUT_HELP = (
    "where --path points: librispeech (a split folder, <speaker>/<chapter>/*.flac + *.trans.txt), "
    "commonvoice (the folder with clips/ and the TSVs), folder (audio + .txt), manifest (JSONL), "
    "hf (hub id or save_to_disk folder)"
)


def _source_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--path", help="the source: see --source")
    parser.add_argument(
        "--split",
        help="hf: dataset split (default train); commonvoice: the TSV, "
        "train|dev|test|validated or a .tsv path (default test)",
    )
    parser.add_argument("--audio-column", default="audio", help="hf: audio column")
    parser.add_argument("--text-column", default="text", help="hf: transcript column")
    parser.add_argument("--speaker-column", help="hf: speaker column")
    parser.add_argument("--accent-column", help="hf: accent column")


def _profile_and_noise_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--min-seconds",
        type=seconds(),
        help="fix the engine profile's shortest clip (default: derived from the data)",
    )
    parser.add_argument(
        "--opt-seconds", type=seconds(), help="fix the profile's typical clip (default: the median)"
    )
    parser.add_argument(
        "--max-seconds", type=seconds(), help="fix the profile's longest clip (default: the longest)"
    )
    parser.add_argument(
        "--noise-dir",
        type=Path,
        help="recorded noise (MUSAN/DEMAND style, a sub-folder per "
        "kind) for the noisy condition instead of generated noise",
    )
    parser.add_argument(
        "--rir-dir", type=Path, help="room impulse responses: adds a reverberant noisy condition"
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="data_command", metavar="<action>", required=True)
    build = sub.add_parser("build", help="make a calibration set and an evaluation set")
    defaults = SetBuildConfig()
    build.add_argument(
        "--name", default=defaults.name, help="sets are written as calib_sets/NAME-calib and NAME-eval"
    )
    build.add_argument(
        "--source",
        default="synthetic",
        choices=["synthetic", *LAYOUTS],
        help="synthetic speech, or " + LAYOUT_HELP,
    )
    _source_arguments(build)
    build.add_argument("--calib-per-condition", type=whole_number(1), default=defaults.calib_per_condition)
    build.add_argument("--eval-per-condition", type=whole_number(1), default=defaults.eval_per_condition)
    _profile_and_noise_arguments(build)
    build.add_argument("--seed", type=whole_number(0), default=defaults.seed)
    build.add_argument(
        "--draw",
        type=whole_number(0),
        default=defaults.draw,
        metavar="N",
        help="synthetic speech: draw N of the evaluation set beside the seed's calibration set (the same bytes): new "
        "evaluation speakers (among those never in calibration), texts, noise and levels, for a fresh sample of the "
        "same population; 0 (default) is the seed's own sets",
    )
    build.add_argument("--workers", type=whole_number(1), default=defaults.workers)
    build.add_argument("--root", type=Path, default=area_default("calib_sets"), help=argparse.SUPPRESS)
    add_replace_argument(build, "the pair NAME-calib / NAME-eval")
    imp = sub.add_parser("import", help="store a whole source as one evaluation or calibration set")
    idef = ImportDefaults()
    imp.add_argument("--name", required=True, help="the set is written as calib_sets/NAME")
    imp.add_argument(
        "--role",
        choices=["eval", "calib", "unlabelled"],
        default=idef.role,
        help="evaluation or calibration set, or unlabelled audio (no transcripts: any given are ignored) for the "
        "sign-off's label-free check (signoff --unlabelled-set)",
    )
    imp.add_argument("--source", required=True, choices=LAYOUTS, help=LAYOUT_HELP)
    _source_arguments(imp)
    _profile_and_noise_arguments(imp)
    imp.add_argument(
        "--noisy-share",
        type=number_in(0.0, 1.0),
        default=idef.noisy_share,
        help="share of quiet clips that also get a noisy copy (and a reverberant one with --rir-dir)",
    )
    imp.add_argument(
        "--take", type=whole_number(1), help="keep a seeded sample of N usable utterances (default: all)"
    )
    imp.add_argument(
        "--disjoint-from",
        metavar="SET",
        action="append",
        default=[],
        help="drop utterances whose speaker or text is in this set (e.g. the evaluation set); repeat for several "
        "sets (e.g. a dev set apart from both the calibration and the evaluation set)",
    )
    imp.add_argument(
        "--allow-missing",
        type=whole_number(0),
        default=0,
        metavar="N",
        help="an evaluation set imported whole is refused when its source lists audio files or transcripts "
        "that are not there; accept up to N of them (recorded in the card and every report; default 0)",
    )
    imp.add_argument(
        "--skip-implausible",
        action="store_true",
        help="evaluation sets: leave out clips that are no plausible utterance (a sample rate no recording has, "
        "longer than 10 minutes) instead of refusing the import; calibration imports always skip them",
    )
    imp.add_argument("--seed", type=whole_number(0), default=0)
    imp.add_argument("--workers", type=whole_number(1), default=idef.workers, help="decoding processes")
    imp.add_argument("--no-progress", action="store_true", help="no progress bar")
    imp.add_argument("--root", type=Path, default=area_default("calib_sets"), help=argparse.SUPPRESS)
    add_replace_argument(imp, "the set NAME")
    show = sub.add_parser("show", help="print a set's balance table and card summary")
    show.add_argument("name", help="set name under calib_sets/ or a path")
    show.add_argument("--root", type=Path, default=area_default("calib_sets"), help=argparse.SUPPRESS)
    longform = sub.add_parser(
        "long-form", help="join a set's utterances into 30-120 s recordings (one speaker and condition each)"
    )
    longform.add_argument("source", help="set name under calib_sets/ or a path")
    longform.add_argument("--name", required=True, help="name of the long-form set to write")
    longform.add_argument(
        "--min-seconds", type=seconds(), default=30.0, help="shortest recording (default 30)"
    )
    longform.add_argument(
        "--max-seconds", type=seconds(), default=120.0, help="longest recording (default 120)"
    )
    longform.add_argument(
        "--seed", type=whole_number(0), default=0, help="seed of the pauses between utterances"
    )
    longform.add_argument("--root", type=Path, default=area_default("calib_sets"), help=argparse.SUPPRESS)
    add_replace_argument(longform, "the long-form set NAME")
    listing = sub.add_parser("list", help="list the sets under calib_sets/")
    listing.add_argument("--root", type=Path, default=area_default("calib_sets"), help=argparse.SUPPRESS)
    recard = sub.add_parser(
        "recard", help="accept a set's changed files: recompute its card's hashes and counts from them"
    )
    recard.add_argument("name", help="set name under calib_sets/ or a path")
    recard.add_argument("--root", type=Path, default=area_default("calib_sets"), help=argparse.SUPPRESS)


def _check_set_name(name: str) -> None:
    if not name.replace("-", "").replace("_", "").isalnum():
        raise WorkbenchError(f"set name {name!r} may hold only letters, digits, '-' and '_'")


def _config(args: argparse.Namespace) -> SetBuildConfig:
    from workbench.speech.profiles import fixed_profile

    _check_set_name(args.name)
    return SetBuildConfig(
        name=args.name,
        calib_per_condition=args.calib_per_condition,
        eval_per_condition=args.eval_per_condition,
        seed=args.seed,
        draw=args.draw,
        profile=fixed_profile(args.min_seconds, args.opt_seconds, args.max_seconds),
        workers=args.workers,
        noise_dir=args.noise_dir,
        rir_dir=args.rir_dir,
    )


def _source_fields(args: argparse.Namespace) -> dict:
    from workbench.speech.layouts import SourceOptions

    options = SourceOptions(
        args.split,
        args.audio_column,
        args.text_column,
        args.speaker_column,
        args.accent_column,
        labelled=getattr(args, "role", "eval") != "unlabelled",
    )
    return {"source": args.source, "path": args.path, "options": options, "root": args.root}


def _import(args: argparse.Namespace) -> list[str]:
    from workbench.jobs import import_set
    from workbench.speech.importer import ImportConfig
    from workbench.speech.profiles import fixed_profile

    config = ImportConfig(
        name=args.name,
        role=args.role,
        workers=args.workers,
        seed=args.seed,
        take=args.take,
        profile=fixed_profile(args.min_seconds, args.opt_seconds, args.max_seconds),
        noisy_share=args.noisy_share,
        noise_dir=args.noise_dir,
        rir_dir=args.rir_dir,
        disjoint_from=tuple(args.disjoint_from),
        allow_missing=args.allow_missing,
        skip_implausible=args.skip_implausible,
    )
    inputs = import_set.ImportInputs(config, progress=not args.no_progress, **_source_fields(args))
    return import_set.run(inputs).lines()


def run(args: argparse.Namespace) -> int:
    from workbench.jobs import sets
    from workbench.journal import recover
    from workbench.speech.store import load_set, set_names

    if args.data_command == "build":
        _check_set_name(args.name)
        names = [Path(args.root) / f"{args.name}-{role}" for role in ("calib", "eval")]
        refuse_replacing(names, "set", "give another --name", args.replace)
        print_lines(sets.run(sets.SetsInputs(_config(args), **_source_fields(args))).lines())
        return 0
    if args.data_command == "import":
        _check_set_name(args.name)
        refuse_replacing([Path(args.root) / args.name], "set", "give another --name", args.replace)
        print_lines(_import(args))
        return 0
    if args.data_command == "long-form":
        from workbench.speech.longform import LongFormConfig, build_long_form

        _check_set_name(args.name)
        refuse_replacing([Path(args.root) / args.name], "set", "give another --name", args.replace)
        config = LongFormConfig(args.min_seconds, args.max_seconds, seed=args.seed)
        built = build_long_form(load_set(args.source, root=args.root), Path(args.root) / args.name, config)
        print_lines(sets.set_lines(built))
        return 0
    if args.data_command == "show":
        print_lines(sets.set_lines(load_set(args.name, root=args.root)))
        return 0
    if args.data_command == "recard":
        from workbench.speech.recard import recard_set

        print_lines(recard_set(args.name, root=args.root).lines())
        return 0
    print_lines(recover(args.root))  # a killed build's pair is completed (or discarded) before listing
    listed = set_names(args.root)
    if not listed:
        print("no sets yet; build one with: python -m workbench data build")
    for name in listed:
        print(_list_line(Path(args.root) / name))
    return 0


def _list_line(path: Path) -> str:
    """One set's line in ``data list``; a set that no longer matches its card (or is damaged) says why."""
    from workbench.speech.store import load_set, verify_set

    try:
        s = load_set(path, verify=False)
    except WorkbenchError as exc:
        return f"{path.name:30} unusable: {exc}"
    head = f"{s.name:30} {s.card['utterances']:5} utts  {s.card['made'].get('role', '?'):5}  {s.content_hash[:12]}"
    try:
        verify_set(s)
    except WorkbenchError as exc:
        return f"{head}  CHANGED: {exc}"
    return head

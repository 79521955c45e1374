"""``python -m workbench cache list|show|prune``: calibration caches under engines/<model>/."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from workbench.errors import WorkbenchError
from workbench.workspace import area_default


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--root",
        type=Path,
        default=area_default("engines"),
        help="engines folder (default: engines/ of the workspace)",
    )
    sub = parser.add_subparsers(dest="cache_command", metavar="<action>", required=True)
    sub.add_parser("list", help="list caches and their provenance")
    show = sub.add_parser("show", help="print one cache's keys and its first scales")
    show.add_argument("path", type=Path)
    show.add_argument("--all", action="store_true", help="print every tensor, not only the first 20")
    prune = sub.add_parser(
        "prune",
        help="delete caches that are unusable or whose FP32 ONNX beside them changed or is gone, and temporary "
        "files left by interrupted writes",
    )
    prune.add_argument("--yes", action="store_true", help="really delete (default: only list)")


def run(args: argparse.Namespace) -> int:
    from workbench.calibration import cache as cache_mod
    from workbench.calibration.histograms import histograms_problem
    from workbench.calibration.prune import caches, delete_cache, leftover_temps, load_inside, stale_reason

    found = caches(args.root)
    if args.cache_command == "list":
        if not found:
            print(f"no calibration caches under {args.root}; make one with: python -m workbench calibrate")
        for path in found:
            try:
                c = load_inside(path, args.root)
                print(
                    f"{path}  {len(c.scales)} tensors  method={c.keys.get('method')}  "
                    f"set={str(c.keys.get('calibration_set'))[:12]}  model={str(c.keys.get('model'))[:12]}"
                )
                problem = histograms_problem(path, c)
                if problem:
                    print(f"  histograms: {problem}")
            except WorkbenchError as exc:
                print(f"{path}  UNUSABLE: {exc}")
        return 0
    if args.cache_command == "show":
        c = cache_mod.load(args.path)
        print(json.dumps(c.keys, indent=2, sort_keys=True))
        print(c.header)
        items = list(c.scales.items())
        for name, scale in items if args.all else items[:20]:
            print(f"  {name}: scale {scale:.6g} (amax {scale * 127:.6g})")
        if not args.all and len(items) > 20:
            print(f"  ... {len(items) - 20} more (--all)")
        return 0
    stale = [(p, r) for p in found if (r := stale_reason(p, args.root)) is not None]
    for path, reason in stale:
        print(("deleting " if args.yes else "would delete ") + f"{path} ({reason})")
        if args.yes:
            delete_cache(path, args.root)
    temps = leftover_temps(args.root, remove=args.yes)
    for path in temps:
        print(("deleted " if args.yes else "would delete ") + f"{path} (left by an interrupted write)")
    if not stale and not temps:
        print("nothing to prune")
    elif not args.yes:
        print("run again with --yes to delete")
    return 0

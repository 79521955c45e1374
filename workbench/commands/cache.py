"""``python -m workbench cache list|show|prune``: calibration caches under engines/."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from workbench.config import ENGINES_DIR
from workbench.errors import WorkbenchError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="cache_command", metavar="<action>", required=True)
    sub.add_parser("list", help="list caches and their provenance")
    show = sub.add_parser("show", help="print one cache's keys and its first scales")
    show.add_argument("path", type=Path)
    prune = sub.add_parser("prune", help="delete caches whose ONNX model no longer exists beside them")
    prune.add_argument("--yes", action="store_true", help="really delete (default: only list)")


def _caches() -> list[Path]:
    return sorted(ENGINES_DIR.glob("*/*.cache"))


def run(args: argparse.Namespace) -> int:
    from workbench.calibration import cache as cache_mod

    if args.cache_command == "list":
        caches = _caches()
        if not caches:
            print("no calibration caches yet; make one with: python -m workbench calibrate")
        for path in caches:
            try:
                c = cache_mod.load(path)
                print(f"{path}  {len(c.scales)} tensors  method={c.keys.get('method')}  "
                      f"set={str(c.keys.get('calibration_set'))[:12]}  model={str(c.keys.get('model'))[:12]}")
            except WorkbenchError as exc:
                print(f"{path}  UNUSABLE: {exc}")
        return 0
    if args.cache_command == "show":
        c = cache_mod.load(args.path)
        print(json.dumps(c.keys, indent=2))
        print(c.header)
        for name, scale in list(c.scales.items())[:20]:
            print(f"  {name}: scale {scale:.6g} (amax {scale * 127:.6g})")
        return 0
    stale = [p for p in _caches() if not (p.parent / "model.fp32.onnx").exists()]
    for path in stale:
        print(("deleting " if args.yes else "would delete ") + str(path))
        if args.yes:
            path.unlink()
            cache_mod.sidecar(path).unlink(missing_ok=True)
    if not stale:
        print("nothing to prune")
    return 0

"""Consent before an artifact is replaced: a verb that writes to a place the user names (a set's name, a report
folder) refuses when something is already there, naming it and ``--replace`` (or a new name).

With ``--replace`` the old artifact stays whole until the new one is complete: sets are swapped in through the
journal (``workbench.journal``), a report's three files together (``journal.files_together``), so a crash
mid-write leaves the old one.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from workbench.errors import WorkbenchError

REPLACE_HELP = (
    "replace an existing artifact of that name (the old one stays until the new one is complete); without it an "
    "existing one is refused"
)


def add_replace_argument(parser: argparse.ArgumentParser, what: str) -> None:
    """``--replace``: consent to replace ``what`` when it exists."""
    parser.add_argument("--replace", action="store_true", help=f"{what}: {REPLACE_HELP}")


def refuse_replacing(paths: list[Path], what: str, instead: str, replace: bool) -> None:
    """Raise a WorkbenchError naming every existing path of ``paths`` unless ``replace``; ``instead`` says what
    else the user may do (``give another --name``)."""
    if replace:
        return
    found = [p for p in paths if p.exists() or p.is_symlink()]
    if found:
        names = ", ".join(str(p) for p in found)
        raise WorkbenchError(
            f"{what} {names} already exists; pass --replace to replace it (the old one stays until the new one is "
            f"complete), or {instead}"
        )

"""Output folders a user names (``--out`` of signoff, report, compare, search): checked before any work, so a run
never does minutes of work and then fails to write its results.

The folder must be a folder (or not exist yet, under a folder) where a file can really be made: the check makes
an unnamed temporary file there (``O_TMPFILE``: nothing is left even if the process dies), which also catches
read-only file systems and, for root, places that permission bits do not stop. No output folder (``--out``,
``--engines``) may lie inside a speech set's folder: a set holds only its own files (``refuse_inside_set``).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from workbench.errors import WorkbenchError
from workbench.inputs.sets import CARD, MANIFEST


def check_out_folder(path: Path, flag: str = "--out") -> None:
    """Raise a WorkbenchError naming ``flag`` unless ``path`` is, or can be made as, a folder that takes files."""
    path = Path(path)
    refuse_inside_set(path, flag)
    if path.exists() and not path.is_dir():
        raise WorkbenchError(
            f"{flag} {path} is a file, not a folder; give a folder (it is made when missing)"
        )
    existing = path
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if not existing.is_dir():
        raise WorkbenchError(
            f"{flag} {path} cannot be made: {existing} is a file, not a folder; give another folder"
        )
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as exc:
        reason = exc.strerror or str(exc)
        where = "it" if existing == path else f"{existing}"
        raise WorkbenchError(
            f"{flag} {path} cannot be written ({where}: {reason}); give a folder you can write to"
        ) from exc


def refuse_inside_set(path: Path, flag: str) -> None:
    """Raise a WorkbenchError when ``path`` is a speech set's folder or lies inside one (a folder holding the
    set's manifest and card): artifacts written there would sit among the set's files and change its content."""
    folder = Path(path).absolute()
    for place in (folder, *folder.parents):
        if (place / MANIFEST).is_file() and (place / CARD).is_file():
            raise WorkbenchError(
                f"{flag} {path} lies inside the speech set folder {place}; a set holds only its own files "
                "(anything written there changes what the set is): give a folder outside it"
            )

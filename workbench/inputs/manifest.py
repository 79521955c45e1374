"""JSONL speech manifests (``data build --source manifest``): one object per line, read whole before any audio.

Each line: ``audio`` (a path, relative to the manifest) and ``text`` (the transcript) as strings;
optional ``speaker``, ``accent`` (strings) and ``condition`` (quiet, noisy, accented, or a condition of the
user's own such as ``telephone`` or ``far-field``: a name of letters, digits, '-' and '_'). A file
that is not UTF-8, or in which no line is such a record, is a ``BadInput``; single lines that are not
records are skipped with the reason (kept in the set's card), like unreadable audio.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.inputs import shape
from workbench.inputs.problem import BadInput, Where
from workbench.inputs.read import parse_json, read_text

_CONDITION_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")
FIX = (
    'write one JSON object per line: {"audio": "clips/a.wav", "text": "the words", "speaker": "s1", '
    '"accent": "us", "condition": "quiet"} (speaker, accent and condition are optional)'
)


@dataclass(frozen=True)
class ManifestEntry:
    """One usable manifest line."""

    line: int
    audio: str
    text: (
        str | None
    )  # None: the line has no ``text`` (an unlabelled set needs none; a labelled one misses it)
    speaker: str | None = None
    accent: str | None = None
    condition: str | None = None


def check_entry(obj: Any, where: Where, line: int) -> ManifestEntry:
    record = shape.mapping(obj, where)
    if "audio" not in record:
        raise where.fail("no 'audio' field")
    audio = shape.string(record.get("audio"), where.key("audio"))
    text = None if "text" not in record else shape.string(record.get("text"), where.key("text"), empty=True)
    condition = record.get("condition")
    if condition is not None:  # any name: each condition gets its own rows and gate in sign-off
        condition = shape.string(condition, where.key("condition")).strip().lower()
        if not _CONDITION_NAME.fullmatch(condition):
            raise where.key("condition").fail(
                f"must be a name of letters, digits, '-' and '_' (quiet, noisy, "
                f"accented, or your own such as telephone), found {condition!r}"
            )
    return ManifestEntry(
        line,
        audio,
        text,
        shape.optional_string(record.get("speaker"), where.key("speaker")),
        shape.optional_string(record.get("accent"), where.key("accent")),
        condition,
    )


def read_manifest(path: Path) -> tuple[list[ManifestEntry], list[tuple[str, str]]]:
    """Every usable line, and ``("line N", reason)`` for every line that is not a record; raises when the file
    cannot be used at all (not UTF-8, no usable line)."""
    where = Where(f"manifest {path}", FIX)
    entries: list[ManifestEntry] = []
    skipped: list[tuple[str, str]] = []
    for number, line in enumerate(read_text(Path(path), where).splitlines(), 1):
        if not line.strip():
            continue
        try:
            entries.append(check_entry(parse_json(line, where, name_line=False), where, number))
        except BadInput as exc:  # ``where`` has no line, so ``at`` is only the key (if any)
            skipped.append(
                (f"line {number}", f"{exc.where.at}: {exc.problem}" if exc.where.at else exc.problem)
            )
    if not entries:
        first = f" ({skipped[0][0]}: {skipped[0][1]})" if skipped else ""
        raise where.fail(f"has no usable line{first}")
    return entries, skipped

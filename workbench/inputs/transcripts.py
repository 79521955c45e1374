"""Transcripts of an audio folder (``data build --source folder``): ``x.txt`` beside ``x.wav``, or the
tab-separated tables ``transcripts.tsv`` (file, text) and ``speakers.tsv`` (file, speaker, accent).

All of them are read and checked (UTF-8) before any audio is decoded; an error names the file and line.
"""

from __future__ import annotations

from pathlib import Path

from workbench.inputs.problem import Where
from workbench.inputs.read import read_text

FIX = "save transcripts as UTF-8 text: x.txt beside x.wav, or transcripts.tsv lines 'file<TAB>text'"


def read_transcript(path: Path) -> str:
    """A ``.txt`` sidecar's text."""
    return read_text(Path(path), Where(f"transcript {path}", FIX))


def read_table(path: Path) -> dict[str, list[str]]:
    """A ``.tsv`` table: first column -> the other columns; an absent file is an empty table."""
    path = Path(path)
    table: dict[str, list[str]] = {}
    if not path.exists():
        return table
    for line in read_text(path, Where(f"table {path}", FIX)).splitlines():
        parts = line.split("\t")
        if parts and parts[0]:
            table[parts[0]] = parts[1:]
    return table

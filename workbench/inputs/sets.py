"""Stored speech sets (``calib_sets/<name>/``): the card and every manifest line, checked when a set is loaded.

The card must be an object with the fields every reader uses; each manifest line must be an utterance
record (string fields, a duration > 0) whose ``audio`` path stays inside the set's folder.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from workbench.inputs import shape
from workbench.inputs.problem import Where

MANIFEST = "manifest.jsonl"  # a stored set's files (``workbench.speech.store`` writes them)
CARD = "card.json"
FIX = "rebuild the set with python -m workbench data build (sets are written by the workbench, not by hand)"
CARD_OBJECTS = ("strata", "accents", "noise_kinds", "made")
UTTERANCE_STRINGS = ("id", "text", "speaker", "voice", "accent", "condition", "source", "audio")


def check_card(card: Any, where: Where) -> dict[str, Any]:
    obj = shape.mapping(card, where)
    shape.hex_digest(obj.get("content_hash"), where.key("content_hash"))
    shape.integer(obj.get("utterances"), where.key("utterances"), minimum=0)
    shape.integer(obj.get("speakers"), where.key("speakers"), minimum=0)
    shape.finite_number(obj.get("total_duration_s"), where.key("total_duration_s"))
    for key in CARD_OBJECTS:
        shape.mapping(obj.get(key), where.key(key))
    shape.sequence(obj.get("skipped"), where.key("skipped"))
    return obj


def check_utterance(record: Any, where: Where, labelled: bool = True) -> dict[str, Any]:
    """A manifest line's record; ``audio`` must be a relative path inside the set (no ``..``); ``labelled``
    False (an unlabelled set): ``text`` is the empty string."""
    obj = shape.mapping(record, where)
    for key in UTTERANCE_STRINGS:
        shape.string(obj.get(key), where.key(key), empty=key == "text" and not labelled)
    shape.finite_number(obj.get("duration_s"), where.key("duration_s"), positive=True)
    audio = PurePosixPath(obj["audio"])
    if audio.is_absolute() or ".." in audio.parts or "\\" in obj["audio"]:
        raise where.key("audio").fail(f"must be a path inside the set's folder, found {obj['audio']!r}")
    for key in ("fixes",):
        if key in obj:
            shape.sequence(obj[key], where.key(key))
    if "extra" in obj:
        shape.mapping(obj["extra"], where.key("extra"))
    return obj

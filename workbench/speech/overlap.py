"""Calibration/evaluation overlap: shared speakers and shared (normalised) texts between two sets.

``overlap`` compares any two lists of utterances; the builder refuses to write an overlapping pair,
and ``require_disjoint`` makes sign-off (and anything else that pairs a calibration set with an
evaluation set) refuse a pair that shares speakers or texts, whoever made the two sets.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from workbench.errors import WorkbenchError
from workbench.speech.records import Utterance

_LISTED = 20


def overlap(calib: Sequence[Utterance], evaluation: Sequence[Utterance]) -> dict[str, Any]:
    """Shared texts and speakers (counts, and the first few of each)."""
    texts = {u.text for u in calib} & {u.text for u in evaluation}
    speakers = {u.speaker for u in calib} & {u.speaker for u in evaluation}
    return {
        "shared_texts": sorted(texts)[:_LISTED],
        "shared_text_count": len(texts),
        "shared_speakers": sorted(speakers)[:_LISTED],
        "shared_speaker_count": len(speakers),
        "disjoint_by_text": not texts,
        "disjoint_by_speaker": not speakers,
    }


def disjoint(checks: dict[str, Any]) -> bool:
    """Whether an ``overlap`` result found no shared speaker and no shared text."""
    return bool(checks["disjoint_by_text"] and checks["disjoint_by_speaker"])


def overlap_message(
    checks: dict[str, Any],
    calib_name: str,
    eval_name: str,
    roles: tuple[str, str] = ("calibration set", "evaluation set"),
) -> str:
    """``calibration set a and evaluation set b share 3 speakers (a, b, c) and 2 texts ('X', 'Y')`` (``roles``
    names the two sets' parts when they are not a calibration/evaluation pair)."""
    parts = []
    if checks["shared_speaker_count"]:
        parts.append(
            f"{checks['shared_speaker_count']} speaker(s) ({', '.join(checks['shared_speakers'][:5])}"
            f"{', ...' if checks['shared_speaker_count'] > 5 else ''})"
        )
    if checks["shared_text_count"]:
        parts.append(
            f"{checks['shared_text_count']} text(s) ({', '.join(repr(t) for t in checks['shared_texts'][:3])}"
            f"{', ...' if checks['shared_text_count'] > 3 else ''})"
        )
    return f"{roles[0]} {calib_name} and {roles[1]} {eval_name} share {' and '.join(parts)}"


def require_disjoint(calib_set, eval_set) -> dict[str, Any]:
    """Raise a user error when two stored sets share a speaker or a text; returns the check."""
    checks = overlap(calib_set.utterances, eval_set.utterances)
    if disjoint(checks):
        return checks
    raise WorkbenchError(
        f"{overlap_message(checks, calib_set.name, eval_set.name)}: a model calibrated on what it is evaluated "
        "on is not signed off. Re-import one of them with --disjoint-from the other (drops the shared "
        "speakers and texts), or build a disjoint pair with 'python -m workbench data build'."
    )

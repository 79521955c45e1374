"""Unlabelled sets: audio stored without transcripts, for the label-free sign-off check.

``data import --role unlabelled`` stores a source's audio with the same content hash, card and bad-input rules
as any set, but no transcript: a transcript the source carries is ignored, counted in the card
(``checks.transcripts_ignored``) and said in one line. Such a set can be scored only against the FP32 model's
own transcripts (``workbench.evaluate.agreement``) or calibrated on; every verb that needs references refuses
it (``require_labelled``) before any work.
"""

from __future__ import annotations

from typing import Any

from workbench.errors import WorkbenchError
from workbench.speech.records import Utterance
from workbench.speech.store import SpeechSet

UNLABELLED = "unlabelled"


def role_of(speech_set: SpeechSet) -> str:
    """The role the set's card records (``calib``, ``eval``, ``unlabelled``; ``?`` when it records none)."""
    return str((speech_set.card.get("made") or {}).get("role", "?"))


def is_unlabelled(speech_set: SpeechSet) -> bool:
    return role_of(speech_set) == UNLABELLED


def require_labelled(speech_set: SpeechSet, option: str) -> SpeechSet:
    """Refuse an unlabelled set where references are needed (``option`` names the flag, e.g. ``--eval-set``)."""
    if is_unlabelled(speech_set):
        raise WorkbenchError(
            f"{option} {speech_set.name} is an unlabelled set (no transcripts): it cannot be scored against "
            f"references; give it as --unlabelled-set {speech_set.name} (agreement with FP32), or give a labelled "
            "set to " + option
        )
    return speech_set


def require_unlabelled(speech_set: SpeechSet, option: str) -> SpeechSet:
    """Refuse a labelled set given where an unlabelled one is asked for (its transcripts would go unused)."""
    if not is_unlabelled(speech_set):
        role = role_of(speech_set)
        kind = (
            "a set whose card records no role"
            if role == "?"
            else f"{'an' if role[:1] in 'aeiou' else 'a'} {role} set"
        )
        raise WorkbenchError(
            f"{option} {speech_set.name} is {kind} with transcripts: give it as --eval-set to "
            f"score it against them, or import the audio with data import --role {UNLABELLED}"
        )
    return speech_set


def ignored_transcripts(utterances: list[Utterance]) -> int:
    """How many stored utterances came with a transcript that the unlabelled import ignored."""
    return sum(1 for u in utterances if u.extra.get("transcript_ignored"))


def import_note(name: str, utterances: list[Utterance]) -> str | None:
    """One line when the source carried transcripts: they are ignored, not stored."""
    count = ignored_transcripts(utterances)
    if not count:
        return None
    return (
        f"{count} of the {len(utterances)} utterances of {name} came with a transcript; an unlabelled set stores "
        "none, so they were ignored (import with --role eval to score against them)"
    )


def card_checks(utterances: list[Utterance]) -> dict[str, Any]:
    """``checks.transcripts_ignored`` of an unlabelled set's card."""
    return {"transcripts_ignored": ignored_transcripts(utterances)}

"""Clips from a stored set for an analysis: a few per speech condition, or all of them, audio loaded once."""

from __future__ import annotations

from workbench.errors import WorkbenchError
from workbench.speech.records import Clip, Utterance
from workbench.speech.store import SpeechSet


def require_utterances(speech_set: SpeechSet, role: str) -> SpeechSet:
    """``speech_set`` if it has utterances; otherwise a user error naming its role (calibration, dev, ...)."""
    if not speech_set.utterances:
        raise WorkbenchError(
            f"{role} set {speech_set.name} ({speech_set.path}) has no utterances; rebuild it "
            "with python -m workbench data build, or choose another set"
        )
    return speech_set


HELD_OUT_ROLES = {"eval": "an evaluation set", "dev": "a dev set"}


def require_calibration_role(speech_set: SpeechSet, option: str = "--calib-set") -> SpeechSet:
    """``speech_set`` unless its card says it was made to judge (role ``eval`` or ``dev``): scales calibrated on
    the speech a plan is judged on make the judgement optimistic, so a verb that calibrates refuses it by name."""
    role = str((speech_set.card.get("made") or {}).get("role", ""))
    if role in HELD_OUT_ROLES:
        raise WorkbenchError(
            f"{option} {speech_set.name} is {HELD_OUT_ROLES[role]} (its card says role {role!r}); calibrating on "
            "the speech a plan is judged on makes the judgement optimistic: give a calibration set (data build "
            "writes NAME-calib; data import --role calib)"
        )
    return speech_set


def clips_per_condition(speech_set: SpeechSet, per_condition: int) -> list[Clip]:
    """The first ``per_condition`` utterances of every condition (conditions sorted), with their audio."""
    if per_condition < 1:
        raise WorkbenchError("clips per condition must be at least 1")
    taken: dict[str, list[Utterance]] = {}
    for utt in speech_set.utterances:
        bucket = taken.setdefault(utt.condition or "-", [])
        if len(bucket) < per_condition:
            bucket.append(utt)
    if not taken:
        require_utterances(speech_set, "the")
    return [Clip(u, speech_set.audio(u)) for cond in sorted(taken) for u in taken[cond]]


def all_clips(speech_set: SpeechSet, limit: int | None = None) -> list[Clip]:
    """Every utterance of a set (the first ``limit`` when given), audio loaded once."""
    utts = speech_set.utterances[:limit] if limit else speech_set.utterances
    if not utts:
        require_utterances(speech_set, "the")
    return [Clip(u, speech_set.audio(u)) for u in utts]

"""A few clips per speech condition from a stored set (first N of each condition, manifest order)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench.errors import WorkbenchError
from workbench.speech.records import Utterance


@dataclass(frozen=True)
class Clip:
    """One utterance record with its audio (16 kHz float32)."""

    utterance: Utterance
    audio: np.ndarray

    @property
    def condition(self) -> str:
        return self.utterance.condition or "-"

    def to_json(self) -> dict:
        return {"id": self.utterance.id, "condition": self.condition,
                "duration_s": round(float(self.utterance.duration_s), 3)}


def clips_per_condition(speech_set, per_condition: int) -> list[Clip]:
    """The first ``per_condition`` utterances of every condition (conditions sorted), with their audio."""
    if per_condition < 1:
        raise WorkbenchError("clips per condition must be at least 1")
    taken: dict[str, list[Utterance]] = {}
    for utt in speech_set.utterances:
        bucket = taken.setdefault(utt.condition or "-", [])
        if len(bucket) < per_condition:
            bucket.append(utt)
    if not taken:
        raise WorkbenchError(f"set {speech_set.name} has no utterances")
    return [Clip(u, speech_set.audio(u)) for cond in sorted(taken) for u in taken[cond]]


def all_clips(speech_set, limit: int | None = None) -> list[Clip]:
    """Every utterance of a set (the first ``limit`` when given), audio loaded once."""
    utts = speech_set.utterances[:limit] if limit else speech_set.utterances
    if not utts:
        raise WorkbenchError(f"set {speech_set.name} has no utterances")
    return [Clip(u, speech_set.audio(u)) for u in utts]

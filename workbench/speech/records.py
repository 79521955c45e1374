"""The utterance record every source yields and every set stores (one JSONL line per clip)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np


@dataclass
class Utterance:
    """One clip's metadata; ``audio`` is the FLAC path relative to the set folder once stored."""

    id: str
    text: str
    speaker: str
    voice: str
    accent: str
    condition: str
    duration_s: float
    source: str
    snr_db: float | None = None
    requested_snr_db: float | None = None
    noise_kind: str | None = None
    level_dbfs: float | None = None
    bucket: str | None = None
    audio: str = ""
    fixes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Utterance:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in obj.items() if k in known})


@dataclass
class Clip:
    """One utterance record with its audio (16 kHz mono float32): what sources yield, the builder mixes
    and stores, and the analyses read back from a stored set."""

    utterance: Utterance
    audio: np.ndarray

    @property
    def condition(self) -> str:
        return self.utterance.condition or "-"

    def to_json(self) -> dict[str, Any]:
        """Id, condition and duration: how result files name the clips they used."""
        return {
            "id": self.utterance.id,
            "condition": self.condition,
            "duration_s": round(float(self.utterance.duration_s), 3),
        }


@dataclass(frozen=True)
class Skipped:
    """An input that was left out of a set, and why (``implausible``: it is no plausible utterance at all,
    ``workbench.config.AudioPlausibility``; ``unreadable``: its file holds no audio, ``audio.UnreadableAudio``)."""

    item: str
    reason: str
    implausible: bool = False
    unreadable: bool = False

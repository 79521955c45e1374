"""Long-form recordings from a stored set: one speaker's utterances joined into 30-120 s with natural pauses.

Utterances are grouped by speaker and condition (so a recording keeps one voice, accent and condition:
quiet, noisy or accented) in manifest order and joined until the next one would pass ``max_s``; a
recording shorter than ``min_s`` is not written (counted as skipped). Between utterances goes a pause of
``pause_s`` seconds (drawn per gap from a seeded generator): not digital silence but the noise floor of
the audio around it (Gaussian noise at the RMS of the quietest 10 % of 20 ms frames of the utterance
before it), so a noisy recording stays noisy through its pauses as a real one does. The reference text
is the utterances' texts in order; each recording's record lists its parts and pauses (``extra``).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from workbench.config import SAMPLE_RATE
from workbench.errors import WorkbenchError
from workbench.speech.records import Clip, Skipped, Utterance
from workbench.speech.store import SpeechSet, made_record, write_set


@dataclass(frozen=True)
class LongFormConfig:
    min_s: float = 30.0
    max_s: float = 120.0
    pause_s: tuple[float, float] = (0.3, 1.0)
    seed: int = 0

    def check(self) -> None:
        if not 0 < self.min_s <= self.max_s:
            raise WorkbenchError(
                f"long-form recordings need 0 < min <= max seconds, not {self.min_s}/{self.max_s}"
            )
        if not 0 <= self.pause_s[0] <= self.pause_s[1]:
            raise WorkbenchError(f"pauses need 0 <= shortest <= longest seconds, not {self.pause_s}")


def noise_floor(audio: np.ndarray, frame: int = SAMPLE_RATE // 50) -> float:
    """RMS of the quietest 10 % of 20 ms frames: the level a pause in this recording sits at."""
    audio = np.asarray(audio, dtype=np.float64)
    n = len(audio) // frame
    if n == 0:
        return float(np.sqrt(np.mean(audio**2))) if len(audio) else 0.0
    rms = np.sqrt((audio[: n * frame].reshape(n, frame) ** 2).mean(axis=1))
    return float(np.mean(np.sort(rms)[: max(1, n // 10)]))


def _groups(utts: list[Utterance]) -> dict[tuple[str, str], list[Utterance]]:
    groups: dict[tuple[str, str], list[Utterance]] = defaultdict(list)
    for utt in utts:
        groups[(utt.speaker, utt.condition)].append(utt)
    return groups


def plan_recordings(
    utts: list[Utterance], config: LongFormConfig
) -> tuple[list[list[Utterance]], list[Skipped]]:
    """Which utterances make each recording (pauses not counted: they add under a second per gap, so a
    recording is planned to leave room for them under ``max_s``)."""
    config.check()
    longest_pause = config.pause_s[1]
    plans: list[list[Utterance]] = []
    skipped: list[Skipped] = []

    def close(current: list[Utterance], length: float, where: str) -> None:
        if length >= config.min_s:
            plans.append(current)
        else:
            skipped.append(
                Skipped(where, f"{len(current)} utterances, {length:.1f} s: under {config.min_s:g} s")
            )

    for (speaker, condition), members in _groups(utts).items():
        current: list[Utterance] = []
        length = 0.0
        for utt in members:
            extra = utt.duration_s + (longest_pause if current else 0.0)
            if current and length + extra > config.max_s:
                close(current, length, f"{speaker}/{condition}")
                current, length, extra = [], 0.0, utt.duration_s
            current.append(utt)
            length += extra
        if current:
            close(current, length, f"{speaker}/{condition}")
    return plans, skipped


def join(parts: list[Clip], rng: np.random.Generator, config: LongFormConfig, number: int) -> Clip:
    """One recording from its parts, with noise-floor pauses between them."""
    first = parts[0].utterance
    pieces: list[np.ndarray] = []
    pauses: list[float] = []
    for i, part in enumerate(parts):
        if i:
            seconds = float(rng.uniform(*config.pause_s))
            level = noise_floor(parts[i - 1].audio)
            pieces.append((rng.standard_normal(int(round(seconds * SAMPLE_RATE))) * level).astype(np.float32))
            pauses.append(round(seconds, 3))
        pieces.append(np.asarray(part.audio, dtype=np.float32))
    audio = np.concatenate(pieces)
    snrs = [p.utterance.snr_db for p in parts if p.utterance.snr_db is not None]
    utt = Utterance(
        id=f"long-{first.speaker}-{first.condition}-{number:03d}",
        text=" ".join(p.utterance.text for p in parts),
        speaker=first.speaker,
        voice=first.voice,
        accent=first.accent,
        condition=first.condition,
        duration_s=round(len(audio) / SAMPLE_RATE, 3),
        source=f"long-form of {first.source}",
        snr_db=float(np.mean(snrs)) if snrs else None,
        noise_kind=first.noise_kind,
        extra={"parts": [p.utterance.id for p in parts], "pauses_s": pauses},
    )
    return Clip(utt, audio)


def build_long_form(source: SpeechSet, final: Path, config: LongFormConfig = LongFormConfig()) -> SpeechSet:
    """Write the long-form set ``final`` from ``source`` (atomically; an existing set survives a failure)."""
    plans, skipped = plan_recordings(list(source.utterances), config)
    if not plans:
        raise WorkbenchError(
            f"{source.name} has no speaker with {config.min_s:g} s of speech in one condition; pass a larger "
            "set or a shorter --min-seconds"
        )
    rng = np.random.default_rng(config.seed)
    counters: dict[tuple[str, str], int] = defaultdict(int)
    clips = []
    for plan in plans:
        key = (plan[0].speaker, plan[0].condition)
        counters[key] += 1
        clips.append(join([Clip(u, source.audio(u)) for u in plan], rng, config, counters[key]))
    made: dict[str, Any] = made_record(
        str((source.card.get("made") or {}).get("role", "eval")),
        f"long-form recordings joined from {source.name}",
        {
            "from_set": source.name,
            "from_content_hash": source.content_hash,
            "min_s": config.min_s,
            "max_s": config.max_s,
            "pause_s": list(config.pause_s),
            "seed": config.seed,
        },
    )
    checks = {"recordings": len(clips), "joined_utterances": sum(len(p) for p in plans)}
    return write_set(Path(final), clips, made, skipped, checks)

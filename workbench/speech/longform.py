"""Long-form recordings from a stored set: one speaker's utterances joined into 30-120 s at one level, with pauses.

Utterances are grouped by speaker and condition (so a recording keeps one voice, accent and condition:
quiet, noisy or accented) in manifest order and joined until the next one would pass ``max_s``; a
recording shorter than ``min_s`` is not written (counted as skipped). A set draws each utterance's level on
its own (a 20 dB range by default); a speaker in one recording keeps one, so every part is scaled to the
recording's speech level (the median of its parts' speech levels, lowered as a whole when a part would
clip). Between utterances goes a pause of ``pause_s`` seconds (drawn per gap from a seeded generator):
not digital silence but room tone, the quietest 20 ms frames of the utterance before it overlap-added in
random order, so the pause carries that utterance's own background (its noise kind and level) as a real
recording's pauses do. The reference text is the utterances' texts in order; each recording's record lists
its parts, pauses and gains (``extra``).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from workbench.config import SAMPLE_RATE
from workbench.errors import WorkbenchError
from workbench.speech.audio import rms_dbfs
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


FRAME = SAMPLE_RATE // 50  # 20 ms: the frames the noise floor and room tone are made of
PEAK_LIMIT = 0.99  # a recording's parts are scaled so none peaks above this


def _frame_rms(audio: np.ndarray, frame: int) -> np.ndarray:
    n = len(audio) // frame
    return np.sqrt((np.asarray(audio[: n * frame], dtype=np.float64).reshape(n, frame) ** 2).mean(axis=1))


def noise_floor(audio: np.ndarray, frame: int = FRAME) -> float:
    """RMS of the quietest 10 % of 20 ms frames: the level a pause in this recording sits at."""
    audio = np.asarray(audio, dtype=np.float64)
    n = len(audio) // frame
    if n == 0:
        return float(np.sqrt(np.mean(audio**2))) if len(audio) else 0.0
    return float(np.mean(np.sort(_frame_rms(audio, frame))[: max(1, n // 10)]))


def room_tone(audio: np.ndarray, samples: int, rng: np.random.Generator, frame: int = FRAME) -> np.ndarray:
    """``samples`` of the background of ``audio``: its quietest 10 % of two-frame windows, picked
    at random and overlap-added with square-root Hann windows (power-preserving), so the pause has the
    clip's own noise spectrum and about its noise-floor level. A clip under three frames gives silence."""
    audio = np.asarray(audio, dtype=np.float64)
    n = len(audio) // frame - 1  # windows of two frames that fit
    if samples <= 0 or n < 2:
        return np.zeros(max(samples, 0), dtype=np.float32)
    frames = _frame_rms(audio, frame) ** 2
    windows = np.sqrt((frames[:n] + frames[1 : n + 1]) / 2)  # RMS of each two-frame window
    quiet = np.argsort(windows)[: max(1, n // 10)]
    window = np.sqrt(np.hanning(2 * frame + 1)[:-1])  # periodic: shifted copies' squares sum to one
    hops = samples // frame + 2
    out = np.zeros((hops + 1) * frame)
    for k, pick in enumerate(rng.choice(quiet, size=hops)):
        piece = audio[pick * frame : pick * frame + 2 * frame]
        out[k * frame : k * frame + 2 * frame] += piece * window
    return out[frame : frame + samples].astype(np.float32)


def speech_level_dbfs(part: Clip) -> float:
    """The speech level of one part: as the set measured it (the speech alone, for a noisy clip), else its RMS."""
    level = part.utterance.level_dbfs
    return float(level) if level is not None else rms_dbfs(part.audio)


def part_gains(parts: list[Clip]) -> list[float]:
    """Linear gains that bring every part to the median speech level of the parts, scaled down together
    when one would peak above ``PEAK_LIMIT``."""
    levels = [speech_level_dbfs(p) for p in parts]
    target = float(np.median(levels))
    gains = [10 ** ((target - level) / 20.0) for level in levels]
    peak = max(g * float(np.max(np.abs(p.audio))) if len(p.audio) else 0.0 for g, p in zip(gains, parts))
    if peak > PEAK_LIMIT:
        gains = [g * PEAK_LIMIT / peak for g in gains]
    return gains


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
    """One recording from its parts, each at the recording's speech level, with room-tone pauses between them."""
    first = parts[0].utterance
    gains = part_gains(parts)
    scaled = [np.asarray(p.audio, dtype=np.float32) * np.float32(g) for p, g in zip(parts, gains)]
    pieces: list[np.ndarray] = []
    pauses: list[float] = []
    for i, audio in enumerate(scaled):
        if i:
            samples = int(round(float(rng.uniform(*config.pause_s)) * SAMPLE_RATE))
            pieces.append(room_tone(scaled[i - 1], samples, rng))
            pauses.append(round(samples / SAMPLE_RATE, 7))  # exact: the parts' places can be found again
        pieces.append(audio)
    audio = np.concatenate(pieces)
    snrs = [p.utterance.snr_db for p in parts if p.utterance.snr_db is not None]
    utt = Utterance(
        id=f"long-{first.speaker}-{first.condition}-{number:03d}",
        text=" ".join(p.utterance.text for p in parts if p.utterance.text),  # "" for an unlabelled set
        speaker=first.speaker,
        voice=first.voice,
        accent=first.accent,
        condition=first.condition,
        duration_s=round(len(audio) / SAMPLE_RATE, 3),
        source=f"long-form of {first.source}",
        snr_db=float(np.mean(snrs)) if snrs else None,
        noise_kind=first.noise_kind,
        level_dbfs=round(speech_level_dbfs(parts[0]) + 20 * float(np.log10(gains[0])), 3),
        extra={
            "parts": [p.utterance.id for p in parts],
            "pauses_s": pauses,
            "gains_db": [round(20 * float(np.log10(g)), 2) for g in gains],
        },
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

"""Synthetic speech source: WordNet text spoken by espeak-ng / flite / festival voices.

``synthesize_slot`` makes one utterance for one stratum slot (set role x condition x duration
bucket), deterministically from the slot's seed, so results do not depend on worker count.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from workbench.config import ConditionRanges, EngineProfile
from workbench.speech.conditions import mix_at_snr, mix_with_noise
from workbench.speech.noise_files import NoiseBank, NoiseFile
from workbench.speech.records import Clip, Skipped, Utterance
from workbench.speech.tts import Prosody, Voice, applies_prosody, synthesize

WORDS_PER_SECOND = 2.7  # espeak/flite at rate 1.0, measured on WordNet sentences
QUIET_FLOOR_NOISE = "pink"
ATTEMPTS = 8


@dataclass(frozen=True)
class Slot:
    role: str  # "calib" or "eval"
    condition: str
    bucket: str
    index: int  # index within (role, condition, bucket)
    seed: int
    draw: int = (
        0  # SetBuildConfig.draw for evaluation and dev slots (0: the seed's own; calibration slots: 0)
    )

    @property
    def key(self) -> str:
        return f"{self.role}-{self.condition}-{self.bucket}-{self.index:04d}"

    def rng(self) -> np.random.Generator:
        seed = f"{self.seed}|draw{self.draw}" if self.draw else str(self.seed)
        digest = hashlib.sha256(f"{seed}|{self.key}".encode()).digest()
        return np.random.default_rng(int.from_bytes(digest[:8], "big"))


@dataclass(frozen=True)
class SlotJob:
    slot: Slot
    voices: tuple[Voice, ...]  # candidate speakers for this slot's role and condition
    texts: tuple[str, ...]  # candidate texts, unique to this slot
    babble_voices: tuple[Voice, ...]
    babble_texts: tuple[str, ...]
    profile: EngineProfile
    ranges: ConditionRanges
    noise_files: tuple[NoiseFile, ...] = ()  # recorded noise of this slot's role (else generated noise)


def word_range(profile: EngineProfile, bucket: str) -> tuple[int, int]:
    lo, hi = {name: (a, b) for name, a, b in profile.buckets()}[bucket]
    return max(2, int(lo * WORDS_PER_SECOND)), max(3, int(hi * WORDS_PER_SECOND * 0.9))


def _choose_voice(job: SlotJob, rng: np.random.Generator) -> Voice:
    by_accent: dict[str, list[Voice]] = {}
    for voice in job.voices:
        by_accent.setdefault(voice.accent, []).append(voice)
    accents = sorted(by_accent)
    accent = accents[job.slot.index % len(accents)] if job.slot.condition == "accented" else accents[0]
    pool = by_accent[accent]
    return pool[int(rng.integers(len(pool)))]


def synthesize_slot(job: SlotJob) -> Clip | Skipped:
    """Make the utterance for ``job.slot``; tries several texts until one fits the bucket."""
    slot = job.slot
    rng = slot.rng()
    voice = _choose_voice(job, rng)
    lo, hi = {name: (a, b) for name, a, b in job.profile.buckets()}[slot.bucket]
    for text in job.texts[:ATTEMPTS]:
        prosody = Prosody(rate=float(rng.uniform(0.85, 1.2)), pitch=float(rng.uniform(35, 65)))
        speech = synthesize(voice, text, prosody)
        duration = len(speech) / 16000
        if not (lo <= duration <= hi) or job.profile.bucket_of(duration) != slot.bucket:
            continue
        return _apply_condition(job, voice, text, prosody, speech, rng)
    return Skipped(slot.key, f"no candidate text fitted bucket {slot.bucket} with {voice.speaker}")


def _apply_condition(
    job: SlotJob, voice: Voice, text: str, prosody: Prosody, speech: np.ndarray, rng: np.random.Generator
) -> Clip:
    slot, ranges = job.slot, job.ranges
    level = float(rng.uniform(*ranges.level_dbfs))
    if slot.condition == "noisy":
        kind = ranges.noise_kinds[slot.index % len(ranges.noise_kinds)]
        snr = float(rng.uniform(*ranges.noisy_snr_db))
    else:
        kind = QUIET_FLOOR_NOISE
        snr = float(rng.uniform(*ranges.quiet_snr_db))
    extra = {}
    if slot.condition == "noisy" and job.noise_files:
        noise_file, noise = NoiseBank(job.noise_files).draw(len(speech), rng)
        kind, extra["noise_file"] = noise_file.kind, noise_file.name
        mix = mix_with_noise(speech, noise, snr, level)
    else:
        others = []
        if kind == "babble":
            for k in range(4):
                bv = job.babble_voices[int(rng.integers(len(job.babble_voices)))]
                others.append(synthesize(bv, job.babble_texts[k % len(job.babble_texts)]))
        mix = mix_at_snr(speech, snr, level, kind, rng, others)
    record = Utterance(
        id=slot.key,
        text=text,
        speaker=voice.speaker,
        voice=voice.base_id,
        accent=voice.accent,
        condition=slot.condition,
        duration_s=round(len(mix.audio) / 16000, 4),
        source="synthetic",
        snr_db=round(mix.snr_db, 3),
        requested_snr_db=round(snr, 3),
        noise_kind=kind,
        level_dbfs=round(mix.level_dbfs, 3),
        bucket=slot.bucket,
        extra={
            "rate": round(prosody.rate, 3) if applies_prosody(voice) else None,
            "pitch": round(prosody.pitch, 1) if applies_prosody(voice) else None,
            "seen_in_training": voice.seen_in_training,
            **extra,
        },
    )
    return Clip(record, mix.audio)

"""The noisy condition made from clean clips: generated or recorded noise, optional reverberation.

``NoisePlan`` says where noise comes from (generated kinds, or recorded files of one set role) and
which impulse responses give the reverberant variant. ``noisy_copy`` turns a clean clip into a noisy
one (or a reverberant noisy one) at an SNR and speech level drawn from the configured ranges; the SNR
and level are measured on the mixed 16-bit signal and recorded on the utterance with where the noise
came from.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from workbench.config import NOISY_CONDITION, REVERBERANT_CONDITION, ConditionRanges
from workbench.speech.conditions import make_noise, mix_with_noise
from workbench.speech.noise_files import NoiseBank, NoiseFile, load_rir, reverberate
from workbench.speech.records import Clip
from workbench.speech.split import stable_hash


@dataclass(frozen=True)
class NoisePlan:
    """Noise for one set role: recorded ``noise_files`` if any, else generated ``ranges.noise_kinds``."""

    ranges: ConditionRanges = ConditionRanges()
    noise_files: tuple[NoiseFile, ...] = ()
    rir_files: tuple[NoiseFile, ...] = ()

    @cached_property
    def bank(self) -> NoiseBank | None:
        return NoiseBank(self.noise_files) if self.noise_files else None

    def describe(self) -> dict:
        """What the set's card records about its noise."""
        out: dict = {"snr_db": list(self.ranges.noisy_snr_db), "level_dbfs": list(self.ranges.level_dbfs)}
        if self.noise_files:
            out["noise_files"] = {f.name: f.sha256[:16] for f in self.noise_files}
        else:
            out["generated_kinds"] = list(self.ranges.noise_kinds)
        if self.rir_files:
            out["impulse_responses"] = {f.name: f.sha256[:16] for f in self.rir_files}
        return out


def clip_rng(seed: int, clip_id: str, purpose: str) -> np.random.Generator:
    """A generator fixed by the seed and the clip: results do not depend on order or worker count."""
    return np.random.default_rng(stable_hash(f"{seed}|{clip_id}|{purpose}"))


def noisy_copy(
    clip: Clip,
    plan: NoisePlan,
    rng: np.random.Generator,
    *,
    new_id: str | None = None,
    kind_index: int = 0,
    others: list[np.ndarray] | None = None,
    reverberant: bool = False,
) -> Clip:
    """The clip with noise mixed in (after convolution with an impulse response when ``reverberant``).

    Generated noise takes kind ``ranges.noise_kinds[kind_index]`` (babble needs ``others``, else
    pink); recorded noise comes from a random stretch of a random file of ``plan.noise_files``.
    """
    ranges = plan.ranges
    snr = float(rng.uniform(*ranges.noisy_snr_db))
    level = float(rng.uniform(*ranges.level_dbfs))
    speech = clip.audio
    extra = dict(clip.utterance.extra)
    fixes = list(clip.utterance.fixes)
    if reverberant:
        if not plan.rir_files:
            raise ValueError("a reverberant copy needs impulse responses in the plan")
        rir = plan.rir_files[int(rng.integers(len(plan.rir_files)))]
        speech = reverberate(speech, load_rir(rir.path))
        extra["impulse_response"] = rir.name
        fixes.append(f"convolved with impulse response {rir.name}")
    if plan.bank is not None:
        noise_file, noise = plan.bank.draw(len(speech), rng)
        kind, extra["noise_file"] = noise_file.kind, noise_file.name
        fixes.append(f"{kind} noise from {noise_file.name} mixed at {snr:.1f} dB SNR")
    else:
        kind = ranges.noise_kinds[kind_index % len(ranges.noise_kinds)]
        if kind == "babble" and not others:
            kind = "pink"
        noise = make_noise(kind, len(speech), rng, others)
        fixes.append(f"{kind} noise mixed at {snr:.1f} dB SNR")
    mix = mix_with_noise(speech, noise, snr, level)
    record = replace(
        clip.utterance,
        id=new_id or clip.utterance.id,
        condition=REVERBERANT_CONDITION if reverberant else NOISY_CONDITION,
        noise_kind=kind,
        snr_db=round(mix.snr_db, 3),
        requested_snr_db=round(snr, 3),
        level_dbfs=round(mix.level_dbfs, 3),
        fixes=fixes,
        extra=extra,
        audio="",
    )
    return Clip(record, mix.audio)

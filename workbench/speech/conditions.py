"""Speech conditions: speech level, noise kinds and mixing at a requested SNR, measured afterwards.

``mix_with_noise`` scales the clean speech to a level (dBFS), adds a noise signal at a target SNR,
and returns the mix with the SNR and level *measured* on the result (after any peak limiting);
``mix_at_snr`` does the same with generated noise of one kind. Recorded noise and room impulse
responses come from ``noise_files.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench.config import SAMPLE_RATE
from workbench.speech.audio import rms_dbfs

_EPS = 1e-12


def _coloured_noise(n: int, rng: np.random.Generator, exponent: float) -> np.ndarray:
    """Noise with power spectral density ~ 1/f**exponent (0 white, 1 pink, 2 brown)."""
    white = rng.standard_normal(n)
    if exponent == 0:
        return white
    spectrum = np.fft.rfft(white)
    freqs = np.fft.rfftfreq(n, d=1.0 / SAMPLE_RATE)
    freqs[0] = freqs[1] if n > 1 else 1.0
    spectrum /= freqs ** (exponent / 2.0)
    spectrum[0] = 0.0
    return np.fft.irfft(spectrum, n)


def hum(n: int, rng: np.random.Generator) -> np.ndarray:
    """Mains hum: 50 or 60 Hz with decaying harmonics and a little jitter."""
    base = rng.choice([50.0, 60.0])
    t = np.arange(n) / SAMPLE_RATE
    phase = rng.uniform(0, 2 * np.pi, size=6)
    out = sum((0.6**k) * np.sin(2 * np.pi * base * (k + 1) * t + phase[k]) for k in range(6))
    return out + 0.01 * rng.standard_normal(n)


def babble(n: int, rng: np.random.Generator, others: list[np.ndarray]) -> np.ndarray:
    """Several other utterances summed at random offsets (needs at least one other clip)."""
    if not others:
        raise ValueError("babble noise needs other utterances to mix")
    out = np.zeros(n)
    picks = rng.choice(len(others), size=min(len(others), int(rng.integers(3, 7))), replace=False)
    for idx in picks:
        clip = np.asarray(others[idx], dtype=np.float64)
        clip = clip / (np.sqrt(np.mean(clip**2)) + _EPS)
        reps = int(np.ceil(n / max(len(clip), 1))) + 1
        tiled = np.tile(clip, reps)
        start = int(rng.integers(0, max(len(clip), 1)))
        out += tiled[start : start + n]
    return out


def make_noise(
    kind: str, n: int, rng: np.random.Generator, others: list[np.ndarray] | None = None
) -> np.ndarray:
    if kind == "white":
        return _coloured_noise(n, rng, 0.0)
    if kind == "pink":
        return _coloured_noise(n, rng, 1.0)
    if kind == "brown":
        return _coloured_noise(n, rng, 2.0)
    if kind == "hum":
        return hum(n, rng)
    if kind == "babble":
        return babble(n, rng, others or [])
    raise ValueError(f"unknown noise kind {kind!r}; choose one of white, pink, brown, babble, hum")


@dataclass(frozen=True)
class MixResult:
    audio: np.ndarray
    snr_db: float  # measured on the mix: clean speech vs (mix - clean speech)
    level_dbfs: float  # measured RMS level of the speech component in the mix
    mix_level_dbfs: float


def measure_snr(clean: np.ndarray, mixed: np.ndarray) -> float:
    noise = mixed.astype(np.float64) - clean.astype(np.float64)
    p_clean = float(np.mean(clean.astype(np.float64) ** 2))
    p_noise = float(np.mean(noise**2))
    return 10.0 * np.log10(max(p_clean, _EPS) / max(p_noise, _EPS))


def mix_at_snr(
    speech: np.ndarray,
    snr_db: float,
    level_dbfs: float,
    noise_kind: str,
    rng: np.random.Generator,
    others: list[np.ndarray] | None = None,
    peak_limit: float = 0.99,
) -> MixResult:
    """Scale speech to ``level_dbfs``, add generated ``noise_kind`` noise at ``snr_db``."""
    noise = make_noise(noise_kind, len(speech), rng, others)
    return mix_with_noise(speech, noise, snr_db, level_dbfs, peak_limit)


def mix_with_noise(
    speech: np.ndarray, noise: np.ndarray, snr_db: float, level_dbfs: float, peak_limit: float = 0.99
) -> MixResult:
    """Scale speech to ``level_dbfs``, add ``noise`` (same length) at ``snr_db``; limit peaks by
    scaling both parts. SNR and level are measured on the 16-bit signal that will be written."""
    speech = np.asarray(speech, dtype=np.float64)
    noise = np.array(noise, dtype=np.float64)
    if noise.shape != speech.shape:
        raise ValueError(f"noise has {noise.shape} samples, speech {speech.shape}")
    gain = 10 ** ((level_dbfs - rms_dbfs(speech)) / 20.0)
    clean = speech * gain
    p_clean = np.mean(clean**2)
    p_noise = np.mean(noise**2) + _EPS
    noise *= np.sqrt(p_clean / (p_noise * 10 ** (snr_db / 10.0)))
    mixed = clean + noise
    peak = float(np.max(np.abs(mixed)))
    if peak > peak_limit:  # scale both parts: the SNR is unchanged, the level drops
        scale = peak_limit / peak
        mixed *= scale
        clean *= scale
    # FLAC stores 16 bits: measure on the quantised signal that will be written
    mixed_q = np.round(np.clip(mixed, -1, 1) * 32767) / 32767
    return MixResult(
        audio=mixed_q.astype(np.float32),
        snr_db=measure_snr(clean, mixed_q),
        level_dbfs=rms_dbfs(clean),
        mix_level_dbfs=rms_dbfs(mixed_q),
    )

"""Noise mixing: the SNR measured on the mixed (16-bit) signal is within 0.5 dB of the request for
every noise kind, and the speech level is the requested one unless peak limiting had to lower it."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.config import NOISE_KINDS, SAMPLE_RATE
from workbench.speech.audio import rms_dbfs
from workbench.speech.conditions import make_noise, measure_snr, mix_at_snr


@pytest.mark.parametrize("kind", NOISE_KINDS)
@pytest.mark.parametrize("snr_db", [0.0, 5.0, 12.5, 20.0, 35.0])
@pytest.mark.parametrize("level_dbfs", [-35.0, -15.0])
def test_measured_snr_matches_request(speech_like, kind, snr_db, level_dbfs):
    rng = np.random.default_rng(int(snr_db * 10) + len(kind))
    speech = speech_like(2.5, seed=1)
    others = [speech_like(1.0 + 0.3 * k, seed=10 + k) for k in range(5)]
    mix = mix_at_snr(speech, snr_db, level_dbfs, kind, rng, others)
    assert mix.audio.dtype == np.float32 and len(mix.audio) == len(speech)
    assert abs(mix.snr_db - snr_db) <= 0.5, (kind, snr_db, mix.snr_db)
    assert np.max(np.abs(mix.audio)) <= 0.99 + 1e-6
    # the speech component is at the requested level, or lower when peaks had to be limited
    assert mix.level_dbfs <= level_dbfs + 0.05
    if snr_db >= 5.0 and level_dbfs <= -35.0:
        assert abs(mix.level_dbfs - level_dbfs) < 0.05  # no limiting at this level


def test_measured_snr_is_honest_when_noise_is_added_afterwards(speech_like):
    """measure_snr must look at the actual mixture: doubling the noise lowers it by about 6 dB."""
    rng = np.random.default_rng(0)
    clean = speech_like(2.0) * 0.1
    noise = make_noise("white", len(clean), rng)
    noise *= np.sqrt(np.mean(clean**2) / np.mean(noise**2)) / 10  # 20 dB
    assert abs(measure_snr(clean, clean + noise) - 20.0) < 1e-6
    assert abs(measure_snr(clean, clean + 2 * noise) - (20.0 - 20 * np.log10(2))) < 1e-6


def test_noise_kinds_have_their_spectra():
    rng = np.random.default_rng(3)
    n = 4 * SAMPLE_RATE
    freqs = np.fft.rfftfreq(n, 1.0 / SAMPLE_RATE)

    def band_power(x: np.ndarray, lo: float, hi: float) -> float:
        spectrum = np.abs(np.fft.rfft(x)) ** 2
        return float(spectrum[(freqs >= lo) & (freqs < hi)].mean())

    slopes = {}
    for kind, exponent in (("white", 0), ("pink", 1), ("brown", 2)):
        x = make_noise(kind, n, rng)
        # power per octave-spaced band falls by 10*exponent*log10(f ratio)
        slopes[kind] = 10 * np.log10(band_power(x, 100, 200) / band_power(x, 3200, 6400)) / np.log10(32)
        assert abs(slopes[kind] - 10 * exponent) < 1.5, (kind, slopes[kind])
    hum = make_noise("hum", n, rng)
    spectrum = np.abs(np.fft.rfft(hum))
    assert freqs[np.argmax(spectrum)] in (50.0, 60.0)


def test_babble_needs_other_utterances_and_unknown_kind_is_refused():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="babble"):
        make_noise("babble", 100, rng, [])
    with pytest.raises(ValueError, match="unknown noise kind"):
        make_noise("rain", 100, rng)


def test_quiet_floor_keeps_level_range(speech_like):
    """Quiet speech: SNR >= 30 dB and speech level anywhere in -35..-15 dBFS is reachable."""
    for level in (-35.0, -25.0, -15.0):
        mix = mix_at_snr(speech_like(2.0, seed=4), 30.0, level, "pink", np.random.default_rng(1))
        assert mix.snr_db >= 29.5
        assert abs(mix.level_dbfs - level) < 0.05
        assert abs(rms_dbfs(mix.audio) - level) < 0.1

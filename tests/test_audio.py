"""Audio preparation: resampling keeps frequency and duration, stereo is downmixed (and recorded),
silent, empty and corrupt input is refused with a reason."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.config import SAMPLE_RATE
from workbench.speech.audio import AudioProblem, prepare, read_audio, rms_dbfs


def _sine(freq: float, seconds: float, rate: int, amplitude: float = 0.5) -> np.ndarray:
    t = np.arange(int(round(seconds * rate))) / rate
    return (amplitude * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def _peak_frequency(samples: np.ndarray, rate: int) -> float:
    window = np.hanning(len(samples))
    spectrum = np.abs(np.fft.rfft(samples * window))
    return float(np.fft.rfftfreq(len(samples), 1.0 / rate)[int(np.argmax(spectrum))])


@pytest.mark.parametrize(
    "rate,freq", [(44_100, 440.0), (8_000, 1_000.0), (22_050, 3_000.0), (48_000, 6_000.0)]
)
def test_resampling_keeps_frequency_duration_and_level(tmp_path, write_wav, rate, freq):
    seconds = 1.5
    path = write_wav(tmp_path / f"sine_{rate}.wav", _sine(freq, seconds, rate), rate)
    prepared = read_audio(path)
    assert prepared.fixes == [f"resampled {rate} Hz to {SAMPLE_RATE} Hz"]
    assert prepared.samples.dtype == np.float32 and prepared.samples.ndim == 1
    assert abs(len(prepared.samples) - seconds * SAMPLE_RATE) <= 1
    assert abs(_peak_frequency(prepared.samples, SAMPLE_RATE) - freq) < 2.0
    # away from the filter's edge effects the sine keeps its amplitude (0.5 peak -> -9.03 dBFS RMS)
    middle = prepared.samples[SAMPLE_RATE // 4 : -SAMPLE_RATE // 4]
    assert abs(rms_dbfs(middle) - 20 * np.log10(0.5 / np.sqrt(2))) < 0.2


def test_16k_input_is_left_alone(tmp_path, write_wav):
    path = write_wav(tmp_path / "sine.wav", _sine(500.0, 1.0, SAMPLE_RATE), SAMPLE_RATE, subtype="FLOAT")
    prepared = read_audio(path)
    assert prepared.fixes == []
    np.testing.assert_allclose(prepared.samples, _sine(500.0, 1.0, SAMPLE_RATE), atol=1e-6)


def test_stereo_is_downmixed_and_recorded(tmp_path, write_wav):
    left = _sine(300.0, 1.0, SAMPLE_RATE, 0.4)
    right = _sine(300.0, 1.0, SAMPLE_RATE, 0.2)
    path = write_wav(tmp_path / "stereo.wav", np.stack([left, right], axis=1), SAMPLE_RATE, subtype="FLOAT")
    prepared = read_audio(path)
    assert "downmixed 2 channels to mono" in prepared.fixes
    np.testing.assert_allclose(prepared.samples, (left + right) / 2, atol=1e-6)


def test_silent_audio_is_refused(tmp_path, write_wav):
    path = write_wav(tmp_path / "silent.wav", np.zeros(SAMPLE_RATE, dtype=np.float32))
    with pytest.raises(AudioProblem, match="silent"):
        read_audio(path)
    with pytest.raises(AudioProblem, match="silent"):
        prepare(np.full(SAMPLE_RATE, 1e-5, dtype=np.float32), SAMPLE_RATE)  # -100 dBFS hiss


def test_corrupt_and_empty_input_is_refused(tmp_path):
    corrupt = tmp_path / "corrupt.wav"
    corrupt.write_bytes(b"RIFF\x00\x00\x00\x00WAVEthis is not audio at all")
    with pytest.raises(AudioProblem, match="unreadable or corrupt"):
        read_audio(corrupt)
    with pytest.raises(AudioProblem, match="unreadable or corrupt"):
        read_audio(b"\x00\x01\x02 garbage bytes")
    with pytest.raises(AudioProblem, match="empty audio"):
        prepare(np.zeros(0, dtype=np.float32), SAMPLE_RATE)
    with pytest.raises(AudioProblem, match="NaN"):
        prepare(np.array([0.1, np.nan, 0.2], dtype=np.float32), SAMPLE_RATE)


def test_clipping_peak_is_scaled_and_recorded():
    loud = _sine(200.0, 1.0, SAMPLE_RATE, 2.0)
    prepared = prepare(loud, SAMPLE_RATE)
    assert any(f.startswith("scaled down clipping peak") for f in prepared.fixes)
    assert np.max(np.abs(prepared.samples)) <= 1.0

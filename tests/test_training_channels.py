"""The demo model's training augmentations: speed, room reverberation and telephone band."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from training.channels import SAMPLE_RATE, reverberate, room_response, speed_perturb, telephone_band  # noqa: E402


def _tones(freqs_hz: list[float], seconds: float = 1.0) -> torch.Tensor:
    t = torch.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    return sum(torch.sin(2 * math.pi * f * t) for f in freqs_hz)[None, :]


def _band_energy(x: torch.Tensor, lo: float, hi: float) -> float:
    spectrum = torch.fft.rfft(x[0]).abs() ** 2
    freqs = torch.fft.rfftfreq(x.shape[1], d=1 / SAMPLE_RATE)
    return float(spectrum[(freqs >= lo) & (freqs <= hi)].sum())


def test_speed_perturb_shortens_and_keeps_padding_zero() -> None:
    x = torch.zeros(2, 16000)
    x[0, :16000] = 1.0
    x[1, :8000] = 1.0
    lens = torch.tensor([16000, 8000])
    y, new_lens = speed_perturb(x, lens, 1.25)
    assert y.shape[1] == 12800
    assert new_lens.tolist() == [12800, 6400]
    assert float(y[1, 6400:].abs().sum()) == 0.0


def test_telephone_band_keeps_speech_band_and_drops_the_rest() -> None:
    x = _tones([100.0, 1000.0, 6000.0])
    y = telephone_band(x, torch.tensor([x.shape[1]]), torch.tensor([True]))
    assert _band_energy(y, 900, 1100) > 0.5 * _band_energy(x, 900, 1100)
    assert _band_energy(y, 50, 150) < 1e-3 * _band_energy(x, 50, 150)
    assert _band_energy(y, 5900, 6100) < 1e-2 * _band_energy(x, 5900, 6100)


def test_unchosen_rows_are_untouched() -> None:
    x = torch.randn(2, 4000)
    lens = torch.tensor([4000, 4000])
    chosen = torch.tensor([False, True])
    for y in (telephone_band(x, lens, chosen), reverberate(x, lens, chosen, (0.3, 0.5))):
        assert torch.equal(y[0], x[0])
        assert not torch.equal(y[1], x[1])


def test_room_response_decays_by_its_rt60() -> None:
    torch.manual_seed(0)
    rt60 = torch.tensor([0.4])
    response = room_response(rt60, SAMPLE_RATE)[0]
    window = int(0.05 * SAMPLE_RATE)
    early = float(response[100 : 100 + window].pow(2).mean())
    at_rt60 = float(response[int(0.4 * SAMPLE_RATE) : int(0.4 * SAMPLE_RATE) + window].pow(2).mean())
    drop_db = 10 * math.log10(early / at_rt60)
    assert 50 < drop_db < 70  # 60 dB in RT60 seconds, give or take the noise of one draw

"""Channel augmentations for training on the GPU: speed, room reverberation and telephone band.

Each function takes a padded batch ``x`` (batch, samples) of 16 kHz audio with valid lengths ``lens`` and
changes a random share of its rows; padding stays zero. Speed perturbation resamples the whole batch by one
factor (pitch and tempo together, like ``sox speed``) and returns the new lengths. Reverberation convolves
with a synthetic room response: a direct path, then exponentially decaying noise whose decay gives the drawn
RT60. The telephone band is an 8 kHz round trip: band-pass 300-3,400 Hz and 8-bit mu-law companding.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

SAMPLE_RATE = 16000


def _valid_mask(lens: torch.Tensor, width: int) -> torch.Tensor:
    return (torch.arange(width, device=lens.device)[None, :] < lens[:, None]).float()


def speed_perturb(x: torch.Tensor, lens: torch.Tensor, factor: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Play the batch ``factor`` times faster (``factor`` > 1 shortens it)."""
    if abs(factor - 1.0) < 1e-3:
        return x, lens
    width = max(1, int(round(x.shape[1] / factor)))
    y = F.interpolate(x[:, None, :], size=width, mode="linear", align_corners=False)[:, 0]
    new_lens = torch.clamp(torch.round(lens.float() / factor).long(), 1, width)
    return y * _valid_mask(new_lens, width), new_lens


def room_response(
    rt60_s: torch.Tensor, length: int, generator: torch.Generator | None = None
) -> torch.Tensor:
    """One impulse response per row: unit direct path, then noise decaying 60 dB in ``rt60_s`` seconds."""
    t = torch.arange(length, device=rt60_s.device)[None, :] / SAMPLE_RATE
    decay = torch.exp(-6.9078 * t / rt60_s[:, None])  # ln(1000): 60 dB of amplitude
    tail = torch.randn(rt60_s.shape[0], length, device=rt60_s.device, generator=generator) * decay
    tail[:, : int(0.002 * SAMPLE_RATE)] = 0.0  # the first reflections arrive after the direct path
    tail = tail / (tail.norm(dim=1, keepdim=True) + 1e-9) * 0.8
    tail[:, 0] = 1.0
    return tail


def reverberate(
    x: torch.Tensor, lens: torch.Tensor, chosen: torch.Tensor, rt60_range: tuple[float, float]
) -> torch.Tensor:
    """Convolve the rows where ``chosen`` is true with a room response; the tail is cut at the row's end."""
    if not bool(chosen.any()):
        return x
    rows = x[chosen]
    rt60 = torch.empty(rows.shape[0], device=x.device).uniform_(*rt60_range)
    length = int(SAMPLE_RATE * min(1.0, rt60_range[1]))
    response = room_response(rt60, length)
    n = rows.shape[1] + length
    size = 1 << math.ceil(math.log2(n))
    wet = torch.fft.irfft(torch.fft.rfft(rows, size) * torch.fft.rfft(response, size), size)[
        :, : rows.shape[1]
    ]
    out = x.clone()
    out[chosen] = wet * _valid_mask(lens[chosen], rows.shape[1])
    return out


def telephone_band(x: torch.Tensor, lens: torch.Tensor, chosen: torch.Tensor) -> torch.Tensor:
    """An 8 kHz telephone round trip for the chosen rows: 300-3,400 Hz band and 8-bit mu-law."""
    if not bool(chosen.any()):
        return x
    rows = x[chosen]
    spectrum = torch.fft.rfft(rows, dim=1)
    freqs = torch.fft.rfftfreq(rows.shape[1], d=1 / SAMPLE_RATE).to(x.device)
    spectrum = spectrum * ((freqs >= 300) & (freqs <= 3400)).float()[None, :]
    band = torch.fft.irfft(spectrum, n=rows.shape[1], dim=1)
    peak = band.abs().amax(dim=1, keepdim=True) + 1e-9
    scaled = band / peak
    mu = 255.0
    companded = torch.sign(scaled) * torch.log1p(mu * scaled.abs()) / math.log1p(mu)
    quantised = torch.round((companded + 1) * 127.5) / 127.5 - 1
    expanded = torch.sign(quantised) * ((1 + mu) ** quantised.abs() - 1) / mu
    out = x.clone()
    out[chosen] = expanded * peak * _valid_mask(lens[chosen], rows.shape[1])
    return out

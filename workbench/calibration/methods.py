"""Range methods: turn a tensor's statistics into the symmetric ``amax`` of its INT8 scale.

- ``max``: the largest |x| seen.
- ``percentile``: the histogram edge below which ``percentile`` % of |x| lies.
- ``mse``: the candidate amax (bin edges) minimising the expected squared INT8 error, from bin centres.
- ``entropy``: TensorRT's KL-divergence search (GTC 2017, "8-bit Inference with TensorRT"):
  for every threshold bin i in 128..2048, P = hist[:i] with the tail folded into bin i-1, Q = hist[:i]
  merged into 128 levels and expanded back over P's non-zero bins, pick the i with minimal
  KL(P||Q); amax = upper edge of bin i-1, i.e. i * bin_width. Zero-probability bins are smoothed
  with a small epsilon (the public MXNet/TVM reimplementations do the same).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench.calibration.collectors import Histogram
from workbench.errors import WorkbenchError

QUANT_LEVELS = 128
METHODS = ("entropy", "max", "percentile", "mse")


@dataclass(frozen=True)
class MethodSpec:
    name: str = "entropy"
    percentile: float = 99.99
    bins: int = 2048

    def __post_init__(self) -> None:
        if self.name not in METHODS:
            raise WorkbenchError(f"unknown calibration method {self.name!r}; choose one of {', '.join(METHODS)}")
        if not (50.0 < self.percentile <= 100.0):
            raise WorkbenchError(f"percentile must be in (50, 100], got {self.percentile}")
        if self.bins < QUANT_LEVELS:
            raise WorkbenchError(f"need at least {QUANT_LEVELS} histogram bins, got {self.bins}")

    def params(self) -> dict[str, float | int | str]:
        out: dict[str, float | int | str] = {"method": self.name, "bins": self.bins}
        if self.name == "percentile":
            out["percentile"] = self.percentile
        return out


def _smooth(dist: np.ndarray, eps: float = 1e-4) -> np.ndarray:
    is_zero = dist == 0
    n_zero = int(is_zero.sum())
    n_nonzero = dist.size - n_zero
    if n_nonzero == 0:
        return dist
    take = eps * n_zero / n_nonzero
    return dist + eps * is_zero - take * (~is_zero)


def kl_divergence(p: np.ndarray, q: np.ndarray) -> float:
    p = _smooth(p / p.sum())
    q = _smooth(q / q.sum())
    mask = p > 0
    if np.any(q[mask] <= 0):
        return float("inf")
    return float(np.sum(p[mask] * np.log(p[mask] / q[mask])))


def entropy_threshold_bin(counts: np.ndarray, levels: int = QUANT_LEVELS) -> int:
    """The threshold bin index i (exclusive upper bin count) with minimal KL(P||Q)."""
    counts = counts.astype(np.float64)
    n = len(counts)
    tail = np.concatenate([np.cumsum(counts[::-1])[::-1], [0.0]])  # tail[i] = sum(counts[i:])
    best_i, best_kl = n, float("inf")
    for i in range(levels, n + 1):
        sliced = counts[:i]
        p = sliced.copy()
        p[i - 1] += tail[i]
        if p.sum() == 0:
            continue
        nonzero = p != 0
        merged = i // levels
        starts = np.arange(levels) * merged  # the last level also takes the remainder bins
        lengths = np.diff(np.append(starts, i))
        sums = np.add.reduceat(sliced, starts)
        norms = np.add.reduceat(nonzero.astype(np.float64), starts)
        per_bin = np.divide(sums, norms, out=np.zeros(levels), where=norms > 0)
        q = np.repeat(per_bin, lengths)
        q[~nonzero] = 0.0
        if q.sum() == 0:
            continue
        kl = kl_divergence(p, q)
        if kl < best_kl:
            best_kl, best_i = kl, i
    return best_i


def entropy_amax(hist: Histogram) -> float:
    return entropy_threshold_bin(hist.counts) * hist.bin_width


def percentile_amax(hist: Histogram, percentile: float) -> float:
    cumulative = np.cumsum(hist.counts) / max(1, hist.counts.sum())
    index = int(np.searchsorted(cumulative, percentile / 100.0))
    return float(min(index + 1, hist.bins) * hist.bin_width)


def mse_amax(hist: Histogram, candidates: int = 256) -> float:
    centres = (np.arange(hist.bins) + 0.5) * hist.bin_width
    counts = hist.counts.astype(np.float64)
    best, best_err = hist.range_max, float("inf")
    for k in range(1, candidates + 1):
        amax = hist.range_max * k / candidates
        scale = amax / 127.0
        quantised = np.minimum(np.round(centres / scale), 127) * scale
        err = float(np.sum(counts * (centres - quantised) ** 2))
        if err < best_err:
            best, best_err = amax, err
    return best


def compute_amax(spec: MethodSpec, max_value: float, hist: Histogram | None) -> float:
    """amax for one tensor; falls back to ``max_value`` when the tensor was all zeros."""
    if spec.name == "max" or hist is None or hist.counts.sum() == 0:
        return max_value
    if spec.name == "entropy":
        return entropy_amax(hist)
    if spec.name == "percentile":
        return percentile_amax(hist, spec.percentile)
    return mse_amax(hist)

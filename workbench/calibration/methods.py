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
from scipy.special import xlogy

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
        if self.bins < QUANT_LEVELS or self.bins & (self.bins - 1):
            raise WorkbenchError(f"histogram bins must be a power of two >= {QUANT_LEVELS}, got {self.bins}")

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


def _kl_block(counts: np.ndarray, candidates: np.ndarray, levels: int, eps: float = 1e-4) -> np.ndarray:
    """KL(P||Q) for a block of candidate threshold bins at once (inf where undefined).

    Same quantity as the one-candidate-at-a-time definition, computed with per-level constants:
    within a merged level every non-zero bin of Q has the same value, so
    ``sum p~ log(p~/q~) = sum p~ log p~ - sum_levels log(q~_level) * sum_{bins in level} p~``.
    """
    width = int(candidates.max())
    rows = np.arange(len(candidates))
    tail = np.concatenate([np.cumsum(counts[::-1])[::-1], [0.0]])  # tail[i] = sum(counts[i:])
    total = tail[0]
    k = np.arange(width)[None, :]
    inside = k < candidates[:, None]
    p = np.where(inside, counts[None, :width], 0.0)
    p[rows, candidates - 1] += tail[candidates]  # outliers folded into the last bin of P
    # P's non-zero bins and smoothing: p~ = p/N - t_p on non-zero bins, eps on zero bins (those add 0)
    nz_csum = np.concatenate([[0.0], np.cumsum(counts != 0)])
    last_fill = ((counts[candidates - 1] == 0) & (tail[candidates] != 0)).astype(np.float64)
    nz_p = nz_csum[candidates] + last_fill
    t_p = eps * (candidates - nz_p) / nz_p
    # p~ > 0 only on non-zero bins inside the candidate (t_p >= 0), so max(p~, 0) keeps exactly the valid terms
    p_valid = np.maximum(p / total - t_p[:, None], 0.0)
    self_term = xlogy(p_valid, p_valid).sum(axis=1)
    # Q: the sliced histogram (tail not folded) merged into levels, spread over P's non-zero bins
    merged = candidates // levels
    starts = np.arange(levels)[None, :] * merged[:, None]
    stops = np.concatenate([starts[:, 1:], candidates[:, None]], axis=1)
    csum = np.concatenate([[0.0], np.cumsum(counts)])
    sums = csum[stops] - csum[starts]
    nz_level = nz_csum[stops] - nz_csum[starts]
    nz_level[:, -1] += last_fill
    q_total = np.where(nz_level > 0, sums, 0.0).sum(axis=1)
    q_nonzero = (sums > 0) & (nz_level > 0)
    nz_q = np.where(q_nonzero, nz_level, 0.0).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        t_q = eps * (candidates - nz_q) / nz_q
        q_level = np.where(q_nonzero, sums / nz_level / q_total[:, None] - t_q[:, None], eps)
    # sum of valid p~ per level, from a running sum along the bins
    run = np.concatenate([np.zeros((len(candidates), 1)), np.cumsum(p_valid, axis=1)], axis=1)
    p_level = np.take_along_axis(run, stops, axis=1) - np.take_along_axis(run, starts, axis=1)
    used = p_level > 0
    bad = np.any(used & (q_level <= 0), axis=1) | (q_total <= 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        cross = np.where(used, np.log(np.where(used & (q_level > 0), q_level, 1.0)) * p_level, 0.0).sum(axis=1)
    kl = self_term - cross
    kl[bad] = np.inf
    return kl


def entropy_divergences(counts: np.ndarray, levels: int = QUANT_LEVELS, block: int = 32) -> np.ndarray:
    """KL(P||Q) for every candidate threshold bin i = levels..len(counts) (index 0 is i = levels)."""
    counts = np.asarray(counts, dtype=np.float64)
    candidates = np.arange(levels, len(counts) + 1)
    return np.concatenate([_kl_block(counts, candidates[s:s + block], levels)
                           for s in range(0, len(candidates), block)])


def entropy_threshold_bin(counts: np.ndarray, levels: int = QUANT_LEVELS) -> int:
    """The threshold bin count i (P = bins[:i]) with minimal KL(P||Q); the first on ties."""
    divergences = entropy_divergences(counts, levels)
    if not np.isfinite(divergences).any():
        return len(counts)
    return int(np.argmin(divergences)) + levels


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

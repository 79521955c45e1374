"""Entropy (KL-divergence) threshold search, choosing exactly what NVIDIA's reference chooses.

NVIDIA's public implementation of TensorRT's entropy calibration is ``_compute_amax_entropy`` in
ModelOpt (``modelopt/torch/quantization/calib/histogram.py``, the code of the older
pytorch-quantization tool). Given a histogram of |x| (``counts``) and its bin edges, its rules are:

- the first bin (|x| near 0, e.g. the zeros after a ReLU) is given the count of the second bin;
- for every candidate i = 128 .. bins: P = counts[:i] with the tail counts[i:] added to bin i-1;
  Q = counts[:i] *without* the tail, bin j belonging to level ``floor(128 j / i)`` (levels of
  unequal width when 128 does not divide i), each level's count spread evenly over its non-zero
  bins, zero bins staying zero; no smoothing, so a P bin without Q mass (bin i-1 empty while the
  tail is not) makes the divergence infinite;
- both normalised, KL(P || Q) as ``scipy.stats.entropy`` computes it (``scipy.special.rel_entr``
  terms, summed); a candidate whose Q is empty (counts[:i] all zero) gives NaN;
- the winner is numpy's ``argmin`` over the divergences read from the last candidate backwards:
  a NaN candidate beats every number (the last NaN wins), otherwise the smallest divergence,
  the largest candidate among equal ones;
- amax = bin edge i (the upper edge of bin i-1).

A literal loop over candidates costs about 2 s per 2048-bin histogram. Here every candidate's
divergence comes from prefix sums and one table per histogram (``divergences``). Its float rounding
differs from the reference's, so the candidates within ``TIE_TOLERANCE`` of the minimum (usually
one; many only for degenerate histograms whose divergences tie exactly) are evaluated again with the
reference's own arithmetic (``reference_divergence``) and the reference's tie rule decides among
them. The chosen bin is the reference's, bit for bit, not merely close to it.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

LEVELS = 128  # 8-bit signed: 128 magnitude levels
SEARCH = "modelopt-reference/1"  # recorded with the method: which entropy rules chose the thresholds
# Candidates whose fast divergence lies within this of the fast minimum are re-evaluated with the
# reference's arithmetic. The fast path's error is below 1e-11 for any histogram of fewer than 2**53
# values (prefix sums of at most a few thousand terms of size <= log N); the margin is 100x that.
TIE_TOLERANCE = 1e-9


def reference_counts(counts: np.ndarray) -> np.ndarray:
    """int64 copy of ``counts`` with the reference's zero-bin rule applied (bin 0 := bin 1)."""
    bins = np.array(counts, dtype=np.int64)
    if bins.ndim != 1 or len(bins) < 2:
        raise ValueError(f"need a 1-D histogram of at least 2 bins, got shape {bins.shape}")
    if np.any(bins < 0):
        raise ValueError("histogram counts must be non-negative")
    bins[0] = bins[1]
    return bins


@lru_cache(maxsize=4)
def _plan(bins: int, levels: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Candidates i = levels..bins and, per candidate and level, the flat index ``start * width_max +
    width - 1`` of the level's bin range into a per-histogram table (shared by all histograms of
    ``bins`` bins). A level spans ceil(l i / levels) .. ceil((l + 1) i / levels), so its width is
    floor or ceil of i / levels: only ``bins * width_max`` distinct ranges exist over all candidates."""
    candidates = np.arange(levels, bins + 1)
    starts = (np.arange(levels + 1)[None, :] * candidates[:, None] + levels - 1) // levels
    width_max = -(-bins // levels)
    index = starts[:, :-1] * width_max + np.diff(starts, axis=1) - 1
    index.flags.writeable = False
    candidates.flags.writeable = False
    return candidates, index, width_max


def _xlogx(v: np.ndarray) -> np.ndarray:
    """v * log(v) elementwise, 0 where v == 0 (v >= 0)."""
    return v * np.log(np.where(v > 0, v, 1.0))


def divergences(counts: np.ndarray, levels: int = LEVELS) -> tuple[np.ndarray, np.ndarray]:
    """(candidates, KL(P||Q) per candidate), vectorised over candidates (see the module docstring).

    Inf / NaN where the reference gives inf / NaN. With N the total count, Z = sum(counts[:i]),
    T = N - Z the tail, S_l / c_l the count / non-zero bins of level l, b' = counts[i-1] + T:
    ``KL = [sum_{j<i-1} b_j log b_j + b' log b' - sum_l S_l log(S_l / c_l) - T log(S_last / c_last)] / N
    - log N + log Z``. ``S log(S / c)`` is tabulated once per (level start, width); each candidate
    then costs one gather and one sum over its levels.
    """
    bins = reference_counts(counts)
    n = len(bins)
    if n < levels:
        raise ValueError(f"an entropy search over {levels} levels needs at least {levels} bins, got {n}")
    candidates, index, width_max = _plan(n, levels)
    cumulative = np.concatenate([[0], np.cumsum(bins)])
    total = int(cumulative[-1])
    if total == 0:
        return candidates, np.full(len(candidates), np.nan)
    nonzero = np.concatenate([[0], np.cumsum(bins != 0)])
    start = np.arange(n)[:, None]
    end = np.minimum(start + np.arange(1, width_max + 1)[None, :], n)
    level_sum = (cumulative[end] - cumulative[start]).astype(np.float64)
    log_mean = np.log(np.maximum(level_sum, 1.0)) - np.log(np.maximum(nonzero[end] - nonzero[start], 1))
    flat_log_mean = log_mean.ravel()
    cross = np.take((level_sum * log_mean).ravel(), index).sum(axis=1)
    head = cumulative[candidates]
    tail = total - head
    cross += tail * flat_log_mean[index[:, -1]]
    last = bins[candidates - 1]
    self_terms = np.concatenate([[0.0], np.cumsum(_xlogx(bins.astype(np.float64)))])
    with np.errstate(divide="ignore"):
        kl = (self_terms[candidates - 1] + _xlogx((last + tail).astype(np.float64)) - cross) / total
        kl += np.log(head.astype(np.float64)) - np.log(float(total))
    kl[(last == 0) & (tail > 0)] = np.inf
    kl[head == 0] = np.nan
    return candidates, kl


def reference_divergence(bins: np.ndarray, i: int, levels: int = LEVELS) -> float:
    """One candidate's divergence with the reference's arithmetic (same operands, same operations).

    ``bins`` has the zero-bin rule applied already (``reference_counts``). Level sums are sums of
    integers (exact), each non-zero bin of Q gets its level's sum divided by its non-zero bin count,
    both distributions are divided by their own float sums, and the ``rel_entr`` terms are summed by
    numpy; the same steps, on the same arrays, as the reference and ``scipy.stats.entropy``.
    """
    from scipy.special import rel_entr  # only for near-ties; importing scipy costs half a second

    head = bins[:i]
    level = (np.arange(i) * levels) // i
    keep = head != 0
    sums = np.bincount(level[keep], weights=head[keep], minlength=levels)
    count = np.bincount(level[keep], minlength=levels)
    q = np.zeros(i, dtype=np.float64)
    q[keep] = sums[level[keep]] / count[level[keep]]
    p = head.copy()
    p[-1] += bins[i:].sum()
    p = p.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return float(np.sum(rel_entr(p / np.sum(p), q / np.sum(q))))


def threshold_bin(counts: np.ndarray, levels: int = LEVELS) -> int:
    """The reference's chosen candidate i (amax = bin edge i)."""
    candidates, kl = divergences(counts, levels)
    nan = np.flatnonzero(np.isnan(kl))
    if len(nan):
        return int(candidates[nan[-1]])
    finite = np.isfinite(kl)
    if not finite.any():
        return int(candidates[-1])
    near = np.flatnonzero(finite & (kl <= kl[finite].min() + TIE_TOLERANCE))
    if len(near) == 1:
        return int(candidates[near[0]])
    bins = reference_counts(counts)
    exact = np.array([reference_divergence(bins, int(candidates[k]), levels) for k in near])
    return int(candidates[near[len(exact) - 1 - int(np.argmin(exact[::-1]))]])


def threshold(counts: np.ndarray, edges: np.ndarray, levels: int = LEVELS) -> float:
    """amax the reference gives for this histogram: ``edges[threshold_bin(counts)]``."""
    edges = np.asarray(edges)
    if len(edges) != len(counts) + 1:
        raise ValueError(f"{len(counts)} bins need {len(counts) + 1} edges, got {len(edges)}")
    return float(edges[threshold_bin(counts, levels)])

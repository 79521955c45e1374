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
SMOOTHING = 1e-4  # epsilon given to empty bins (as in the public MXNet/TVM reimplementations)
_TINY = np.finfo(np.float64).tiny
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


def _xlogx(v: np.ndarray) -> np.ndarray:
    """v * log(v) elementwise with 0 * log(0) = 0 (v >= 0)."""
    out = np.fmax(v, _TINY)
    np.log(out, out=out)
    out *= v
    return out


def _head_terms(x: np.ndarray, t: np.ndarray, m: int, levels: int, rows: int = 32) -> tuple[np.ndarray, np.ndarray]:
    """For the shared first ``levels - 1`` levels of ``m`` bins: sum of p~ log p~ and sum of p~ per level.

    ``x`` holds bins ``0 .. (levels-1)*m - 1`` as fractions of the total, ``t`` the smoothing offsets
    (one per candidate, all > 0). p~ = x - t where that is > 0; other bins add nothing. Bins below
    the smallest ``t`` are kept by no candidate and are dropped before the per-candidate work.
    """
    cols = np.flatnonzero(x > t.min())
    level_of = cols // m
    starts = np.searchsorted(level_of, np.arange(levels - 1))
    empty = np.bincount(level_of, minlength=levels - 1) == 0
    xc = x[cols]
    self_term = np.empty(len(t))
    per_level = np.zeros((len(t), levels - 1))
    if len(cols) == 0:
        self_term[:] = 0.0
        return self_term, per_level
    buf = np.empty((min(rows, len(t)), len(cols) + 1))
    buf[:, -1] = 0.0  # reduceat needs every start index to be valid
    logs = np.empty_like(buf)
    for s in range(0, len(t), rows):
        b, l = buf[: len(t[s:s + rows])], logs[: len(t[s:s + rows])]
        v = b[:, :-1]
        np.subtract(xc[None, :], t[s:s + rows, None], out=v)
        np.fmax(v, 0.0, out=v)
        sums = np.add.reduceat(b, starts, axis=1)
        sums[:, empty] = 0.0
        per_level[s:s + rows] = sums
        np.fmax(b, _TINY, out=l)
        np.log(l, out=l)
        self_term[s:s + rows] = np.einsum("ij,ij->i", b, l)
    return self_term, per_level


def _kl_group(counts: np.ndarray, prefix: "_Prefix", m: int, candidates: np.ndarray, levels: int,
              eps: float) -> np.ndarray:
    """KL(P||Q) for the candidates i with ``i // levels == m``: their first ``levels - 1`` levels coincide.

    Terms follow the published definition (see the module docstring): P = counts[:i] with the tail
    folded into bin i-1, smoothed to p~ = p/N - t_p on its non-zero bins and eps on its zero bins;
    Q = counts[:i] merged into ``levels`` levels, spread evenly over P's non-zero bins of each level,
    smoothed the same way. Zero bins of P are zero bins of Q too (eps against eps: they add 0), and
    within a level every non-zero bin of Q has the same q~, so
    ``KL = sum p~ log p~ - sum_levels log(q~_level) * (sum of p~ over the level)``.
    """
    i = candidates
    base = (levels - 1) * m  # first bin of the last level
    p_last = counts[i - 1] + prefix.tail[i]  # outliers folded into the last bin of P
    last_nz = (p_last != 0).astype(np.float64)
    nz_p = prefix.nonzero[i - 1] + last_nz
    t_p = eps * (i - nz_p) / nz_p
    head = counts[:base].reshape(levels - 1, m)
    width = int(i.max()) - base
    before_last = np.arange(width)[None, :] < (i - 1 - base)[:, None]  # last level, bins base..i-2
    sums = np.empty((len(i), levels))
    sums[:, :-1] = head.sum(axis=1)
    sums[:, -1] = np.where(before_last, counts[base:base + width], 0.0).sum(axis=1) + counts[i - 1]
    nz_level = np.empty((len(i), levels))
    nz_level[:, :-1] = (head != 0).sum(axis=1)
    nz_level[:, -1] = prefix.nonzero[i - 1] - prefix.nonzero[base] + last_nz
    # P~: kept where p~ > 0
    self_term = np.empty(len(i))
    p_level = np.empty((len(i), levels))
    x_head = prefix.fraction[:base]
    flat = t_p == 0  # no zero bin in P: p~ = p/N, the same head for every such candidate
    if flat.any():
        self_term[flat] = _xlogx(x_head).sum()
        p_level[flat, :-1] = np.add.reduceat(x_head, np.arange(0, base, m))
    rows = np.flatnonzero(~flat)
    if len(rows):
        self_term[rows], p_level[rows, :-1] = _head_terms(x_head, t_p[rows], m, levels)
    region = np.where(before_last, np.maximum(prefix.fraction[None, base:base + width] - t_p[:, None], 0.0), 0.0)
    v_last = np.maximum(p_last / prefix.tail[0] - t_p, 0.0) * last_nz
    self_term += _xlogx(region).sum(axis=1) + _xlogx(v_last)
    p_level[:, -1] = region.sum(axis=1) + v_last
    # Q~ per level; log(q~) is clamped where no p~ uses it (p~ = 0 there, so the term is 0)
    q_nonzero = (sums > 0) & (nz_level > 0)
    q_total = np.where(nz_level > 0, sums, 0.0).sum(axis=1)
    nz_q = np.where(q_nonzero, nz_level, 0.0).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        t_q = eps * (i - nz_q) / nz_q
        q_level = sums / nz_level
        q_level /= q_total[:, None]
        q_level -= t_q[:, None]
    q_level[~q_nonzero] = eps
    bad = np.any((q_level <= 0) & (p_level > 0), axis=1) | (q_total <= 0)
    np.fmax(q_level, _TINY, out=q_level)
    cross = np.einsum("ij,ij->i", p_level, np.log(q_level, out=q_level))
    kl = self_term - cross
    kl[bad] = np.inf
    return kl


@dataclass(frozen=True)
class _Prefix:
    """Per-histogram arrays shared by all candidate groups."""

    tail: np.ndarray      # tail[i] = sum(counts[i:]), tail[0] = N
    nonzero: np.ndarray   # nonzero[i] = number of non-zero bins in counts[:i]
    fraction: np.ndarray  # counts / N

    @classmethod
    def of(cls, counts: np.ndarray) -> "_Prefix":
        tail = np.concatenate([np.cumsum(counts[::-1])[::-1], [0.0]])
        nonzero = np.concatenate([[0.0], np.cumsum(counts != 0)])
        return cls(tail, nonzero, counts / tail[0])


def entropy_divergences(counts: np.ndarray, levels: int = QUANT_LEVELS, eps: float = SMOOTHING) -> np.ndarray:
    """KL(P||Q) for every candidate threshold bin i = levels..len(counts) (index 0 is i = levels).

    Candidates are processed in groups of equal level width ``i // levels``, whose first
    ``levels - 1`` levels span the same bins; the per-candidate work is then one subtraction, one
    log and two sums per bin that some candidate of the group keeps.
    """
    counts = np.asarray(counts, dtype=np.float64)
    prefix = _Prefix.of(counts)
    candidates = np.arange(levels, len(counts) + 1)
    width = candidates // levels
    return np.concatenate([_kl_group(counts, prefix, int(m), candidates[width == m], levels, eps)
                           for m in np.unique(width)])


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

"""Percentile bootstrap intervals for corpus WER and for paired WER deltas.

WER is a ratio of sums, so resampling works on per-block sums of errors and reference words. A block
is one speaker when speakers are known (speaker-block bootstrap: utterances of one speaker are not
independent), otherwise one utterance. A paired delta resamples the same blocks for both systems.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

UNKNOWN_SPEAKERS = frozenset({"", "unknown", "none", "-"})


@dataclass(frozen=True)
class Interval:
    """A point estimate with its percentile-bootstrap interval."""

    estimate: float
    low: float
    high: float
    level: float
    resamples: int
    unit: str  # "speaker" or "utterance"
    blocks: int

    def to_json(self) -> dict:
        return asdict(self)


def blocks_for(speakers: Sequence[str] | None) -> tuple[np.ndarray, str]:
    """Block index per utterance and the unit: speakers if at least two are known, else utterances."""
    if (
        speakers is not None
        and len(speakers)
        and not any(s.strip().lower() in UNKNOWN_SPEAKERS for s in speakers)
    ):
        names = sorted(set(speakers))
        if len(names) >= 2:
            index = {n: i for i, n in enumerate(names)}
            return np.array([index[s] for s in speakers], dtype=np.int64), "speaker"
    n = 0 if speakers is None else len(speakers)
    return np.arange(n, dtype=np.int64), "utterance"


def _block_counts(n_blocks: int, resamples: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.multinomial(n_blocks, np.full(n_blocks, 1.0 / n_blocks), size=resamples).astype(np.float64)


def _sums(values: np.ndarray, blocks: np.ndarray, n_blocks: int) -> np.ndarray:
    return np.bincount(blocks, weights=values.astype(np.float64), minlength=n_blocks)


def _percentiles(samples: np.ndarray, level: float) -> tuple[float, float]:
    samples = samples[np.isfinite(samples)]
    if samples.size == 0:
        return float("nan"), float("nan")
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(samples, [alpha, 1.0 - alpha])
    return float(low), float(high)


def _check(errors: np.ndarray, words: np.ndarray, blocks: np.ndarray, level: float, resamples: int) -> None:
    if not (errors.shape == words.shape == blocks.shape):
        raise ValueError("errors, words and blocks must have the same length")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if resamples < 1:
        raise ValueError("resamples must be at least 1")


def _resampled(
    terms: Sequence[tuple[float, np.ndarray]],
    words: np.ndarray,
    blocks: np.ndarray,
    estimate: float,
    *,
    unit: str,
    level: float,
    resamples: int,
    seed: int,
) -> Interval:
    """Interval of sum_k sign_k * errors_k / words over ``resamples`` block resamples (the shared tail)."""
    if words.size == 0:
        return Interval(estimate, float("nan"), float("nan"), level, resamples, unit, 0)
    _, b = np.unique(blocks, return_inverse=True)
    n = int(b.max()) + 1
    counts = _block_counts(n, resamples, seed)
    numerator = sum(sign * _sums(values, b, n) for sign, values in terms)
    with np.errstate(invalid="ignore", divide="ignore"):
        samples = (counts @ numerator) / (counts @ _sums(words, b, n))
    low, high = _percentiles(samples, level)
    return Interval(estimate, low, high, level, resamples, unit, n)


def wer_interval(
    errors: Sequence[float] | np.ndarray,
    words: Sequence[float] | np.ndarray,
    blocks: Sequence[int] | np.ndarray | None = None,
    *,
    unit: str = "utterance",
    level: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> Interval:
    """Corpus WER (sum errors / sum words) with a percentile bootstrap interval over blocks."""
    e, w = np.asarray(errors, dtype=np.float64), np.asarray(words, dtype=np.float64)
    b = np.arange(e.size) if blocks is None else np.asarray(blocks, dtype=np.int64)
    _check(e, w, b, level, resamples)
    total = w.sum()
    estimate = float(e.sum() / total) if total > 0 else float("nan")
    return _resampled([(1.0, e)], w, b, estimate, unit=unit, level=level, resamples=resamples, seed=seed)


def paired_delta_interval(
    errors_base: Sequence[float] | np.ndarray,
    errors_cand: Sequence[float] | np.ndarray,
    words: Sequence[float] | np.ndarray,
    blocks: Sequence[int] | np.ndarray | None = None,
    *,
    unit: str = "utterance",
    level: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> Interval:
    """WER(candidate) - WER(baseline) on the same utterances, both resampled with the same blocks."""
    eb, ec = np.asarray(errors_base, dtype=np.float64), np.asarray(errors_cand, dtype=np.float64)
    w = np.asarray(words, dtype=np.float64)
    b = np.arange(eb.size) if blocks is None else np.asarray(blocks, dtype=np.int64)
    _check(eb, w, b, level, resamples)
    if ec.shape != eb.shape:
        raise ValueError("paired delta needs both systems scored on the same utterances")
    total = w.sum()
    estimate = float((ec.sum() - eb.sum()) / total) if total > 0 else float("nan")
    return _resampled(
        [(1.0, ec), (-1.0, eb)], w, b, estimate, unit=unit, level=level, resamples=resamples, seed=seed
    )


def independent_difference_interval(
    first: tuple[np.ndarray, np.ndarray, np.ndarray],
    second: tuple[np.ndarray, np.ndarray, np.ndarray],
    *,
    unit: str = "speaker",
    level: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> tuple[Interval, Interval]:
    """Two independent sets' ratios of sums (errors, words, blocks each): the interval of ``first - second`` and of
    ``first / second``, each set's blocks resampled on their own (different speakers, so no pairing). A resample
    whose ``second`` ratio is zero has no quotient and is left out of the quotient's interval."""
    parts = []
    for k, (errors, words, blocks) in enumerate((first, second)):
        e, w = np.asarray(errors, dtype=np.float64), np.asarray(words, dtype=np.float64)
        b = np.asarray(blocks, dtype=np.int64)
        _check(e, w, b, level, resamples)
        if w.sum() <= 0:
            nan = Interval(float("nan"), float("nan"), float("nan"), level, resamples, unit, 0)
            return nan, nan
        _, b = np.unique(b, return_inverse=True)
        n = int(b.max()) + 1
        counts = _block_counts(n, resamples, seed + k)
        with np.errstate(invalid="ignore", divide="ignore"):
            samples = (counts @ _sums(e, b, n)) / (counts @ _sums(w, b, n))
        parts.append((float(e.sum() / w.sum()), samples, n))
    (a, sa, na), (c, sc, nc) = parts
    out = []
    for estimate, samples in ((a - c, sa - sc), (a / c if c > 0 else float("nan"), _ratio(sa, sc))):
        low, high = _percentiles(samples, level)
        out.append(Interval(estimate, low, high, level, resamples, unit, na + nc))
    return out[0], out[1]


def _ratio(top: np.ndarray, bottom: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(bottom > 0, top / np.where(bottom > 0, bottom, 1.0), np.nan)

"""Streaming statistics per tensor, independent of batch size and clip order.

Two passes over the calibration data: ``MaxCollector`` keeps the running max of |x| (exact, order
free); ``HistogramCollector`` then bins |x| into a fixed-range histogram ``[0, max]`` with integer
counts, so its sum is the same for any batching or order. Memory is one float per tensor plus
``bins`` counts, whatever the number of clips.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

DEFAULT_BINS = 2048


@dataclass
class MaxCollector:
    amax: dict[str, float] = field(default_factory=dict)

    def update(self, name: str, values: np.ndarray) -> None:
        if values.size == 0:
            return
        current = float(np.max(np.abs(values)))
        self.amax[name] = max(self.amax.get(name, 0.0), current)


@dataclass
class Histogram:
    """Counts of |x| in ``bins`` equal bins over ``[0, range_max]``."""

    counts: np.ndarray
    range_max: float

    @property
    def bins(self) -> int:
        return len(self.counts)

    @property
    def bin_width(self) -> float:
        return self.range_max / self.bins

    def edges(self) -> np.ndarray:
        return np.linspace(0.0, self.range_max, self.bins + 1)


@dataclass
class HistogramCollector:
    """Fixed-range histograms; ``ranges`` come from a finished MaxCollector pass."""

    ranges: dict[str, float]
    bins: int = DEFAULT_BINS
    histograms: dict[str, Histogram] = field(default_factory=dict)

    def update(self, name: str, values: np.ndarray) -> None:
        top = self.ranges.get(name, 0.0)
        if values.size == 0 or top <= 0.0:
            return
        hist = self.histograms.get(name)
        if hist is None:
            hist = self.histograms[name] = Histogram(np.zeros(self.bins, dtype=np.int64), top)
        magnitudes = np.abs(values.astype(np.float64, copy=False)).ravel()
        index = np.minimum((magnitudes / top * self.bins).astype(np.int64), self.bins - 1)
        hist.counts += np.bincount(index, minlength=self.bins)

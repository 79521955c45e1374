"""Streaming statistics per tensor in one pass, independent of batch size and clip order.

``MaxCollector`` keeps the running max of |x| (exact, order free). ``GrowingHistogram`` counts |x| in
``bins * refine`` fine bins whose width is a power of two, ``2**exponent``. When a value beyond the
range arrives, the width doubles (as often as needed) and adjacent bin pairs are summed. Because
``|x| / 2**e`` is exact in floating point, ``floor(|x| / 2**(e+1)) == floor(floor(|x| / 2**e) / 2)``,
so the counts after any sequence of updates equal the counts of binning every value once at the
final width: the result depends only on the multiset of values, not on batching or order. Float32
arrays are counted by a compiled one-pass kernel (``kernels``) when numba is installed, others (and
every array without numba) by numpy passes; both give the same counts. Memory is
one float plus ``bins * refine`` int64 counts (and as many int32 ones for the kernel) per tensor, whatever
the number of clips.

For the convergence report (``convergence``), ``StreamingStats`` also keeps each update's max |x| per
tensor (one float per clip and tensor, already computed by the counting pass) and, once, what the
range methods read of its state at a chosen point (``mark_checkpoint``: the running maxima and the
finished ``bins``-bin histograms, a ``StatisticsSnapshot``, taken once per run, never per clip; copying
the fine counts instead, 55 MB for Wav2Vec2-base, took 0.1-0.4 s).

``GrowingHistogram.finish`` then merges whole groups of fine bins into the ``bins``-bin histogram
over ``[0, range_max]`` that the range methods use, with ``range_max`` the smallest multiple of
``bins`` fine bins that covers the data (at most ``1 / (refine / 2 + 1)`` above the true max; TensorRT's
own histogram ends exactly at the max, ours at most about 6 % later with the default refine 32).
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field

import numpy as np

from workbench.calibration import kernels

DEFAULT_BINS = 2048
DEFAULT_REFINE = 32
# recorded in cache provenance: caches made by another statistics scheme are not reused
STATISTICS_SCHEME = f"one-pass exact power-of-two histogram of |x|, refine {DEFAULT_REFINE}"


@dataclass
class MaxCollector:
    """Running max of |x| per tensor."""

    amax: dict[str, float] = field(default_factory=dict)

    def observe(self, name: str, top: float) -> None:
        """Fold in the largest |x| of one batch of ``name``'s values."""
        self.amax[name] = max(self.amax.get(name, 0.0), top)


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


_scratch = threading.local()


def _index_buffer(size: int) -> np.ndarray:
    """An int64 array of ``size`` elements, reused by the calling thread (bin indices are transient)."""
    buffer = getattr(_scratch, "index", None)
    if buffer is None or buffer.size < size:
        buffer = _scratch.index = np.empty(size, dtype=np.intp)
    return buffer[:size]


def _exponent_for(top: float, fine_bins: int) -> int:
    """Smallest e with ``fine_bins * 2**e > top`` (so every |x| <= top has a bin)."""
    e = math.floor(math.log2(top / fine_bins))
    while fine_bins * 2.0**e <= top:
        e += 1
    while fine_bins * 2.0 ** (e - 1) > top:
        e -= 1
    return e


_INT32_ROOM = (
    2**31 - 1
)  # the compiled path counts into int32 (half the cache footprint) until this many values


@dataclass
class GrowingHistogram:
    """Exact, order-free histogram of |x| with power-of-two bin width (see the module docstring).

    The compiled kernel counts into ``recent`` (int32: the 65,536 fine bins then take 256 KB of cache, not
    512 KB, about 13 % less time per value); the numpy passes count into the int64 ``settled`` counts, into
    which ``recent`` is also folded before it could overflow. Either array is made when first needed, and
    reading (``counts``, ``finish``) writes neither: a fresh array's pages are mapped by the kernel on first
    write, and the old fold-on-read wrote 512 KB of never-touched int64 counts per tensor, 0.2 s of page
    faults for Wav2Vec2-base's 106 tensors at each read. ``zeros`` counts the values of all-zero updates
    (bin 0 at every width).
    """

    bins: int = DEFAULT_BINS
    refine: int = DEFAULT_REFINE
    exponent: int | None = None
    zeros: int = 0
    settled: np.ndarray | None = None
    recent: np.ndarray | None = field(default=None, repr=False)
    recent_total: int = field(default=0, repr=False)

    def __post_init__(self) -> None:
        if self.refine < 2 or self.refine & (self.refine - 1):
            raise ValueError(f"refine must be a power of two >= 2, got {self.refine}")

    @property
    def counts(self) -> np.ndarray | None:
        """The fine counts (a new int64 array), everything counted so far included; None before any
        non-zero value."""
        if self.exponent is None:
            return None
        total = np.zeros(self.fine_bins, dtype=np.int64)
        for part in self._parts():
            total += part
        total[0] += self.zeros
        return total

    def _parts(self) -> list[np.ndarray]:
        """The count arrays that hold something (``settled``, ``recent``)."""
        parts = [] if self.settled is None else [self.settled]
        if self.recent is not None and self.recent_total:
            parts.append(self.recent)
        return parts

    def _settle(self) -> None:
        """Fold ``recent`` into ``settled`` (made if needed), so ``recent`` can count from zero again."""
        if self.recent_total:
            assert self.recent is not None
            self._settled_counts()[:] += self.recent
            self.recent[:] = 0
            self.recent_total = 0

    def _settled_counts(self) -> np.ndarray:
        if self.settled is None:
            self.settled = np.zeros(self.fine_bins, dtype=np.int64)
        return self.settled

    @property
    def fine_bins(self) -> int:
        return self.bins * self.refine

    def _grow_to(self, exponent: int) -> None:
        """Double the bin width ``exponent - self.exponent`` times: sum adjacent bins, in place."""
        assert self.exponent is not None
        shift = exponent - self.exponent
        if shift <= 0:
            return
        factor = 2**shift
        for part in self._parts():  # int32 ``recent`` sums stay below 2**31: they hold recent_total values
            if factor >= self.fine_bins:
                total = part.sum()
                part[:] = 0
                part[0] = total
            else:
                kept = self.fine_bins // factor
                part[:kept] = part.reshape(kept, factor).sum(axis=1)
                part[kept:] = 0
        self.exponent = exponent

    def update(self, values: np.ndarray) -> None:
        magnitudes = np.abs(values).ravel()
        if magnitudes.size:
            self.add_magnitudes(magnitudes, float(magnitudes.max()))

    def _cover(self, top: float) -> None:
        """Start the histogram, or grow it, so that ``top`` (> 0, finite) has a bin."""
        needed = _exponent_for(top, self.fine_bins)
        if self.exponent is None:
            self.exponent = needed
        elif needed > self.exponent:
            self._grow_to(needed)

    def add_magnitudes(self, magnitudes: np.ndarray, top: float) -> None:
        """Count |x| values (1-D, ``top`` their max); ``magnitudes`` may be overwritten."""
        if not math.isfinite(top):
            raise ValueError("non-finite activation value; the FP32 model produced inf/nan on this input")
        if top == 0.0:
            self.zeros += magnitudes.size
            return
        self._cover(top)
        assert self.exponent is not None
        inverse = 2.0**-self.exponent
        if magnitudes.dtype == np.float32 and abs(self.exponent) < 120:
            scaled = np.multiply(magnitudes, np.float32(inverse), out=magnitudes)  # exact: power of two
        else:
            scaled = magnitudes.astype(np.float64) * inverse
        # truncation into a reused per-thread index buffer (a fresh int64 array per call costs ~7x more)
        index = _index_buffer(scaled.size)
        np.copyto(index, scaled, casting="unsafe")
        self._settled_counts()[:] += np.bincount(index, minlength=self.fine_bins)

    def add_compiled(self, values: np.ndarray) -> float | None:
        """Count a contiguous 1-D float32 array with the compiled kernel; its max |x|, or None when the
        numpy path must do it (all zeros, a NaN/inf, a range beyond float32 scaling, no numba)."""
        if self.exponent is None:
            top = max(float(values.max()), -float(values.min()))  # NaN propagates
            if not (math.isfinite(top) and top > 0.0):
                return None
            self._cover(top)
        assert self.exponent is not None
        if abs(self.exponent) >= 120:
            return None
        top, counted = self._count_recent(values)
        if counted:
            return top
        top = max(float(values.max()), -float(values.min()))  # a value beyond the range: grow and count again
        if not math.isfinite(top):
            return None
        self._cover(top)
        if abs(self.exponent) >= 120:
            return None
        top, counted = self._count_recent(values)
        return top if counted else None

    def _count_recent(self, values: np.ndarray) -> tuple[float, bool]:
        """The kernel's count of ``values`` into the int32 buffer (settled first if it could overflow)."""
        assert self.exponent is not None
        if self.recent is None:
            self.recent = np.zeros(self.fine_bins, dtype=np.int32)
        elif self.recent_total + values.size > _INT32_ROOM:
            self._settle()
        if values.size > _INT32_ROOM:
            return 0.0, False  # more values in one array than int32 counts hold: the numpy passes count it
        top, counted = kernels.count_float32(
            values, np.float32(2.0**-self.exponent), self.fine_bins, self.recent
        )
        if counted:
            self.recent_total += values.size
        return top, counted

    def merged(self, other: GrowingHistogram) -> GrowingHistogram:
        """A new histogram holding both histograms' values: each is grown to the wider bin width and the
        counts are added. Exact (see the module docstring): the result equals counting every value of both in
        one histogram, in any order. Neither input changes."""
        if (self.bins, self.refine) != (other.bins, other.refine):
            raise ValueError(
                f"histograms of {self.bins}x{self.refine} and {other.bins}x{other.refine} fine bins do not add"
            )
        out = GrowingHistogram(self.bins, self.refine, zeros=self.zeros + other.zeros)
        started = [h for h in (self, other) if h.exponent is not None]
        if not started:
            return out
        out.exponent = max(h.exponent for h in started if h.exponent is not None)
        total = np.zeros(self.fine_bins, dtype=np.int64)
        for hist in started:
            grown = GrowingHistogram(self.bins, self.refine, exponent=hist.exponent, settled=hist.counts)
            assert grown.settled is not None
            grown.settled[0] -= hist.zeros  # ``counts`` folds the zeros into bin 0; they are added once above
            grown._grow_to(out.exponent)
            total += grown.settled
        out.settled = total
        return out

    def finish(self) -> Histogram | None:
        """The ``bins``-bin histogram over the smallest covering range, or None if only zeros were seen."""
        if self.exponent is None:
            return None
        parts = self._parts()
        used = 1 + max([_last_nonzero(part) for part in parts], default=0)
        group = max(1, math.ceil(used / self.bins))
        merged = np.zeros(self.bins, dtype=np.int64)
        for part in parts:
            merged += part[: self.bins * group].reshape(self.bins, group).sum(axis=1)
        merged[0] += self.zeros
        return Histogram(merged, float(self.bins * group * 2.0**self.exponent))


def _last_nonzero(counts: np.ndarray) -> int:
    """Index of the last non-zero count (0 when all are zero), without an index array per non-zero bin."""
    nonzero = counts != 0
    return len(nonzero) - 1 - int(np.argmax(nonzero[::-1])) if nonzero.any() else 0


@dataclass
class StreamingStats:
    """Running max and (optionally) a growing histogram for every tensor name seen."""

    with_histograms: bool = True
    bins: int = DEFAULT_BINS
    refine: int = DEFAULT_REFINE
    maxes: MaxCollector = field(default_factory=MaxCollector)
    histograms: dict[str, GrowingHistogram] = field(default_factory=dict)
    tops: dict[str, list[float]] = field(default_factory=dict)  # max |x| of each update, in update order
    checkpoint: StatisticsSnapshot | None = None  # the state taken by ``mark_checkpoint``
    checkpoint_updates: int = 0  # updates per tensor folded in when the checkpoint was taken

    def update(self, name: str, values: np.ndarray, overwrite: bool = False) -> None:
        """Add one tensor's values; with ``overwrite`` the array is used as scratch space (no copies)."""
        self.tops.setdefault(name, []).append(float(self._update(name, values, overwrite)))

    def mark_checkpoint(self) -> None:
        """Keep the running maxima and finished histograms as they are now (once per run: the convergence
        report compares the final ranges with the ranges of this state)."""
        self.checkpoint = self.snapshot()
        self.checkpoint_updates = max((len(t) for t in self.tops.values()), default=0)

    def _update(self, name: str, values: np.ndarray, overwrite: bool) -> float:
        if values.size == 0:
            return 0.0
        hist = None
        if self.with_histograms:
            hist = self.histograms.get(name)
            if hist is None:
                hist = self.histograms[name] = GrowingHistogram(self.bins, self.refine)
            if values.dtype == np.float32 and values.flags.c_contiguous and kernels.ready():
                top = hist.add_compiled(values.reshape(-1))
                if top is not None:
                    self.maxes.observe(name, top)
                    return top
        if overwrite and values.flags.writeable and values.flags.c_contiguous:
            magnitudes = np.abs(values, out=values).reshape(-1)
        else:
            magnitudes = np.abs(values).ravel()  # computed once, shared by the max and the histogram
        top = float(magnitudes.max())
        self.maxes.observe(name, top)
        if hist is not None:
            hist.add_magnitudes(magnitudes, top)
        return top

    def merged(self, other: StreamingStats) -> StreamingStats:
        """Statistics of both passes' clips together: maxima are the larger, histograms add exactly
        (``GrowingHistogram.merged``), each tensor's per-update tops are this one's then the other's. No
        checkpoint: a caller that splits clips at the checkpoint merges the early parts first and takes it
        (``with_checkpoint``)."""
        if (self.with_histograms, self.bins, self.refine) != (
            other.with_histograms,
            other.bins,
            other.refine,
        ):
            raise ValueError("statistics collected with different histogram settings do not add")
        out = StreamingStats(self.with_histograms, self.bins, self.refine)
        for name in dict.fromkeys([*self.maxes.amax, *other.maxes.amax]):
            for part in (self, other):
                if name in part.maxes.amax:
                    out.maxes.observe(name, part.maxes.amax[name])
        for name in dict.fromkeys([*self.histograms, *other.histograms]):
            empty = GrowingHistogram(self.bins, self.refine)
            out.histograms[name] = self.histograms.get(name, empty).merged(other.histograms.get(name, empty))
        for name in dict.fromkeys([*self.tops, *other.tops]):
            out.tops[name] = [*self.tops.get(name, []), *other.tops.get(name, [])]
        return out

    def with_checkpoint(self, early: StreamingStats) -> StreamingStats:
        """These statistics with ``early`` (those of the first clips only) as their checkpoint, as if
        ``mark_checkpoint`` had been called after those clips."""
        self.checkpoint = early.snapshot()
        self.checkpoint_updates = max((len(t) for t in early.tops.values()), default=0)
        return self

    def in_order(self, names: list[str]) -> None:
        """Order every per-tensor dict by ``names`` (tensors not in it keep their place after them)."""
        self.maxes.amax = _in_name_order(self.maxes.amax, names)
        self.histograms = _in_name_order(self.histograms, names)
        self.tops = _in_name_order(self.tops, names)
        if self.checkpoint is not None:
            self.checkpoint.in_order(names)

    def histogram(self, name: str) -> Histogram | None:
        hist = self.histograms.get(name)
        return hist.finish() if hist is not None else None

    def snapshot(self) -> StatisticsSnapshot:
        """What the range methods read now (maxima, finished histograms), unaffected by later updates."""
        return StatisticsSnapshot(
            MaxCollector(dict(self.maxes.amax)), {n: h.finish() for n, h in self.histograms.items()}
        )


@dataclass
class StatisticsSnapshot:
    """The running maxima and finished histograms of ``StreamingStats`` at one moment: everything
    ``runner.ranges_from_statistics`` reads, so each method's thresholds on it equal those on the live
    statistics at that moment."""

    maxes: MaxCollector
    finished: dict[str, Histogram | None]

    def histogram(self, name: str) -> Histogram | None:
        return self.finished.get(name)

    def in_order(self, names: list[str]) -> None:
        """Order the tensors by ``names`` (as ``StreamingStats.in_order``)."""
        self.maxes.amax = _in_name_order(self.maxes.amax, names)
        self.finished = _in_name_order(self.finished, names)


def _in_name_order(per_tensor: dict, names: list[str]) -> dict:
    """``per_tensor`` with its keys in the order of ``names`` (keys not in it keep their order after them)."""
    rank = {n: k for k, n in enumerate(names)}
    return dict(sorted(per_tensor.items(), key=lambda kv: rank.get(kv[0], len(rank))))

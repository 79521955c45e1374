"""Per-channel activation statistics and a small sample of activation rows, kept during the calibration pass.

The accuracy-recovery transforms (``workbench.calibration.recovery``) need more than one range per tensor:

- SmoothQuant needs each input channel's max |x| (``absmax``);
- bias correction needs each input channel's mean (``mean``: running sum over count);
- the SmoothQuant strength search and the range refinement score candidates by the layer's output error,
  for which they need real activations: ``rows`` keeps at most ``max_rows`` rows (one row = one time step's
  channel vector) per tensor, taken ``rows_per_update`` at evenly spaced positions from each clip, then
  thinned by a seeded reservoir once full. Memory is ``max_rows * channels`` floats per tensor (256 x 1024
  floats, 1 MB, for the demo model's widest input).

The channel axis is the last one for MatMul/Gemm inputs ([..., channels]) and axis 1 for Conv inputs
([batch, channels, time]). Maxima, sums and counts are exact and order free; the sampled rows depend on the
clip order (they only steer searches, never a stored range).
"""

from __future__ import annotations

import threading
import zlib
from dataclasses import dataclass, field

import numpy as np

DEFAULT_MAX_ROWS = 256
DEFAULT_ROWS_PER_UPDATE = 32


@dataclass
class ChannelTensor:
    """One tensor's per-channel statistics and row sample."""

    axis: int
    absmax: np.ndarray | None = None
    total: np.ndarray | None = None  # float64 sum per channel
    count: int = 0  # values per channel summed so far
    rows: np.ndarray | None = None  # [n, channels] float32 sample
    seen_rows: int = 0  # rows offered to the reservoir so far

    @property
    def mean(self) -> np.ndarray:
        assert self.total is not None
        return self.total / max(1, self.count)


@dataclass
class ChannelStats:
    """Per-channel max |x|, mean and a row sample for the tensors in ``axes`` (name -> channel axis)."""

    axes: dict[str, int]
    sampled: set[str] = field(default_factory=set)  # tensors whose rows are sampled
    max_rows: int = DEFAULT_MAX_ROWS
    rows_per_update: int = DEFAULT_ROWS_PER_UPDATE
    tensors: dict[str, ChannelTensor] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def update(self, name: str, values: np.ndarray) -> None:
        """Fold in one run's values of ``name`` (read only; call before the array is used as scratch)."""
        axis = self.axes.get(name)
        if axis is None or values.size == 0 or values.ndim < 2:
            return
        with self._lock:
            entry = self.tensors.get(name)
            if entry is None:
                entry = self.tensors[name] = ChannelTensor(axis)
        rows = np.moveaxis(values, axis, -1).reshape(-1, values.shape[axis])
        top = np.abs(rows).max(axis=0)
        entry.absmax = top if entry.absmax is None else np.maximum(entry.absmax, top)
        total = rows.sum(axis=0, dtype=np.float64)
        entry.total = total if entry.total is None else entry.total + total
        entry.count += rows.shape[0]
        if name in self.sampled:
            self._sample(name, entry, rows)

    def _sample(self, name: str, entry: ChannelTensor, rows: np.ndarray) -> None:
        take = min(self.rows_per_update, rows.shape[0])
        picked = np.asarray(rows[np.linspace(0, rows.shape[0] - 1, take).astype(int)], np.float32)
        if entry.rows is None:
            entry.rows = picked.copy()
        else:
            room = self.max_rows - entry.rows.shape[0]
            if room > 0:
                entry.rows = np.concatenate([entry.rows, picked[:room]])
                picked = picked[room:]
            if len(picked):  # reservoir: each offered row kept with probability max_rows / rows offered
                rng = np.random.default_rng([zlib.crc32(name.encode()), entry.seen_rows])
                slots = rng.integers(0, entry.seen_rows + np.arange(1, len(picked) + 1))
                for row, slot in zip(picked, slots):
                    if slot < self.max_rows:
                        entry.rows[slot] = row
        entry.seen_rows += take

    def absmax(self, name: str) -> np.ndarray | None:
        entry = self.tensors.get(name)
        return None if entry is None else entry.absmax

    def mean(self, name: str) -> np.ndarray | None:
        entry = self.tensors.get(name)
        return None if entry is None or entry.total is None else entry.mean

    def rows(self, name: str) -> np.ndarray | None:
        entry = self.tensors.get(name)
        return None if entry is None else entry.rows

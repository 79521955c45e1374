"""Range methods: turn a tensor's statistics into the symmetric ``amax`` of its INT8 scale.

- ``max``: the largest |x| seen.
- ``percentile``: the histogram edge below which ``percentile`` % of |x| lies.
- ``mse``: the candidate amax (bin edges) minimising the expected squared INT8 error, from bin centres.
- ``entropy``: TensorRT's KL-divergence search (GTC 2017, "8-bit Inference with TensorRT") with the
  threshold NVIDIA's public implementation (ModelOpt's ``_compute_amax_entropy``) picks on the same
  histogram, exactly: see ``workbench.calibration.entropy`` for its rules and the fast search.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench.calibration import entropy
from workbench.calibration.collectors import Histogram
from workbench.config import DEFAULT_METHOD
from workbench.errors import WorkbenchError

QUANT_LEVELS = entropy.LEVELS
METHODS = ("entropy", "max", "percentile", "mse")


@dataclass(frozen=True)
class MethodSpec:
    name: str = DEFAULT_METHOD
    percentile: float = 99.99
    bins: int = 2048

    def __post_init__(self) -> None:
        if self.name not in METHODS:
            raise WorkbenchError(
                f"unknown calibration method {self.name!r}; choose one of {', '.join(METHODS)}"
            )
        if not (50.0 < self.percentile <= 100.0):
            raise WorkbenchError(f"percentile must be in (50, 100], got {self.percentile}")
        if self.bins < QUANT_LEVELS or self.bins & (self.bins - 1):
            raise WorkbenchError(f"histogram bins must be a power of two >= {QUANT_LEVELS}, got {self.bins}")

    def params(self) -> dict[str, float | int | str]:
        out: dict[str, float | int | str] = {"method": self.name, "bins": self.bins}
        if self.name == "percentile":
            out["percentile"] = self.percentile
        if self.name == "entropy":  # in cache keys: caches from an earlier entropy search are not reused
            out["search"] = entropy.SEARCH
        return out


def entropy_amax(hist: Histogram) -> float:
    """NVIDIA's reference KL threshold on this histogram (``workbench.calibration.entropy``)."""
    return entropy.threshold(hist.counts, hist.edges())


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

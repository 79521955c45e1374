"""Histogram sidecar of a calibration cache: ``<cache>.hist.npz`` with every tensor's statistics.

The legacy cache keeps only one scale per tensor. The sidecar keeps what the scale was chosen from,
so a viewer (the dashboard) can draw each tensor's |x| histogram and recompute the threshold of every
method (``workbench.calibration.methods.compute_amax``) without running the model again.

Arrays: ``names`` (graph order), ``amax`` (running max of |x|), ``range_max`` (histogram upper
edge, NaN for an all-zero tensor), ``counts`` [tensors, bins] int64. ``meta`` is a JSON string with
the cache's provenance keys and ``cache_sha256``, the content hash of the cache text it belongs to:
a sidecar whose hash differs from the cache beside it came from another run and is not shown as its
statistics. Written atomically after the cache itself.
"""

from __future__ import annotations

import io
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from workbench.artifacts import write_bytes_atomic
from workbench.calibration.collectors import Histogram, StreamingStats
from workbench.errors import WorkbenchError

SUFFIX = ".hist.npz"
FORMAT = "workbench-calibration-histograms/1"


def histogram_path(cache_path: Path) -> Path:
    """Where the histograms of ``cache_path`` live (``calib-….cache`` -> ``calib-….cache.hist.npz``)."""
    cache_path = Path(cache_path)
    return cache_path.with_name(cache_path.name + SUFFIX)


@dataclass
class TensorHistograms:
    """Per-tensor statistics of one calibration run, in graph order."""

    names: list[str]
    amax: np.ndarray
    range_max: np.ndarray
    counts: np.ndarray
    meta: dict[str, Any]

    def index(self, name: str) -> int:
        try:
            return self.names.index(name)
        except ValueError as exc:
            raise WorkbenchError(f"no histogram for tensor {name!r}") from exc

    def histogram(self, name: str) -> Histogram | None:
        """The tensor's histogram, or None when it only ever saw zeros."""
        i = self.index(name)
        if not np.isfinite(self.range_max[i]):
            return None
        return Histogram(self.counts[i], float(self.range_max[i]))


def from_statistics(stats: StreamingStats, meta: dict[str, Any]) -> TensorHistograms:
    """Collect the finished histograms of ``stats`` (names in the order of ``stats``: graph order after a calibration pass)."""
    if not stats.with_histograms:
        raise ValueError("statistics were collected without histograms")
    names = list(stats.maxes.amax)
    counts = np.zeros((len(names), stats.bins), dtype=np.int64)
    range_max = np.full(len(names), np.nan)
    for i, name in enumerate(names):
        hist = stats.histogram(name)
        if hist is not None:
            counts[i] = hist.counts
            range_max[i] = hist.range_max
    amax = np.array([stats.maxes.amax[n] for n in names], dtype=np.float64)
    return TensorHistograms(names, amax, range_max, counts, dict(meta))


def save(path: Path, data: TensorHistograms) -> None:
    """Write the sidecar atomically (npz through a temporary file, then rename).

    Uncompressed: 1.8 MB for Wav2Vec2-base's 106 tensors, written in about 5 ms; zlib made it 0.3 MB
    but took 60 ms, part of every calibration's fixed cost (issue 19). ``load`` reads either."""
    buffer = io.BytesIO()
    np.savez(
        buffer,
        names=np.array(data.names, dtype=np.str_),
        amax=data.amax,
        range_max=data.range_max,
        counts=data.counts,
        meta=np.array(json.dumps({"format": FORMAT, **data.meta}, sort_keys=True, default=str)),
    )
    write_bytes_atomic(Path(path), buffer.getvalue())


def load(path: Path) -> TensorHistograms:
    """Read a sidecar; a missing or damaged file is a user error that says how to get one."""
    path = Path(path)
    if not path.is_file():
        raise WorkbenchError(
            f"no histograms at {path}; calibrate again (python -m workbench calibrate) "
            "with a histogram method (entropy, percentile or mse) to record them"
        )
    try:
        with np.load(path, allow_pickle=False) as npz:
            meta = json.loads(str(npz["meta"]))
            names = [str(n) for n in npz["names"]]
            data = TensorHistograms(names, npz["amax"], npz["range_max"], npz["counts"], meta)
    except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise WorkbenchError(
            f"histogram file {path} is damaged ({type(exc).__name__}: {str(exc)[:100]}); "
            "calibrate again to rewrite it"
        ) from exc
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise WorkbenchError(
            f"histogram file {path} is not in format {FORMAT!r}; calibrate again to rewrite it"
        )
    shapes_ok = data.counts.ndim == 2 and data.counts.shape[0] == len(names) == len(data.amax) == len(
        data.range_max
    )
    if not shapes_ok:
        raise WorkbenchError(
            f"histogram file {path} is damaged (its arrays disagree in length); calibrate again"
        )
    return data


def histograms_problem(cache_path: Path, cache: Any) -> str | None:
    """Why the histogram sidecar of a loaded histogram-method cache cannot be used (missing, damaged, or made
    for another cache), or None when it is fine or the method keeps none (``max``)."""
    if cache.keys.get("method") == "max":
        return None
    path = histogram_path(cache_path)
    if not path.exists():
        return f"{path.name} is missing"
    try:
        data = load(path)
    except WorkbenchError as exc:
        return str(exc)
    if data.meta.get("cache_sha256") != cache.content_hash:
        return f"{path.name} belongs to another run of this cache"
    return None

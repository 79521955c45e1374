"""Histogram sidecar of a calibration cache: round trip, thresholds recomputed from it, damage reported."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.calibration import histograms
from workbench.calibration.collectors import StreamingStats
from workbench.calibration.methods import METHODS, MethodSpec, compute_amax
from workbench.errors import WorkbenchError


def _stats() -> StreamingStats:
    rng = np.random.default_rng(0)
    stats = StreamingStats(bins=256)
    for _ in range(3):
        stats.update("a", rng.standard_normal(4000).astype(np.float32))
        stats.update("b", (rng.laplace(size=3000) * 5).astype(np.float32))
        stats.update("zeros", np.zeros(50, np.float32))
    return stats


def test_round_trip_gives_the_same_thresholds_for_every_method(tmp_path) -> None:
    stats = _stats()
    path = histograms.histogram_path(tmp_path / "calib-x-entropy.cache")
    assert path.name == "calib-x-entropy.cache.hist.npz"
    histograms.save(
        path, histograms.from_statistics(stats, {"cache_sha256": "abc", "keys": {"method": "entropy"}})
    )
    loaded = histograms.load(path)
    assert loaded.names == ["a", "b", "zeros"]
    assert loaded.meta["cache_sha256"] == "abc" and loaded.meta["keys"] == {"method": "entropy"}
    assert loaded.histogram("zeros") is None
    for method in METHODS:
        spec = MethodSpec(method, bins=256)
        for name in ("a", "b"):
            expected = compute_amax(spec, stats.maxes.amax[name], stats.histogram(name))
            got = compute_amax(spec, float(loaded.amax[loaded.index(name)]), loaded.histogram(name))
            assert got == pytest.approx(expected, rel=0, abs=0)
    assert not list(tmp_path.glob(".*.tmp"))  # atomic write leaves no temporary file


def test_missing_or_damaged_sidecar_is_a_user_error(tmp_path) -> None:
    with pytest.raises(WorkbenchError, match="calibrate again"):
        histograms.load(tmp_path / "nope.hist.npz")
    bad = tmp_path / "bad.hist.npz"
    bad.write_bytes(b"not a zip")
    with pytest.raises(WorkbenchError, match="damaged"):
        histograms.load(bad)
    with pytest.raises(WorkbenchError, match="no histogram for tensor"):
        histograms.from_statistics(_stats(), {}).index("missing")


def test_a_compressed_sidecar_from_an_earlier_version_still_reads(tmp_path) -> None:
    """Sidecars were zlib-compressed npz until session 8; they load as before."""
    data = histograms.from_statistics(_stats(), {"cache_sha256": "abc"})
    path = tmp_path / "old.cache.hist.npz"
    np.savez_compressed(
        path,
        names=np.array(data.names, dtype=np.str_),
        amax=data.amax,
        range_max=data.range_max,
        counts=data.counts,
        meta=np.array(f'{{"format": "{histograms.FORMAT}", "cache_sha256": "abc"}}'),
    )
    loaded = histograms.load(path)
    assert loaded.names == data.names and np.array_equal(loaded.counts, data.counts)
    assert loaded.meta["cache_sha256"] == "abc"

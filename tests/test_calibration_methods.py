"""Calibration statistics and methods: known answers, batch/order invariance, the cache format."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from workbench.calibration import cache as cache_mod
from workbench.calibration.collectors import HistogramCollector, MaxCollector
from workbench.calibration.methods import MethodSpec, compute_amax, entropy_threshold_bin
from workbench.errors import WorkbenchError


def reference_entropy_bin(hist: np.ndarray) -> int:
    """Direct transcription of the published algorithm (loops everywhere, no shortcuts)."""
    hist = hist.astype(np.float64)
    best_i, best = len(hist), np.inf
    for i in range(128, len(hist) + 1):
        ref = hist[:i].copy()
        ref[i - 1] += hist[i:].sum()
        if ref.sum() == 0:
            continue
        merged = i // 128
        q = np.zeros(i)
        for j in range(128):
            start = j * merged
            stop = i if j == 127 else start + merged
            nz = sum(1 for k in range(start, stop) if ref[k] != 0)
            total = sum(hist[k] for k in range(start, stop))
            for k in range(start, stop):
                q[k] = total / nz if (nz and ref[k] != 0) else 0.0
        if q.sum() == 0:
            continue
        p = ref / ref.sum()
        qn = q / q.sum()
        eps = 1e-4

        def smooth(d):
            zeros = d == 0
            nzc = d.size - zeros.sum()
            return d + eps * zeros - (eps * zeros.sum() / nzc) * (~zeros)

        p, qn = smooth(p), smooth(qn)
        mask = p > 0
        if np.any(qn[mask] <= 0):
            continue
        kl = float(np.sum(p[mask] * np.log(p[mask] / qn[mask])))
        if kl < best:
            best, best_i = kl, i
    return best_i


def collect(x: np.ndarray, batch: int, order: np.ndarray | None = None, bins: int = 2048):
    data = x if order is None else x[order]
    chunks = np.array_split(data, max(1, len(data) // batch))
    maxc = MaxCollector()
    for c in chunks:
        maxc.update("t", c)
    hist = HistogramCollector(maxc.amax, bins=bins)
    for c in chunks:
        hist.update("t", c)
    return maxc.amax["t"], hist.histograms["t"]


@pytest.mark.parametrize("kind", ["gauss_outlier", "uniform", "laplace"])
def test_entropy_matches_reference_implementation(kind: str) -> None:
    rng = np.random.default_rng(1)
    x = {"gauss_outlier": rng.standard_normal(50_000), "uniform": rng.uniform(-3, 3, 50_000),
         "laplace": rng.laplace(0, 1, 50_000)}[kind]
    if kind == "gauss_outlier":
        x[123] = 80.0
    _, hist = collect(x, 4096, bins=512)  # 512 bins keeps the loop reference fast
    assert entropy_threshold_bin(hist.counts) == reference_entropy_bin(hist.counts)


def test_entropy_clips_outlier_max_does_not() -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal(100_000)
    x[7] = 60.0
    top, hist = collect(x, 8192)
    entropy = compute_amax(MethodSpec("entropy"), top, hist)
    assert compute_amax(MethodSpec("max"), top, hist) == 60.0
    assert 2.5 < entropy < 10.0
    assert compute_amax(MethodSpec("percentile", 99.9), top, hist) < 5.0


def test_uniform_entropy_keeps_nearly_full_range() -> None:
    x = np.random.default_rng(3).uniform(-2, 2, 200_000)
    top, hist = collect(x, 8192)
    assert compute_amax(MethodSpec("entropy"), top, hist) > 0.9 * top


@pytest.mark.parametrize("method", ["entropy", "max", "percentile", "mse"])
def test_scales_identical_for_batch_sizes_and_order(method: str) -> None:
    x = np.random.default_rng(4).laplace(0, 1, 64_000).astype(np.float32)
    results = set()
    for batch in (1000, 4000, 16000):
        for order in (None, np.random.default_rng(batch).permutation(len(x))):
            top, hist = collect(x, batch, order)
            results.add(compute_amax(MethodSpec(method), top, hist))
    assert len(results) == 1


def test_cache_round_trips_bit_exactly(tmp_path) -> None:
    amax = {"/encoder/layers.0/attention/q_proj/MatMul_input": 3.3, "feature_extractor.conv0": 0.1234567}
    keys = {"model": "abc", "set": "def", "method": "entropy", "bins": 2048, "workbench": "0.1.0"}
    original = cache_mod.CalibrationCache.from_amax(amax, keys)
    path = tmp_path / "calib.cache"
    original.save(path)
    text = path.read_text()
    assert text.splitlines()[0] == "TRT-10100-EntropyCalibration2"
    line = text.splitlines()[1]
    name, value = line.rsplit(": ", 1)
    assert struct.unpack(">f", bytes.fromhex(value))[0] == original.scales[name]
    again = cache_mod.load(path)
    assert again.scales == original.scales and again.to_text() == text
    again.save(tmp_path / "copy.cache")
    assert (tmp_path / "copy.cache").read_bytes() == path.read_bytes()


def test_foreign_cache_is_refused_and_kept(tmp_path) -> None:
    keys = {"model": "abc", "set": "def", "method": "entropy"}
    path = tmp_path / "calib.cache"
    cache_mod.CalibrationCache.from_amax({"x": 1.0}, keys).save(path)
    before = path.read_bytes()
    found, problems = cache_mod.load_matching(path, {**keys, "model": "other"})
    assert found is None and any("model" in p for p in problems)
    with pytest.raises(WorkbenchError, match="does not match"):
        cache_mod.require_matching(path, {**keys, "model": "other"})
    assert path.read_bytes() == before
    assert cache_mod.load_matching(path, keys)[0] is not None


def test_edited_cache_is_refused(tmp_path) -> None:
    path = tmp_path / "calib.cache"
    cache_mod.CalibrationCache.from_amax({"x": 1.0}, {"model": "a"}).save(path)
    path.write_text(path.read_text().replace("x: ", "y: "))
    with pytest.raises(WorkbenchError, match="edited"):
        cache_mod.load(path)

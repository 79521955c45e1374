"""Calibration statistics and methods: known answers, batch/order invariance, the cache format.

The entropy search against NVIDIA's reference lives in test_calibration_entropy.py."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from workbench.backends.tensorrt import cache_header
from workbench.calibration import cache as cache_mod
from workbench.calibration.collectors import GrowingHistogram, StreamingStats
from workbench.calibration.methods import MethodSpec, compute_amax
from workbench.errors import WorkbenchError


def collect(x: np.ndarray, batch: int, order: np.ndarray | None = None) -> tuple[float, object]:
    data = x if order is None else x[order]
    stats = StreamingStats()
    for chunk in np.array_split(data, max(1, len(data) // batch)):
        stats.update("t", chunk)
    return stats.maxes.amax["t"], stats.histogram("t")


def samples(kind: str, n: int = 50_000) -> np.ndarray:
    rng = np.random.default_rng(1)
    x = {
        "gauss_outlier": rng.standard_normal(n),
        "uniform": rng.uniform(-3, 3, n),
        "laplace": rng.laplace(0, 1, n),
    }[kind].astype(np.float32)
    if kind == "gauss_outlier":
        x[123] = 80.0
    return x


def test_outlier_clipped_by_percentile_and_mse_kept_by_entropy() -> None:
    """One value at 80 sigma: the reference entropy search keeps it in range (every candidate between
    the Gaussian and the outlier ends on an empty bin with mass behind it: infinite divergence;
    test_calibration_entropy checks this against ModelOpt); percentile and MSE clip it."""
    top, hist = collect(samples("gauss_outlier", 100_000), 8192)
    assert compute_amax(MethodSpec("max"), top, hist) == 80.0
    assert 80.0 <= compute_amax(MethodSpec("entropy"), top, hist) <= hist.range_max
    assert compute_amax(MethodSpec("percentile", 99.9), top, hist) < 5.0
    assert compute_amax(MethodSpec("mse"), top, hist) < 80.0  # MSE trades clipping error for resolution


def test_uniform_entropy_keeps_nearly_full_range() -> None:
    x = np.random.default_rng(3).uniform(-2, 2, 200_000).astype(np.float32)
    top, hist = collect(x, 8192)
    assert hist.range_max >= top and hist.range_max <= top * (1 + 1 / 17)
    assert compute_amax(MethodSpec("entropy"), top, hist) > 0.9 * top


def test_growing_histogram_equals_one_shot_binning() -> None:
    """Growth by merging is exact: equal to binning everything once at the final width."""
    rng = np.random.default_rng(5)
    parts = [rng.laplace(0, s, 5000).astype(np.float32) for s in (0.01, 0.5, 7.0, 0.1)]
    grown = GrowingHistogram()
    for part in parts:
        grown.update(part)
    everything = np.abs(np.concatenate(parts))
    width = 2.0**grown.exponent
    direct = np.bincount((everything / width).astype(np.int64), minlength=grown.fine_bins)
    assert np.array_equal(grown.counts, direct)
    assert grown.counts.sum() == everything.size


@pytest.mark.parametrize("method", ["entropy", "max", "percentile", "mse"])
def test_scales_identical_for_batch_sizes_and_order(method: str) -> None:
    """One pass, no range fixed in advance: batch sizes 1, 4, 16 clips and shuffled clip order agree."""
    rng = np.random.default_rng(4)
    clips = [rng.laplace(0, rng.uniform(0.2, 3.0), 2000).astype(np.float32) for _ in range(32)]
    results = set()
    for batch in (1, 4, 16):
        for shuffle in (False, True):
            order = rng.permutation(len(clips)) if shuffle else np.arange(len(clips))
            stats = StreamingStats()
            for start in range(0, len(clips), batch):
                stats.update("t", np.stack([clips[j] for j in order[start : start + batch]]))
            results.add(compute_amax(MethodSpec(method), stats.maxes.amax["t"], stats.histogram("t")))
    assert len(results) == 1


def test_all_zero_tensor_falls_back_to_max() -> None:
    stats = StreamingStats()
    stats.update("z", np.zeros(100, dtype=np.float32))
    assert stats.histogram("z") is None
    assert compute_amax(MethodSpec("entropy"), stats.maxes.amax["z"], None) == 0.0


def test_bad_method_parameters_are_user_errors() -> None:
    with pytest.raises(WorkbenchError, match="unknown calibration method"):
        MethodSpec("kl")
    with pytest.raises(WorkbenchError, match="percentile"):
        MethodSpec("percentile", 120.0)
    with pytest.raises(WorkbenchError, match="power of two"):
        MethodSpec("entropy", bins=1000)


def test_cache_round_trips_bit_exactly(tmp_path) -> None:
    amax = {"/encoder/layers.0/attention/q_proj/MatMul_input": 3.3, "feature_extractor.conv0": 0.1234567}
    keys = {"model": "abc", "set": "def", "method": "entropy", "bins": 2048, "workbench": "0.1.0"}
    original = cache_mod.CalibrationCache.from_amax(amax, keys)
    path = tmp_path / "calib.cache"
    original.save(path)
    text = path.read_text()
    assert text.splitlines()[0] == "TRT-100300-EntropyCalibration2"  # TensorRT 10.3.0's stamp
    for line in text.splitlines()[1:]:
        name, value = line.rsplit(": ", 1)
        assert len(value) == 8
        assert struct.unpack(">f", bytes.fromhex(value))[0] == original.scales[name]
        assert np.float32(amax[name] / 127.0) == np.float32(original.scales[name])
    again = cache_mod.load(path)
    assert again.scales == original.scales and again.to_text() == text and again.keys == keys
    again.save(tmp_path / "copy.cache")
    assert (tmp_path / "copy.cache").read_bytes() == path.read_bytes()


@pytest.mark.parametrize(
    "version, number",
    [
        ("5.1.0", 5100),
        ("7.1.3", 7103),
        ("8.5.1", 8501),
        ("8.6.0", 8600),
        ("10.3.0.26", 100300),
        ("10.13.0", 101300),
    ],
)
def test_trt_version_number_is_what_tensorrt_writes(version: str, number: int) -> None:
    """Headers seen in public caches: TRT-5100/7103/8501/8600 (TensorRT <= 8), TRT-100300/101300 (TensorRT 10)."""
    assert cache_header.trt_version_number(version) == number


@pytest.mark.parametrize(
    "method, algorithm",
    [
        ("entropy", "EntropyCalibration2"),
        ("max", "MinMaxCalibration"),
        ("percentile", "EntropyCalibration2"),
        ("mse", "EntropyCalibration2"),
    ],
)
def test_cache_header_per_method_and_true_method_in_sidecar(tmp_path, method: str, algorithm: str) -> None:
    path = tmp_path / f"{method}.cache"
    cache_mod.CalibrationCache.from_amax({"x": 1.0}, {"method": method}).save(path)
    assert path.read_text().splitlines()[0] == f"TRT-100300-{algorithm}"
    assert cache_mod.load(path).keys["method"] == method  # percentile/MSE: the stamp is not the method
    with pytest.raises(WorkbenchError, match="no legacy cache algorithm"):
        cache_mod.legacy_header("kl")


def test_restamping_changes_only_the_header() -> None:
    text = cache_mod.CalibrationCache.from_amax({"a": 2.0, "b": 0.5}, {"method": "max"}).to_text().encode()
    for_86 = cache_header.stamped(text, "8.6.1")
    assert for_86.split(b"\n", 1) == [b"TRT-8601-MinMaxCalibration", text.split(b"\n", 1)[1]]
    assert cache_header.stamped(text, "10.8.0", "EntropyCalibration2").startswith(
        b"TRT-100800-EntropyCalibration2\n"
    )
    with pytest.raises(WorkbenchError, match="not a TensorRT calibration cache"):
        cache_header.stamped(b"hello\n", "10.3.0")
    with pytest.raises(WorkbenchError, match="not like"):
        cache_header.trt_version_number("ten")


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


def test_edited_or_unsidecarred_cache_is_refused(tmp_path) -> None:
    path = tmp_path / "calib.cache"
    cache_mod.CalibrationCache.from_amax({"x": 1.0}, {"model": "a"}).save(path)
    path.write_text(path.read_text().replace("x: ", "y: "))
    with pytest.raises(WorkbenchError, match="edited"):
        cache_mod.load(path)
    cache_mod.sidecar(path).unlink()
    with pytest.raises(WorkbenchError, match="sidecar"):
        cache_mod.load(path)

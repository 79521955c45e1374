"""The compiled histogram kernel counts exactly what the numpy passes count; the weight-free graph reader
sees the same structure as ``onnx.load``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from workbench.calibration import kernels
from workbench.calibration.collectors import StreamingStats
from workbench.calibration.graph_structure import GraphSummary, outputs_fragment, read_structure
from workbench.calibration.methods import MethodSpec, compute_amax
from workbench.calibration.runner import activation_tensors

pytestmark = pytest.mark.skipif(
    not kernels.available(), reason="numba is not installed: only the numpy passes run"
)


def clips(seed: int) -> list[dict[str, np.ndarray]]:
    """Six 'clips' of tensors that grow, start at zero, sit at extreme exponents, or are not float32."""
    rng = np.random.default_rng(seed)
    out = []
    for c in range(6):
        out.append(
            {
                "growing": (rng.standard_normal((3, 700)) * 3.0**c).astype(np.float32),
                "shrinking": (rng.laplace(0, 1, 900) / 4.0**c).astype(np.float32),
                "zeros_then_values": (np.zeros(64) if c < 3 else rng.laplace(0, 1e-3, 64)).astype(np.float32),
                "relu": np.maximum(rng.standard_normal(800), 0).astype(np.float32),
                "tiny": (rng.standard_normal(300) * 1e-36).astype(np.float32),
                "huge": (rng.standard_normal(300) * 1e36).astype(np.float32),
                "float64": rng.standard_normal(200) * (c + 1),
                "transposed": rng.standard_normal((40, 30)).astype(np.float32).T,
                "one_value": np.full(50, -2.5 if c % 2 else 2.5, dtype=np.float32),
            }
        )
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_kernel_counts_equal_the_numpy_passes(monkeypatch, seed: int) -> None:
    assert kernels.ready()  # loaded by the module's skip condition
    results = []
    for enabled in (True, False):
        monkeypatch.setattr(kernels, "enabled", enabled)
        stats = StreamingStats()
        for clip in clips(seed):
            for name, values in clip.items():
                stats.update(name, values.copy(), overwrite=True)
        results.append(stats)
    fast, slow = results
    assert fast.maxes.amax == slow.maxes.amax
    for name in clips(seed)[0]:
        a, b = fast.histograms[name], slow.histograms[name]
        assert (a.exponent, a.zeros) == (b.exponent, b.zeros), name
        assert np.array_equal(a.counts, b.counts), name
        for spec in (MethodSpec("entropy"), MethodSpec("max"), MethodSpec("percentile"), MethodSpec("mse")):
            assert compute_amax(spec, fast.maxes.amax[name], fast.histogram(name)) == compute_amax(
                spec, slow.maxes.amax[name], slow.histogram(name)
            ), (name, spec.name)


def test_int32_buffer_is_settled_before_it_could_overflow(monkeypatch) -> None:
    """With the int32 room shrunk to 1,000 values the buffer is folded into the int64 counts many times
    (and one array is too large for it, so the numpy passes count that one): the counts stay exact."""
    from workbench.calibration import collectors

    rng = np.random.default_rng(7)
    arrays = [
        (rng.standard_normal(n) * s).astype(np.float32)
        for n, s in ((600, 1.0), (500, 2.0), (1500, 0.5), (700, 8.0))
    ]
    results = []
    for room in (collectors._INT32_ROOM, 1000):
        monkeypatch.setattr(collectors, "_INT32_ROOM", room)
        stats = StreamingStats()
        for values in arrays:
            stats.update("t", values.copy())
        results.append(stats.histograms["t"])
    assert results[1].recent_total <= 1000
    assert np.array_equal(results[0].counts, results[1].counts)
    assert results[0].counts.sum() == sum(a.size for a in arrays)


def test_kernel_takes_back_a_partial_count_and_leaves_the_input() -> None:
    counts = np.zeros(8, dtype=np.int32)
    values = np.array([0.5, 3.2, 7.9, 9.0, 1.0], dtype=np.float32)
    before = values.copy()
    top, done = kernels.count_float32(values, np.float32(1.0), 8, counts)
    assert not done and top == np.float32(9.0) and not counts.any()
    assert np.array_equal(values, before)
    top, done = kernels.count_float32(values[:3], np.float32(1.0), 8, counts)
    assert done and top == np.float32(7.9) and counts.tolist() == [1, 0, 0, 1, 0, 0, 0, 1]


def test_nan_is_still_an_error() -> None:
    stats = StreamingStats()
    stats.update("t", np.ones(10, dtype=np.float32))
    with pytest.raises(ValueError, match="non-finite"):
        stats.update("t", np.array([1.0, np.nan, 2.0], dtype=np.float32))
    with pytest.raises(ValueError, match="non-finite"):
        StreamingStats().update("u", np.array([np.inf, 1.0], dtype=np.float32))


def test_structure_reader_equals_onnx_load(tmp_path: Path) -> None:
    from tests.test_calibration_runner import small_graph

    path = tmp_path / "small.onnx"
    onnx.save(small_graph(), str(path))
    light = read_structure(path)
    assert light == GraphSummary.of_model(onnx.load(str(path)))
    assert activation_tensors(light) == activation_tensors(onnx.load(str(path))) == ["y", "z"]
    assert not light.external_data
    external = tmp_path / "ext.onnx"
    onnx.save(small_graph(), str(external), save_as_external_data=True, location="ext.data", size_threshold=0)
    assert read_structure(external).external_data
    assert read_structure(external).initializers == light.initializers


def test_outputs_fragment_is_what_onnx_serialises() -> None:
    names = ["a", "/encoder/layers.0/attention/MatMul_output_0", "x" * 300, "ünï"]
    graph = onnx.GraphProto()
    graph.output.extend(onnx.ValueInfoProto(name=n) for n in names)
    assert outputs_fragment(names) == onnx.ModelProto(graph=graph).SerializeToString()


def test_structure_reader_refuses_garbage(tmp_path: Path) -> None:
    path = tmp_path / "bad.onnx"
    path.write_bytes(b"\x3a\xff\xff\x7f" + b"x" * 10)
    with pytest.raises(ValueError, match="not an ONNX protobuf"):
        read_structure(path)


def test_kernel_and_numpy_counts_mix_exactly_and_reading_writes_nothing(monkeypatch) -> None:
    """One histogram fed by the kernel (int32 ``recent``), the numpy passes (int64 ``settled``) and all-zero
    arrays, growing in between, equals binning everything once; ``finish`` and ``counts`` leave both count
    arrays untouched (a kernel-only histogram never makes ``settled``: reading used to fold into it)."""
    from workbench.calibration.collectors import GrowingHistogram

    rng = np.random.default_rng(7)
    kernel_only = GrowingHistogram()
    kernel_only.add_compiled(rng.standard_normal(5000).astype(np.float32))
    assert kernel_only.finish() is not None and kernel_only.counts is not None
    assert kernel_only.settled is None

    mixed, seen = GrowingHistogram(), []
    for k, scale in enumerate((0.01, 0.0, 3.0, 0.2, 40.0, 1.0)):
        values = (rng.laplace(0, 1, 4000) * scale).astype(np.float32)
        seen.append(np.abs(values))
        if k % 2:
            mixed.update(values)  # the numpy passes (and the all-zero array)
        else:
            assert mixed.add_compiled(values) is not None
    assert mixed.settled is not None and mixed.recent_total > 0  # both arrays hold counts
    before = (mixed.settled.copy(), mixed.recent.copy(), mixed.zeros)
    everything = np.concatenate(seen)
    direct = np.bincount((everything / 2.0**mixed.exponent).astype(np.int64), minlength=mixed.fine_bins)
    assert np.array_equal(mixed.counts, direct)
    finished = mixed.finish()
    assert finished is not None and finished.counts.sum() == everything.size
    group = round(finished.range_max / 2.0**mixed.exponent) // mixed.bins
    assert np.array_equal(
        finished.counts, direct[: mixed.bins * group].reshape(mixed.bins, group).sum(axis=1)
    )
    assert np.array_equal(mixed.settled, before[0]) and np.array_equal(mixed.recent, before[1])
    assert mixed.zeros == before[2] == 4000

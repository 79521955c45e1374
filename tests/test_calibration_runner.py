"""The calibration pass on a small hand-built graph: both session routes, scratch-buffer reuse, aliasing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from workbench.calibration import kernels
from workbench.calibration.collectors import StreamingStats
from workbench.calibration.runner import _unshared, activation_tensors, calibration_session, collect_statistics
from workbench.model.export import INPUT
from workbench.model.features import normalise_audio


def small_graph() -> onnx.ModelProto:
    """input -> Relu (y) -> Reshape (z); y and z both feed a MatMul, so both are calibrated."""
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Relu", [INPUT], ["y"]), helper.make_node("Reshape", ["y", "shape"], ["z"]),
             helper.make_node("MatMul", ["y", "W1"], ["a"]), helper.make_node("MatMul", ["z", "W2"], ["b"])]
    inits = [numpy_helper.from_array(np.array([1, -1, 6], np.int64), "shape"),
             numpy_helper.from_array(rng.standard_normal((24, 3)).astype(np.float32), "W1"),
             numpy_helper.from_array(rng.standard_normal((6, 2)).astype(np.float32), "W2")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(INPUT, TensorProto.FLOAT, [1, 24])],
                              [helper.make_tensor_value_info("a", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("b", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_pass_equals_statistics_of_the_numpy_activations(tmp_path: Path) -> None:
    """Path route (kernel copy + appended outputs) and ModelProto route give the numpy answer exactly."""
    model = small_graph()
    assert activation_tensors(model) == ["y", "z"]
    path = tmp_path / "small.onnx"
    onnx.save(model, str(path))
    rng = np.random.default_rng(1)
    clips = [rng.laplace(0, s, 24).astype(np.float32) for s in (0.5, 3.0, 0.1, 8.0)]
    expected = StreamingStats()
    for audio in clips:
        y = np.maximum(normalise_audio(audio)[None], 0)
        expected.update("y", y.copy())
        expected.update("z", y.reshape(1, 4, 6).copy())
    for source in (path, small_graph()):
        stats = collect_statistics(source, clips, len(clips))
        assert stats.maxes.amax == expected.maxes.amax
        for name in ("y", "z"):
            assert np.array_equal(stats.histogram(name).counts, expected.histogram(name).counts)
            assert stats.histogram(name).range_max == expected.histogram(name).range_max
    assert path.read_bytes() == model.SerializeToString()  # the user's file is untouched


def test_model_with_external_data_is_calibrated_from_its_folder(tmp_path: Path) -> None:
    """Weights beside the graph: the session is built from the loaded model, not from a copied file."""
    path = tmp_path / "ext.onnx"
    onnx.save(small_graph(), str(path), save_as_external_data=True, location="ext.data", size_threshold=0)
    assert (tmp_path / "ext.data").is_file()
    clips = [np.random.default_rng(3).laplace(0, 1, 24).astype(np.float32)]
    from_external = collect_statistics(path, clips, 1)
    inline = collect_statistics(small_graph(), clips, 1)
    assert from_external.maxes.amax == inline.maxes.amax
    assert np.array_equal(from_external.histogram("z").counts, inline.histogram("z").counts)


def test_session_from_path_has_the_added_outputs(tmp_path: Path) -> None:
    path = tmp_path / "small.onnx"
    onnx.save(small_graph(), str(path))
    session = calibration_session(path, ["y", "z"])
    assert [o.name for o in session.get_outputs()] == ["a", "b", "y", "z"]


def test_overwrite_gives_the_same_statistics_and_only_then_changes_the_input(monkeypatch) -> None:
    """The numpy passes (no numba) use the array as scratch only when allowed to."""
    monkeypatch.setattr(kernels, "enabled", False)
    x = np.random.default_rng(2).standard_normal((3, 1000)).astype(np.float32)
    kept, scratch = StreamingStats(), StreamingStats()
    original = x.copy()
    kept.update("t", x)
    assert np.array_equal(x, original)
    scratch.update("t", x, overwrite=True)
    assert not np.array_equal(x, original)
    assert kept.maxes.amax == scratch.maxes.amax
    assert np.array_equal(kept.histogram("t").counts, scratch.histogram("t").counts)


def test_aliased_outputs_are_not_used_as_scratch() -> None:
    a = np.zeros(10, dtype=np.float32)
    separate = np.zeros(3, dtype=np.float32)
    assert _unshared([a, separate]) == [True, True]
    assert _unshared([a, a.reshape(2, 5), separate]) == [False, False, True]
    assert _unshared([separate, a[5:], a]) == [True, False, False]

"""The calibration pass on a small hand-built graph: both session routes, scratch-buffer reuse, aliasing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from workbench.calibration import kernels
from workbench.calibration.collectors import StreamingStats
from workbench.calibration.runner import (
    _unshared,
    activation_tensors,
    calibration_session,
    collect_statistics,
)
from workbench.model.export import INPUT
from workbench.model.features import normalise_audio


def small_graph() -> onnx.ModelProto:
    """input -> Relu (y) -> Reshape (z); y and z both feed a MatMul, so both are calibrated."""
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("Relu", [INPUT], ["y"]),
        helper.make_node("Reshape", ["y", "shape"], ["z"]),
        helper.make_node("MatMul", ["y", "W1"], ["a"]),
        helper.make_node("MatMul", ["z", "W2"], ["b"]),
    ]
    inits = [
        numpy_helper.from_array(np.array([1, -1, 6], np.int64), "shape"),
        numpy_helper.from_array(rng.standard_normal((24, 3)).astype(np.float32), "W1"),
        numpy_helper.from_array(rng.standard_normal((6, 2)).astype(np.float32), "W2"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(INPUT, TensorProto.FLOAT, [1, 24])],
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, None),
        ],
        inits,
    )
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


def wide_graph() -> onnx.ModelProto:
    """input [1, 24] -> MatMul with a 24x256 weight (24 KB: external data when linked) -> Relu -> MatMul."""
    rng = np.random.default_rng(5)
    nodes = [
        helper.make_node("MatMul", [INPUT, "W1"], ["h"]),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("MatMul", ["r", "W2"], ["logits"]),
    ]
    inits = [
        numpy_helper.from_array(rng.standard_normal((24, 256)).astype(np.float32), "W1"),
        numpy_helper.from_array(rng.standard_normal((256, 3)).astype(np.float32), "W2"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(INPUT, TensorProto.FLOAT, [1, 24])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, None)],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_linked_weights_model_holds_the_same_weights(tmp_path: Path) -> None:
    """The graph file written for a hard-linked model: same nodes and weights, outputs added, large
    weights external at their offsets in the linked file, small ones inline."""
    import os

    from workbench.calibration.graph_structure import EXTERNAL_MIN_BYTES, write_with_external_weights

    source = tmp_path / "wide.onnx"
    onnx.save(wide_graph(), str(source))
    folder = tmp_path / "session"
    folder.mkdir()
    os.link(source, folder / "weights.bin")
    write_with_external_weights(source, folder / "graph.onnx", "weights.bin", ["h", "r"])
    assert (folder / "graph.onnx").stat().st_size < 24 * 256 * 4  # W1 was not copied
    written = onnx.load(str(folder / "graph.onnx"), load_external_data=False)
    external = {t.name for t in written.graph.initializer if t.data_location == TensorProto.EXTERNAL}
    assert (
        external
        == {t.name for t in wide_graph().graph.initializer if t.ByteSize() >= EXTERNAL_MIN_BYTES}
        == {"W1"}
    )
    assert [o.name for o in written.graph.output] == ["logits", "h", "r"]
    (folder / "weights.bin").unlink()  # onnx.load refuses hard-linked data files (ONNX Runtime does not)
    (folder / "weights.bin").write_bytes(source.read_bytes())
    loaded = onnx.load(str(folder / "graph.onnx"))
    for mine, theirs in zip(loaded.graph.initializer, wide_graph().graph.initializer):
        assert np.array_equal(numpy_helper.to_array(mine), numpy_helper.to_array(theirs))
    assert list(loaded.graph.node) == list(wide_graph().graph.node)


def test_linked_and_copied_sessions_compute_the_same(tmp_path: Path, monkeypatch) -> None:
    """The hard-link route and the copy route (another file system: no link) give identical outputs."""
    import os

    source = tmp_path / "wide.onnx"
    onnx.save(wide_graph(), str(source))
    before = source.read_bytes()
    feed = {INPUT: np.random.default_rng(6).standard_normal((1, 24)).astype(np.float32)}
    linked = calibration_session(source, ["h", "r"]).run(["h", "r", "logits"], feed)

    def no_link(*_args, **_kwargs):
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", no_link)
    copied = calibration_session(source, ["h", "r"]).run(["h", "r", "logits"], feed)
    for a, b in zip(linked, copied):
        assert np.array_equal(a, b)
    assert source.read_bytes() == before and source.stat().st_nlink == 1  # the link went with the session


def test_statistics_list_tensors_in_graph_order(tmp_path: Path) -> None:
    """Whichever statistics thread finishes first, the tensors (and so the sidecars' lists) come in graph order."""
    path = tmp_path / "small.onnx"
    onnx.save(small_graph(), str(path))
    clips = [np.random.default_rng(k).laplace(0, 1, 24).astype(np.float32) for k in range(3)]
    stats = collect_statistics(path, clips, len(clips), checkpoint=2)
    assert list(stats.maxes.amax) == list(stats.histograms) == list(stats.tops) == ["y", "z"]
    stats.maxes.amax = dict(reversed(list(stats.maxes.amax.items())))
    stats.in_order(["y", "z"])
    assert list(stats.maxes.amax) == ["y", "z"]

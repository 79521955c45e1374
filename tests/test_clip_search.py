"""Clipping search for Conv inputs (``calibrate --clip-search``): its scoring graph computes what the INT8 variant
computes for that conv, it finds a tighter clipping where the tail of a long-tailed input hides the small values,
and a calibration with it records its choices, moves only ranges and keeps the convergence check about the
statistics. Small graphs in code, the tiny random Wav2Vec2 of ``test_recovery_calibrate``."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.test_recovery_wiring import calibrate_tiny
from workbench.calibration import cache as cache_mod
from workbench.calibration.clip_search import SCALE_INPUT, conv_inputs, scoring_graph, search_clipping
from workbench.calibration.methods import MethodSpec
from workbench.calibration.recovery import RecoveryOptions
from workbench.calibration.runner import collect_statistics, ranges_from_statistics
from workbench.quantize.plan import PrecisionPlan
from workbench.quantize.qdq import variant_model

C, V = 8, 5


def conv_model(
    seed: int = 0, channel_scales: np.ndarray | None = None, bias: bool = False
) -> onnx.ModelProto:
    """input_values [1, T] -> Unsqueeze -> Conv (1->C, k4 s2) -> Relu -> Conv (C->C, k3) -> Transpose -> MatMul -> logits.

    ``channel_scales``: each first-conv channel's weights multiplied by one of these (uneven Relu outputs);
    ``bias``: the second conv has a bias."""
    rng = np.random.default_rng(seed)
    w0 = rng.normal(size=(C, 1, 4)).astype(np.float32)
    if channel_scales is not None:
        w0 = w0 * np.asarray(channel_scales, np.float32)[:, None, None]
    inits = [
        numpy_helper.from_array(np.array([1], np.int64), "axes"),
        numpy_helper.from_array(w0, "w0"),
        numpy_helper.from_array(rng.normal(size=(C, C, 3)).astype(np.float32) / 3, "w1"),
        numpy_helper.from_array(rng.normal(size=(C, V)).astype(np.float32), "head"),
    ]
    conv1_inputs = ["r0", "w1"]
    if bias:
        inits.append(numpy_helper.from_array(rng.normal(size=C).astype(np.float32), "b1"))
        conv1_inputs.append("b1")
    nodes = [
        helper.make_node("Unsqueeze", ["input_values", "axes"], ["u"], name="unsqueeze"),
        helper.make_node("Conv", ["u", "w0"], ["c0"], name="conv0", kernel_shape=[4], strides=[2]),
        helper.make_node("Relu", ["c0"], ["r0"], name="act0"),
        helper.make_node("Conv", conv1_inputs, ["c1"], name="conv1", kernel_shape=[3]),
        helper.make_node("Transpose", ["c1"], ["t"], name="transpose", perm=[0, 2, 1]),
        helper.make_node("MatMul", ["t", "head"], ["logits"], name="head_matmul"),
    ]
    graph = helper.make_graph(
        nodes,
        "convs",
        [helper.make_tensor_value_info("input_values", TensorProto.FLOAT, [1, "t"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, "f", V])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def spiky(seed: int, n: int = 4000) -> np.ndarray:
    """Small values with rare large spikes: the long tail a max threshold is set by."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 0.05, n).astype(np.float32)
    x[rng.choice(n, 3, replace=False)] = 40.0
    return x


def run(model: onnx.ModelProto, feeds: dict) -> np.ndarray:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(["logits"], feeds)[0]


def test_conv_inputs_and_the_scoring_graph_compute_the_int8_variant_of_that_conv() -> None:
    model = conv_model()
    assert conv_inputs(model) == {"u": ["conv0"], "r0": ["conv1"]}
    x = spiky(1)[None]
    amax = {"u": 2.0, "r0": 3.0}
    for tensor, node in (("u", "conv0"), ("r0", "conv1")):
        variant = variant_model(model, amax, PrecisionPlan("one", "fp32", {node: "int8"}))
        expected = run(variant, {"input_values": x})
        scored = run(
            scoring_graph(model, tensor, [node]),
            {"input_values": x, SCALE_INPUT: np.array(amax[tensor] / 127, np.float32)},
        )
        np.testing.assert_allclose(scored, expected, rtol=1e-5, atol=1e-5)
        assert not np.allclose(scored, run(model, {"input_values": x}), atol=1e-3)  # it does quantize


def test_a_long_tailed_input_gets_a_tighter_clipping_than_its_maximum() -> None:
    model = conv_model()
    clips = [spiky(s) for s in range(12)]
    stats = collect_statistics(model, clips, len(clips), prepare=lambda a: a)
    own = ranges_from_statistics(stats, MethodSpec("max"))
    choices = search_clipping(model, stats, own, clips[:6], progress=False)
    assert set(choices) == {"u", "r0"}
    first = choices["u"]
    assert first.candidate.startswith("percentile-") and first.amax < own["u"] / 4
    assert first.kl < first.own_kl / 2
    for choice in choices.values():  # never worse than the run's own threshold; own kept on ties
        assert choice.kl <= choice.own_kl
        assert choice.scores["own"] == choice.own_kl
        if choice.candidate == "own":
            assert choice.amax == own[next(t for t, c in choices.items() if c is choice)]


@pytest.fixture(scope="module")
def tiny_cs(tmp_path_factory: pytest.TempPathFactory, tiny_sets):
    plain = calibrate_tiny(tmp_path_factory, tiny_sets, RecoveryOptions())
    searched = calibrate_tiny(tmp_path_factory, tiny_sets, RecoveryOptions(clip_search=True))
    return plain, searched


def test_a_calibration_with_clip_search_records_its_choices_and_moves_only_conv_ranges(tiny_cs) -> None:
    (_, _, plain), (_, _, searched) = tiny_cs
    assert searched.cache.name.endswith("-cs.cache")
    base, moved = cache_mod.load(plain.cache), cache_mod.load(searched.cache)
    assert moved.keys["recovery"]["clip_search"]["clips"] == 32
    record = moved.recovery["clip_search"]
    fp32 = onnx.load(str(searched.cache.parent / "model.fp32.onnx"), load_external_data=False)
    convs = set(conv_inputs(fp32))
    assert set(record["choices"]) <= convs and record["tensors"] == len(record["choices"]) > 0
    before, after = base.amax(), moved.amax()
    assert set(before) == set(after)
    for tensor in before:
        choice = record["choices"].get(tensor)
        if choice is None or choice["candidate"] == "own":
            assert after[tensor] == pytest.approx(before[tensor], rel=1e-6), tensor
        else:
            assert (
                after[tensor] == pytest.approx(choice["amax"], rel=1e-6) and choice["kl"] < choice["own_kl"]
            )
    # the convergence check reads the statistics, not the moved ranges: the same as without the search
    assert json.dumps(moved.convergence, sort_keys=True) == json.dumps(base.convergence, sort_keys=True)


def test_a_cache_made_with_other_clip_search_settings_is_refused_with_both_settings(tmp_path) -> None:
    from workbench.errors import WorkbenchError
    from workbench.jobs.prepare import check_recovery_matches

    asked = RecoveryOptions(bias_correction=True, clip_search=True)
    found = json.loads(json.dumps(asked.params()["recovery"]))
    check_recovery_matches(tmp_path / "c.cache", found, asked)  # the same settings: taken
    found["clip_search"]["percentiles"] = [99.5, 99.9]  # made by another version's search
    with pytest.raises(
        WorkbenchError, match=r"but other settings than this version's .*99\.5.*calibrate it again"
    ):
        check_recovery_matches(tmp_path / "c.cache", found, asked)

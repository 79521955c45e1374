"""The ONNX Runtime CPU flavour of a candidate carries the candidate's accuracy recovery (``--target ort-cpu``,
``calibrate --ort-cpu``): it is built from the same recovered source as the TensorRT-bound graph, the smoothed
graph its SmoothQuant ranges belong to and bias correction for its INT8 nodes. A small graph in code for bias
correction; the tiny random Wav2Vec2 calibrated with SmoothQuant and bias correction for the whole path."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

from tests.test_recovery import block_model, inputs
from tests.test_recovery_wiring import _amax, _means, calibrate_tiny
from workbench.calibration import cache as cache_mod
from workbench.calibration.recovery import RecoveryOptions
from workbench.jobs.prepare import prepare
from workbench.jobs.signoff import target_calibration
from workbench.model.features import normalise_audio
from workbench.quantize.metadata import made_of
from workbench.quantize.plan import PrecisionPlan
from workbench.quantize.qdq import build_variant, dequantized_weight
from workbench.quantize.recovered import RecoveredSource
from workbench.quantize.targets import candidates_for_target

INT8_FP16_REST = PrecisionPlan("int8", "int8")  # the TensorRT-bound INT8 plan: FP16 between the islands
INT8_FP32_REST = PrecisionPlan("int8", "int8", rest="fp32")


def _inits(path: Path) -> dict[str, np.ndarray]:
    return {i.name: numpy_helper.to_array(i) for i in onnx.load(str(path)).graph.initializer}


def _outputs(path: Path, feeds: dict[str, np.ndarray], optimised: bool = True) -> np.ndarray:
    """The first output by ONNX Runtime's CPU EP: fused kernels (``optimised``, as deployed) or unoptimised (the
    Q/DQ arithmetic exactly as the graph states it)."""
    options = ort.SessionOptions()
    if not optimised:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def test_the_cpu_flavour_of_a_bias_corrected_candidate_carries_the_corrected_bias(tmp_path: Path) -> None:
    model, x = block_model(), inputs(mean=2.0)
    base = tmp_path / "block.fp32.onnx"
    onnx.save(model, str(base))
    means, amax = _means(model, x), _amax(model, x)
    recovered = RecoveredSource(None, means, options={"bias_correction": True})
    graph, record = recovered.for_plan(INT8_FP16_REST, model)
    cand = build_variant(
        graph, amax, INT8_FP16_REST, tmp_path / "block.int8.onnx", with_plan=True, recovery=record
    )
    candidates = [("fp32", base), ("int8", cand)]

    carried = candidates_for_target("ort-cpu", candidates, amax, recovered=recovered)
    flavour = carried.candidates[1]
    assert (
        flavour.name == "int8-cpu"
        and "with the candidate's accuracy recovery (bias_correction)" in flavour.how
    )
    # the weight type's reason names the host's CPU ("x86 CPU without VNNI" on an AVX2 host), so only the recovery's
    # own wording is checked for absence
    assert "without the candidate's accuracy recovery" not in flavour.how
    assert "made without accuracy recovery" not in flavour.how
    assert made_of(flavour.path)[1]["recovery"]["techniques"] == ["bias_correction"]
    # q's bias Add constant is lowered by E[x] @ dW, dW from the float32 weight scales the flavour stores
    wq = numpy_helper.to_array(next(i for i in model.graph.initializer if i.name == "wq"))
    bq = numpy_helper.to_array(next(i for i in model.graph.initializer if i.name == "bq"))
    shift = means["ln1"].astype(np.float64) @ (dequantized_weight(wq, 1) - wq)
    inits = _inits(flavour.path)
    np.testing.assert_allclose(inits["bq"], bq - shift, rtol=1e-5, atol=1e-6)
    assert not np.allclose(inits["bq"], bq)
    ops = {n.name: n.op_type for n in onnx.load(str(flavour.path)).graph.node}
    assert (
        ops.get("ffn_in_bias_correction") == ops.get("head_bias_correction") == "Add"
    )  # layers without a bias
    corrected_error = np.abs((_outputs(flavour.path, {"x": x}) - _outputs(base, {"x": x})).mean((0, 1))).max()

    # a cache made without bias correction cannot give it: built from the baseline, and the record says so
    plain = candidates_for_target("ort-cpu", candidates, amax).candidates[1]
    assert "without the candidate's accuracy recovery (bias_correction)" in plain.how
    assert "made without accuracy recovery" in plain.how and "recovery" not in made_of(plain.path)[1]
    np.testing.assert_array_equal(_inits(plain.path)["bq"], bq)
    plain_error = np.abs((_outputs(plain.path, {"x": x}) - _outputs(base, {"x": x})).mean((0, 1))).max()
    assert corrected_error < plain_error  # and the correction does its job in the fused CPU kernels


@pytest.fixture(scope="module")
def smoothed(tmp_path_factory: pytest.TempPathFactory, tiny_sets):
    """The tiny random Wav2Vec2 calibrated with SmoothQuant (a fixed alpha, so tensors are smoothed) and bias
    correction, its CPU flavour written by calibrate (``ort_cpu``), and the sign-off's ranges and recovered source."""
    model, root, made = calibrate_tiny(
        tmp_path_factory, tiny_sets, RecoveryOptions("0.5", bias_correction=True), ort_cpu=True
    )
    assert cache_mod.load(made.cache).recovery["smoothquant"]["smoothed"] > 0
    amax, recovered = target_calibration(made.cache, cpu_flavours=True)
    assert recovered is not None and recovered.smoothed
    assert (
        target_calibration(made.cache, cpu_flavours=False)[1] is None
    )  # other targets need no recovery files
    return model, root, made, amax, recovered


def test_with_smoothquant_the_cpu_flavour_is_the_tensorrt_bound_graphs_arithmetic(
    smoothed, tiny_sets, tmp_path: Path
) -> None:
    """Built from the smoothed graph (the only one its ranges fit) with bias correction, the CPU flavour's logits
    sit on those of the TensorRT-bound Q/DQ graph of the same plan (FP32 between the islands, built the way
    compare/search/signoff build theirs, run unoptimised) on a few clips, far closer than either is to FP32;
    the flavour calibrate writes is the same."""
    model, root, made, amax, recovered = smoothed
    targeted = candidates_for_target(
        "ort-cpu", [("fp32", made.fp32_onnx), ("int8", made.int8_onnx)], amax, recovered=recovered
    )
    flavour = targeted.candidates[1]
    assert "with the candidate's accuracy recovery (smoothquant, bias_correction)" in flavour.how
    assert made_of(flavour.path)[1]["recovery"]["smoothed_graph"] is True
    prepared = prepare(model, str(tiny_sets.calib.path), "percentile", root=root, cache_path=made.cache)
    reference = tmp_path / "model.int8-fp32-rest.onnx"
    prepared.build(INT8_FP32_REST.with_guard(prepared.guard), reference)
    assert made.int8_ort_cpu is not None
    for utt in tiny_sets.eval.utterances[:3]:
        feeds = {"input_values": normalise_audio(tiny_sets.eval.audio(utt))[None]}
        ref, fp32 = _outputs(reference, feeds, optimised=False), _outputs(made.fp32_onnx, feeds)
        budget = 0.05 * np.abs(ref - fp32).mean()
        assert np.abs(_outputs(flavour.path, feeds) - ref).mean() <= budget, utt.id
        assert np.abs(_outputs(made.int8_ort_cpu, feeds) - ref).mean() <= budget, utt.id

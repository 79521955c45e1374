"""End to end on the demo model: export parity, calibration cache reuse, INT8 transcripts close to FP32."""

from __future__ import annotations

import jiwer
import numpy as np
import pytest

from workbench.backends.onnxruntime import OnnxRuntimeRunner
from workbench.calibrate_pipeline import run_calibrate
from workbench.calibration.methods import MethodSpec
from workbench.config import DEMO_MODEL_DIR
from workbench.model.export import INPUT, OUTPUT, module_of, normalise
from workbench.model_vocab import decode_ids
from workbench.quantize.plan import PrecisionPlan, quantizable_nodes
from workbench.quantize.qdq import build_variant

pytestmark = pytest.mark.slow


def transcripts(onnx_path, speech_set) -> list[str]:
    out = []
    with OnnxRuntimeRunner(onnx_path) as runner:
        for _, audio in speech_set.iter_audio():
            logits = runner.infer({INPUT: normalise(audio)[None]})[OUTPUT]
            out.append(decode_ids(logits[0].argmax(-1).tolist()))
    return out


def test_calibrate_export_cache_and_int8(tiny_sets, tmp_path) -> None:
    import onnx

    result = run_calibrate(DEMO_MODEL_DIR, str(tiny_sets.calib.path), MethodSpec("entropy"), root=tmp_path)
    assert result.parity.max_abs_logit_diff < 1e-3 and result.parity.token_agreement > 0.999
    assert not result.reused_cache
    graph = onnx.load(str(result.int8_onnx))
    ops = [n.op_type for n in graph.graph.node]
    assert ops.count("QuantizeLinear") >= result.tensors
    names = quantizable_nodes(onnx.load(str(result.fp32_onnx)))
    assert "encoder.layers.3.attention.q_proj" in {module_of(n) for n in names}
    refs = [u.text for u in tiny_sets.eval.utterances]
    fp32_wer = jiwer.wer(refs, transcripts(result.fp32_onnx, tiny_sets.eval))
    int8_wer = jiwer.wer(refs, transcripts(result.int8_onnx, tiny_sets.eval))
    assert int8_wer <= fp32_wer + 0.10, (fp32_wer, int8_wer)
    before = result.cache.read_bytes()
    again = run_calibrate(DEMO_MODEL_DIR, str(tiny_sets.calib.path), MethodSpec("entropy"), root=tmp_path)
    assert again.reused_cache and again.cache.read_bytes() == before
    other = run_calibrate(DEMO_MODEL_DIR, str(tiny_sets.calib.path), MethodSpec("max"), root=tmp_path)
    assert not other.reused_cache and other.cache != result.cache and result.cache.read_bytes() == before


def test_one_path_builds_fp32_fp16_and_mixed(tmp_path, tiny_sets) -> None:
    import onnx

    from workbench.model.export import export_onnx
    from workbench.model.loading import load_model

    fp32 = export_onnx(load_model(DEMO_MODEL_DIR), tmp_path / "m.onnx")
    nodes = quantizable_nodes(onnx.load(str(fp32)))
    amax = {}
    from workbench.calibration.runner import activation_tensors

    for name in activation_tensors(onnx.load(str(fp32))):
        amax[name] = 8.0
    conv_nodes = [n for n in nodes if "feature_extractor" in n]
    mixed = PrecisionPlan("mixed", "int8", {n: "fp16" for n in conv_nodes})
    audio = normalise(tiny_sets.eval.audio(tiny_sets.eval.utterances[0]))[None]
    outputs = {}
    for plan in (PrecisionPlan("fp32"), PrecisionPlan("fp16", "fp16"), mixed):
        path = build_variant(fp32, amax, plan, tmp_path / f"{plan.name}.onnx")
        g = onnx.load(str(path))
        casts = sum(n.op_type == "Cast" for n in g.graph.node)
        qs = sum(n.op_type == "QuantizeLinear" for n in g.graph.node)
        with OnnxRuntimeRunner(path) as runner:
            outputs[plan.name] = runner.infer({INPUT: audio})[OUTPUT]
        if plan.name == "fp32":
            assert qs == 0
        if plan.name == "fp16":
            assert qs == 0 and casts >= len(nodes)
        if plan.name == "mixed":
            assert qs > 0 and casts >= len(conv_nodes)
    ref = outputs["fp32"]
    assert np.max(np.abs(outputs["fp16"] - ref)) < 0.5
    assert mixed.int8_share(nodes) == pytest.approx(1 - len(conv_nodes) / len(nodes))

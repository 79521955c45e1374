"""End to end on the shipped demo model: export parity, INT8 transcripts close to FP32, cache reuse."""

from __future__ import annotations

import jiwer
import pytest

from workbench.backends.onnxruntime import OnnxRuntimeRunner
from workbench.calibration.methods import MethodSpec
from workbench.jobs import calibrate
from workbench.model.export import INPUT, OUTPUT, module_of
from workbench.model.features import normalise_audio
from workbench.model.vocab import load_vocabulary
from workbench.quantize.plan import quantizable_nodes
from workbench.resources import demo_model_dir

pytestmark = pytest.mark.slow


def transcripts(onnx_path, speech_set) -> list[str]:
    vocab = load_vocabulary(demo_model_dir())
    with OnnxRuntimeRunner(onnx_path) as runner:
        return [
            vocab.greedy(runner.infer({INPUT: normalise_audio(audio)[None]})[OUTPUT][0])
            for _, audio in speech_set.iter_audio()
        ]


def test_demo_model_int8_transcripts_close_to_fp32(tiny_sets, tmp_path) -> None:
    import onnx

    if not (demo_model_dir() / "config.json").exists():
        pytest.skip(f"demo model not present in {demo_model_dir()}")
    result = calibrate.run(
        calibrate.CalibrateInputs(
            demo_model_dir(), str(tiny_sets.calib.path), MethodSpec("entropy"), engines=tmp_path
        )
    )
    assert result.parity.max_abs_logit_diff < 1e-3 and result.parity.token_agreement > 0.999
    assert not result.reused_cache
    names = quantizable_nodes(onnx.load(str(result.fp32_onnx)))
    assert "encoder.layers.3.attention.q_proj" in {module_of(n) for n in names}
    refs = [u.text for u in tiny_sets.eval.utterances]
    fp32 = transcripts(result.fp32_onnx, tiny_sets.eval)
    int8 = transcripts(result.int8_onnx, tiny_sets.eval)
    fp32_wer, int8_wer = jiwer.wer(refs, fp32), jiwer.wer(refs, int8)
    assert fp32_wer < 0.5, fp32_wer  # the demo model does recognise held-out synthetic speech
    assert int8_wer <= fp32_wer + 0.10, (fp32_wer, int8_wer)
    assert jiwer.cer(fp32, int8) < 0.15
    before = result.cache.read_bytes()
    again = calibrate.run(
        calibrate.CalibrateInputs(
            demo_model_dir(),
            str(tiny_sets.calib.path),
            MethodSpec("entropy"),
            engines=tmp_path,
            parity_clips=1,
        )
    )
    assert again.reused_cache and again.cache.read_bytes() == before

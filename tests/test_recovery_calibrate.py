"""calibrate with the accuracy-recovery options on a small random Wav2Vec2ForCTC: provenance, files, reuse."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from workbench.backends.onnxruntime import OnnxRuntimeRunner
from workbench.calibration import cache as cache_mod
from workbench.calibration.methods import MethodSpec
from workbench.calibration.recovery import RecoveryOptions, load_arrays, means_path
from workbench.cli import main
from workbench.jobs import calibrate
from workbench.model.export import INPUT, OUTPUT
from workbench.model.features import normalise_audio
from workbench.model.synthetic import save_random_wav2vec2
from workbench.quantize.qdq import plan_path


@pytest.fixture(scope="module")
def recovered(tmp_path_factory: pytest.TempPathFactory, tiny_sets):
    model = save_random_wav2vec2(tmp_path_factory.mktemp("models") / "tiny", "tiny", seed=0)
    root = tmp_path_factory.mktemp("engines")
    inputs = calibrate.CalibrateInputs(
        model,
        str(tiny_sets.calib.path),
        MethodSpec("percentile", 99.99),
        engines=root,
        recovery=RecoveryOptions("auto", bias_correction=True, refine_ranges=True),
        parity_clips=1,  # export parity has its own tests (test_calibrate_tiny)
    )
    return inputs, calibrate.run(inputs)


def logits(path: Path, audio: np.ndarray) -> np.ndarray:
    with OnnxRuntimeRunner(path) as runner:
        return runner.infer({INPUT: normalise_audio(audio)[None]})[OUTPUT][0]


def test_recovery_is_in_the_provenance_files_and_plan(recovered, tiny_sets) -> None:
    _, result = recovered
    assert result.cache.name.endswith("-sq-rr-bc.cache") and not result.reused_cache
    cache = cache_mod.load(result.cache)
    assert cache.keys["recovery"] == {
        "smoothquant": "auto",
        "bias_correction": True,
        "refine_ranges": True,
        "alphas": cache.keys["recovery"]["alphas"],
    }
    assert {"smoothquant", "refine_ranges", "bias_correction"} <= set(cache.recovery)
    assert load_arrays(means_path(result.cache))
    plan = json.loads(plan_path(result.int8_onnx).read_text())
    assert plan["recovery"]["bias_correction"]["nodes"] > 0
    assert any("SmoothQuant" in line for line in result.lines())
    if cache.recovery["smoothquant"]["smoothed"]:  # the smoothed FP32 graph computes the FP32 function
        assert result.smoothed_onnx is not None and result.smoothed_onnx.exists()
        audio = tiny_sets.calib.audio(tiny_sets.calib.utterances[0])
        np.testing.assert_allclose(
            logits(result.smoothed_onnx, audio), logits(result.fp32_onnx, audio), rtol=1e-3, atol=1e-3
        )


def test_a_second_run_reuses_and_a_plain_run_keeps_its_own_cache(recovered) -> None:
    inputs, first = recovered
    again = calibrate.run(inputs)
    assert again.reused_cache and again.cache == first.cache
    plain = calibrate.run(
        calibrate.CalibrateInputs(
            inputs.model, inputs.calib_set, inputs.method, engines=inputs.engines, parity_clips=1
        )
    )
    assert plain.cache != first.cache and "recovery" not in cache_mod.load(plain.cache).keys


def test_a_bad_strength_is_one_error_line(capsys) -> None:
    assert main(["calibrate", "--smoothquant", "2"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error:") and "--smoothquant: takes a finite number in [0, 1]" in err

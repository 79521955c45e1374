"""Sign-off batching true to the deployment, on look-alike checkpoints saved by the installed transformers'
``save_pretrained``: a GroupNorm feature encoder (wav2vec2-base-960h, no attention mask) and a LayerNorm one
(wav2vec2-large-960h-lv60-self, exported with the mask it takes). At the defaults, and at a GPU's batch of 32,
the sign-off's transcripts equal transformers' own unbatched decode; only ``--pad-batches`` pads the GroupNorm
model, and the report says so."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from modelkit import ENGLISH_TEXTS, unit_set

from workbench.cli import main
from workbench.evaluate.batching import BatchPolicy, default_batch_size, takes_mask
from workbench.evaluate.decoders import decoder_for
from workbench.evaluate.inference import GREEDY
from workbench.evaluate.wer import Scoring

pytestmark = pytest.mark.slow

MODELS = {"group": "facebook/wav2vec2-base-960h", "layer": "facebook/wav2vec2-large-960h-lv60-self"}


@pytest.fixture(scope="module")
def evaluation(tmp_path_factory: pytest.TempPathFactory):
    from conftest import _speech_like

    # unit sets cycle two clip lengths, so equal-length clips can share a batch
    return unit_set(tmp_path_factory.mktemp("sets") / "deployed-eval", ENGLISH_TEXTS, _speech_like, seed=7)


@pytest.fixture(scope="module", params=sorted(MODELS))
def lookalike(request, tmp_path_factory: pytest.TempPathFactory):
    """(norm, folder, description, torch model, ONNX export with the mask input when the model takes one)."""
    from workbench.model.description import describe_model
    from workbench.model.export import export_onnx
    from workbench.model.loading import load_model
    from workbench.model.synthetic import save_lookalike

    root = tmp_path_factory.mktemp(request.param)
    folder = save_lookalike(root / "model", MODELS[request.param], seed=1, head_scale=50.0)
    description = describe_model(folder)
    model = load_model(description)
    onnx_path = export_onnx(model, root / "model.onnx", description, attention_mask=takes_mask(description))
    return request.param, folder, description, model, onnx_path


def _unbatched_transformers(model, description, evaluation) -> list[str]:
    """transformers' model on one clip at a time (its own feature extractor's input), greedy CTC, normalised."""
    import torch
    from transformers import AutoFeatureExtractor

    extractor = AutoFeatureExtractor.from_pretrained(str(description.folder))
    decode = decoder_for(GREEDY.decoder, description.vocabulary)
    scoring = Scoring.for_model(description)
    texts = []
    for utt in evaluation.utterances:
        inputs = extractor(evaluation.audio(utt), sampling_rate=16_000, return_tensors="pt")
        with torch.no_grad():
            logits = model(**inputs).logits[0].numpy()
        texts.append(scoring.normalise(decode(logits)))
    return texts


def _signoff(folder: Path, onnx_path: Path, evaluation, out: Path, capsys, *extra: str) -> dict:
    argv = ["signoff", "--candidate", f"fp32={onnx_path}", "--model", str(folder)]
    argv += ["--eval-set", str(evaluation.path), "--no-latency", "--resamples", "200", "--out", str(out)]
    code = main([*argv, *extra])
    captured = capsys.readouterr()
    assert code == 0, captured.err[-2000:]
    return json.loads((out / "report.json").read_text())


def _hyps(record: dict) -> list[str]:
    return [u["hyp"] for u in record["accuracy"]["candidates"]["fp32"]["utterances"]]


def test_model_takes_a_mask_only_without_a_group_norm_encoder(lookalike) -> None:
    norm, _, description, _, _ = lookalike
    assert takes_mask(description) == (norm == "layer")
    assert default_batch_size("ort-cpu") == 1  # batching buys no speed on ONNX Runtime CPU


def test_signoff_transcripts_equal_transformers_unbatched_decode(
    lookalike, evaluation, tmp_path, capsys
) -> None:
    norm, folder, description, model, onnx_path = lookalike
    expected = _unbatched_transformers(model, description, evaluation)
    assert len(set(expected)) > 1  # the random head says something different per clip
    default = _signoff(folder, onnx_path, evaluation, tmp_path / "default", capsys)
    assert default["backend"]["batching"]["batch_size"] == 1
    assert _hyps(default) == expected
    gpu_batch = _signoff(folder, onnx_path, evaluation, tmp_path / "b32", capsys, "--batch-size", "32")
    batching = gpu_batch["backend"]["batching"]
    assert batching["batch_size"] == 32
    assert batching["padded"] is (norm == "layer")  # the mask pads exactly; GroupNorm: equal lengths only
    assert _hyps(gpu_batch) == expected
    checks = batching["batch_check"]
    assert checks and checks[0]["differing_transcripts"] == 0


def test_pad_batches_pads_a_group_norm_model_and_the_report_says_so(
    lookalike, evaluation, tmp_path, capsys
) -> None:
    norm, folder, _, _, onnx_path = lookalike
    if norm != "group":
        pytest.skip("a model that takes an attention mask is padded with it either way")
    extra = ("--batch-size", "32", "--pad-batches")
    record = _signoff(folder, onnx_path, evaluation, tmp_path / "padded", capsys, *extra)
    assert record["backend"]["batching"]["padded"] is True
    assert any("--pad-batches" in note for note in record["notes"])


def test_policy_pads_a_group_norm_model_only_when_asked(lookalike) -> None:
    from workbench.backends.onnxruntime import OnnxRuntimeRunner

    norm, _, description, _, onnx_path = lookalike
    with OnnxRuntimeRunner(onnx_path) as runner:
        exact = BatchPolicy.for_runner(runner, description, 8)
        padded = BatchPolicy.for_runner(runner, description, 8, pad=True)
    if norm == "group":
        assert exact.max_padding == 0.0 and not exact.padded and not exact.mask
        assert 0.0 < padded.max_padding < 1.0 and padded.padded
    else:
        assert exact.mask and exact.padded and np.isinf(exact.max_padding)

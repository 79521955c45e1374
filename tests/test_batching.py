"""Batched evaluation: length buckets, padding bounds, masks, and batched logits against batch 1.

Two look-alike checkpoints written by the installed transformers' ``save_pretrained``: wav2vec2-base-960h
(GroupNorm feature encoder, no attention mask: zero padding, bounded) and wav2vec2-large-960h-lv60-self
(LayerNorm encoder, ``return_attention_mask``: exported with and without an ``attention_mask`` input).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from workbench.backends.onnxruntime import OnnxRuntimeRunner
from workbench.errors import WorkbenchError
from workbench.evaluate.batching import (
    BatchPolicy,
    ConvGeometry,
    default_batch_size,
    plan_batches,
    utterance_logits,
)
from workbench.evaluate.transcribe import batch_check, check_sample, logits_of, transcribe


def test_plan_batches_sorts_by_length_and_bounds_size_and_padding() -> None:
    lengths = [16000, 48000, 16500, 47000, 16100, 30000, 46000, 16200]
    batches = plan_batches(lengths, batch_size=3, max_padding=0.1)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for batch in batches:
        assert len(batch) <= 3
        longest = max(lengths[i] for i in batch)
        assert longest - min(lengths[i] for i in batch) <= 0.1 * longest
    # the 30000 clip is alone: its neighbours are more than 10 % shorter / longer
    assert [5] in batches
    assert plan_batches(lengths, 1, 0.5) == [[i] for i in sorted(range(8), key=lambda i: lengths[i])]
    assert plan_batches([100, 100, 101], 8, 0.0) == [[0, 1], [2]]  # equal lengths only


def test_batch_size_is_checked_and_defaults_per_backend() -> None:
    with pytest.raises(WorkbenchError, match="--batch-size"):
        plan_batches([1, 2], 0, 0.1)
    assert default_batch_size("ort-cpu") < default_batch_size("ort-cuda")


def test_conv_geometry_matches_the_exported_frames() -> None:
    geometry = ConvGeometry()
    assert geometry.frames(16000) == 49  # wav2vec2: 20 ms frames, 400-sample receptive field
    assert geometry.frames(400) == 1 and geometry.frames(399) == 0


def test_check_sample_spreads_over_the_set() -> None:
    assert check_sample(5, 10) == [0, 1, 2, 3, 4]
    picked = check_sample(1000, 10)
    assert len(picked) == 10 and picked[0] == 0 and picked[-1] == 999


def _clips(seconds: list[float], seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for s in seconds:
        n = int(s * 16000)
        t = np.arange(n) / 16000
        out.append((0.3 * np.sin(2 * np.pi * 220 * t) + 0.05 * rng.standard_normal(n)).astype(np.float32))
    return out


@pytest.fixture(scope="module")
def masked_model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, object]:
    """A lv60-self look-alike (return_attention_mask=True) exported with and without the mask input."""
    from transformers import AutoModelForCTC

    from workbench.model.description import describe_model
    from workbench.model.export import export_onnx
    from workbench.model.synthetic import save_lookalike

    folder = save_lookalike(
        tmp_path_factory.mktemp("lv60") / "m", "facebook/wav2vec2-large-960h-lv60-self", head_scale=8.0
    )
    description = describe_model(folder)
    assert description.features.return_attention_mask
    torch_model = AutoModelForCTC.from_pretrained(str(folder)).eval()
    with_mask = export_onnx(torch_model, folder / "mask.onnx", description, attention_mask=True)
    without = export_onnx(torch_model, folder / "plain.onnx", description)
    return with_mask, without, description


@pytest.fixture(scope="module")
def group_norm_model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    """A base-960h look-alike: GroupNorm encoder, no attention mask."""
    from transformers import AutoModelForCTC

    from workbench.model.description import describe_model
    from workbench.model.export import export_onnx
    from workbench.model.synthetic import save_lookalike

    folder = save_lookalike(
        tmp_path_factory.mktemp("b960") / "m", "facebook/wav2vec2-base-960h", head_scale=8.0
    )
    description = describe_model(folder)
    assert not description.features.return_attention_mask
    torch_model = AutoModelForCTC.from_pretrained(str(folder)).eval()
    return export_onnx(torch_model, folder / "model.onnx", description), description


def _alone(path: Path, description, clips: list[np.ndarray]) -> list[np.ndarray]:
    with OnnxRuntimeRunner(path) as runner:
        masked = "attention_mask" in runner.graph_inputs()
        rows = [description.prepare(c)[None] for c in clips]
        return [logits_of(runner, r, np.ones_like(r, np.int64) if masked else None)[0] for r in rows]


def test_masked_model_gets_the_mask_and_batched_logits_match_batch_1(masked_model) -> None:
    with_mask, _, description = masked_model
    clips = _clips([1.0, 1.7, 2.3, 3.1])  # padding of up to 68 % of the longest clip
    rows = [description.prepare(c) for c in clips]
    alone = _alone(with_mask, description, clips)
    with OnnxRuntimeRunner(with_mask) as runner:
        policy = BatchPolicy.for_runner(runner, description, 4)
        assert policy.mask and policy.batch_size == 4
        got = dict(utterance_logits(runner, rows, policy, ConvGeometry.of_model(description), 32))
    assert len(got) == 4
    for i, ref in enumerate(alone):
        assert got[i].shape == ref.shape
        np.testing.assert_allclose(got[i], ref, atol=2e-3)


def test_masked_model_without_a_mask_input_batches_equal_lengths_only(masked_model) -> None:
    _, without, description = masked_model
    with OnnxRuntimeRunner(without) as runner:
        policy = BatchPolicy.for_runner(runner, description, 8)
    assert not policy.mask and policy.max_padding == 0.0
    clips = _clips([1.0, 1.0, 1.5])
    texts = transcribe(OnnxRuntimeRunner(without), clips, description, batch_size=8)
    assert texts.batching["attention_mask"] is False
    assert texts.texts == transcribe(OnnxRuntimeRunner(without), clips, description).texts


def test_group_norm_model_gets_no_mask_and_bounded_zero_padding_when_the_deployment_pads(
    group_norm_model,
) -> None:
    path, description = group_norm_model
    clips = _clips([2.0, 2.05, 2.1, 2.15, 3.0], seed=1)
    rows = [description.prepare(c) for c in clips]
    alone = _alone(path, description, clips)
    with OnnxRuntimeRunner(path) as runner:
        assert BatchPolicy.for_runner(runner, description, 8).max_padding == 0.0  # equal lengths by default
        policy = BatchPolicy.for_runner(runner, description, 8, pad=True)
        assert not policy.mask and 0.0 < policy.max_padding < 1.0
        got = dict(utterance_logits(runner, rows, policy, ConvGeometry.of_model(description), 32))
    # the 3 s clip is not padded with the 2 s ones; every clip keeps its own frame count
    for i, ref in enumerate(alone):
        assert got[i].shape == ref.shape
    np.testing.assert_allclose(got[4], alone[4], atol=1e-4)  # alone in its batch
    batched = transcribe(OnnxRuntimeRunner(path), clips, description, batch_size=8, pad=True)
    assert batched.batching["padded"] is True
    check = batch_check(OnnxRuntimeRunner(path), clips, batched.texts, description, 8, references=["A"] * 5)
    assert check.utterances == 5 and 0 <= check.differing <= 5
    assert check.wer_batched is not None and check.wer_batch1 is not None
    assert check.to_json()["wer_difference_points"] == pytest.approx(
        100 * (check.wer_batched - check.wer_batch1)
    )


def test_batched_transcripts_go_through_the_configured_and_also_decoders(masked_model) -> None:
    """Batching gives each utterance its own logits; the decoder and every ``also`` decoder run on them, so
    batch 8 gives batch 1's texts per decoder, in the clips' order."""
    from workbench.evaluate.inference import DecoderSettings

    with_mask, _, description = masked_model
    clips = _clips([1.0, 2.3, 1.7, 3.1, 1.2], seed=3)
    beam = DecoderSettings("beam", beam_width=4)
    one = transcribe(OnnxRuntimeRunner(with_mask, threads=1), clips, description, also=[beam])
    many = transcribe(OnnxRuntimeRunner(with_mask, threads=1), clips, description, also=[beam], batch_size=8)
    assert many.batching["batch_size"] == 8 and many.batching["attention_mask"] is True
    assert many.texts == one.texts
    assert list(many.by_decoder) == [beam.name] and many.by_decoder == one.by_decoder
    assert len(many.by_decoder[beam.name]) == len(clips)


def test_chunked_inference_runs_chunk_by_chunk_whatever_the_batch_size(masked_model) -> None:
    from workbench.evaluate.inference import inference_config
    from workbench.evaluate.transcribe import transcribe_checked

    with_mask, _, description = masked_model
    clips = _clips([3.1, 1.0, 2.6], seed=4)
    config = inference_config(chunk_length_s=1.5, stride_s=0.3)
    one = transcribe(OnnxRuntimeRunner(with_mask, threads=1), clips, description, inference=config)
    many, check = transcribe_checked(
        OnnxRuntimeRunner(with_mask, threads=1), clips, description, "m", 8, inference=config
    )
    assert many.texts == one.texts
    assert many.batching["batch_size"] == 1 and many.batching["chunked"] is True
    assert check is None  # chunks already run at batch 1: nothing to check against


class _NoMemoryForBatches(OnnxRuntimeRunner):
    """Runs batches of one clip; a larger batch runs out of memory."""

    def infer_impl(self, feeds):
        from workbench.backends.onnxruntime import OutOfMemory

        values = feeds["input_values"]
        if values.shape[0] > 1:
            raise OutOfMemory("ran out of memory", values.shape[1] / 16000)
        return super().infer_impl(feeds)


def test_out_of_memory_in_a_batch_names_its_longest_clip_and_the_batch_size(masked_model) -> None:
    with_mask, _, description = masked_model
    clips = _clips([1.0, 1.05, 1.1], seed=5)
    labels = ["utterance a", "utterance b", "utterance c"]
    with pytest.raises(WorkbenchError, match=r"utterance c \(the longest clip of a batch of 3.*--batch-size"):
        transcribe(_NoMemoryForBatches(with_mask, threads=1), clips, description, labels=labels, batch_size=8)
    alone = transcribe(
        _NoMemoryForBatches(with_mask, threads=1), clips, description, labels=labels, batch_size=1
    )
    assert len(alone.texts) == 3

"""Inference as deployed: chunk merging against transformers' own ASR pipeline on a saved look-alike model,
greedy and beam decoders (flashlight-text), the blank penalty, and the profile check for chunk lengths."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from workbench.config import EngineProfile
from workbench.errors import WorkbenchError
from workbench.evaluate.chunking import Chunk, chunk_spans, chunked_logits, samples_per_frame
from workbench.evaluate.decoders import beam_alphabet, decoder_for, penalised
from workbench.evaluate.inference import (
    GREEDY,
    ChunkSettings,
    DecoderSettings,
    check_profile_holds,
    config_from_json,
    inference_config,
)
from workbench.model.description import describe_model
from workbench.model.vocab import DEFAULT_VOCABULARY, VOCAB
from workbench.optional import has_module

flashlight_missing = pytest.mark.skipif(
    not has_module("flashlight.lib.text.decoder"),
    reason="flashlight-text is not installed (setup.sh installs it)",
)


@pytest.fixture(scope="module")
def lookalike(tmp_path_factory):
    """A wav2vec2-base-960h look-alike saved by the installed transformers, its torch model and ONNX export."""
    from workbench.model.export import export_onnx
    from workbench.model.loading import load_model
    from workbench.model.synthetic import save_lookalike

    root = tmp_path_factory.mktemp("chunking")
    folder = save_lookalike(root / "model", "facebook/wav2vec2-base-960h", seed=3, head_scale=50.0)
    description = describe_model(folder)
    model = load_model(description)
    onnx_path = export_onnx(model, root / "model.onnx", description)
    return folder, description, model, onnx_path


def _torch_infer(model):
    import torch

    def infer(row: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return model(torch.from_numpy(row)[None, :]).logits[0].numpy()

    return infer


# the pipeline's default stride (chunk / 6), asymmetric strides, a trailing piece shorter than the left
# stride (skipped by the pipeline), and audio shorter than one chunk
CASES = [(11.3, 3.0, None), (9.7, 2.0, (0.3, 0.5)), (6.05, 2.0, (0.5, 0.25)), (1.7, 4.0, None)]


@pytest.mark.parametrize("seconds,chunk_s,stride", CASES)
def test_chunk_merging_equals_transformers_pipeline(lookalike, speech_like, seconds, chunk_s, stride) -> None:
    from transformers import pipeline

    folder, description, model, _ = lookalike
    audio = speech_like(seconds, seed=int(seconds * 10))
    asr = pipeline("automatic-speech-recognition", model=str(folder), device="cpu")
    kwargs = {"chunk_length_s": chunk_s} | ({"stride_length_s": stride} if stride is not None else {})
    expected = asr(audio.copy(), **kwargs)["text"]
    settings = ChunkSettings.of(chunk_s, stride)
    align = samples_per_frame(description)
    assert align == model.config.inputs_to_logits_ratio == 320
    merged = chunked_logits(audio, settings, _torch_infer(model), description.prepare, 16_000, align)
    ids = merged.argmax(-1).tolist()
    # the pipeline decodes CTC with skip_special_tokens=False: the same call on the merged ids
    assert asr.tokenizer.decode(ids, skip_special_tokens=False) == expected
    assert len(set(ids)) > 3  # the random head changes token from frame to frame, so seams would show


def test_chunking_changes_the_frames_it_should(lookalike, speech_like) -> None:
    """Merged logits are not the whole-clip logits (normalisation and context are per chunk), and a clip
    no longer than a chunk is fed whole."""
    _, description, model, _ = lookalike
    infer = _torch_infer(model)
    audio = speech_like(8.0, seed=4)
    whole = infer(description.prepare(audio))
    merged = chunked_logits(audio, ChunkSettings.of(2.0), infer, description.prepare, 16_000, 320)
    assert abs(len(merged) - len(whole)) <= 3 and not np.allclose(
        merged[: len(whole) - 3], whole[: len(merged) - 3]
    )
    short = speech_like(1.5, seed=5)
    assert np.array_equal(
        chunked_logits(short, ChunkSettings.of(2.0), infer, description.prepare, 16_000, 320),
        infer(description.prepare(short)),
    )


def test_transcribe_runs_chunks_through_a_runner(lookalike, speech_like) -> None:
    """The ONNX Runtime path: transcribe with a chunked configuration decodes the merged logits."""
    from workbench.backends.onnxruntime import OnnxRuntimeRunner
    from workbench.evaluate.transcribe import transcribe

    _, description, model, onnx_path = lookalike
    audios = [speech_like(7.3, seed=7), speech_like(1.2, seed=8)]
    config = inference_config(chunk_length_s=2.5, stride_s=0.4)
    texts = transcribe(OnnxRuntimeRunner(onnx_path), audios, description, inference=config).texts
    infer = _torch_infer(model)
    expected = [
        description.decode(chunked_logits(a, config.chunks, infer, description.prepare, 16_000, 320))
        for a in audios
    ]
    assert texts == expected and texts[0]


def test_chunk_spans_cover_the_audio_once() -> None:
    spans = chunk_spans(10_000, 3_200, 640, 320)
    kept = [(s.start + s.left, s.end - s.right) for s in spans]
    assert kept[0][0] == 0 and kept[-1][1] == 10_000
    assert all(a[1] == b[0] for a, b in itertools.pairwise(kept))  # seams meet exactly
    assert chunk_spans(3_000, 3_200, 640, 320) == [Chunk(0, 3_000, 0, 0)]  # shorter than a chunk: whole
    with pytest.raises(WorkbenchError, match="leaves nothing"):
        chunk_spans(10_000, 960, 640, 320)


def test_profile_that_cannot_hold_the_chunk_is_refused_in_one_line() -> None:
    config = inference_config(chunk_length_s=20.0)
    with pytest.raises(WorkbenchError) as err:
        check_profile_holds(EngineProfile(1.0, 4.0, 8.0), config, "the calibration set's profile")
    message = str(err.value)
    assert "\n" not in message and "20 s chunks" in message and "--chunk-seconds 8" in message
    check_profile_holds(EngineProfile(1.0, 10.0, 20.0), config)  # fits
    check_profile_holds(EngineProfile(1.0, 4.0, 8.0), GREEDY)  # whole clips: the per-clip check applies


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(chunk_length_s=2.0, stride_s=1.0), "leave nothing"),
        (dict(stride_s=1.0), "needs a chunk length"),
        (dict(decoder="viterbi"), "--decoder takes"),
        (dict(hotwords=["hello"]), "need the beam decoder"),
        (dict(decoder="beam", lm="/nonexistent/lm.arpa"), "does not exist"),
        (dict(decoder="beam", beam_width=0), "at least 1"),
    ],
)
def test_bad_inference_options_are_refused(kwargs, match) -> None:
    with pytest.raises(WorkbenchError, match=match):
        inference_config(**kwargs)


def test_configuration_round_trips_through_its_record(tmp_path) -> None:
    lm = tmp_path / "lm.arpa"
    lm.write_text("\\data\\\n")
    config = inference_config(
        chunk_length_s=10, stride_s=(1, 2), decoder="beam", lm=lm, hotwords=["cat"], blank_penalty=0.5
    )
    record = config.to_json()
    assert record["decoder"]["name"] == "beam+lm" and record["decoder"]["blank_penalty"] == 0.5
    assert record["chunks"] == {"length_s": 10.0, "left_s": 1.0, "right_s": 2.0}
    assert config_from_json(record) == config and config_from_json(None) == GREEDY


def _logits(ids: list[int], width: int = len(VOCAB), peak: float = 8.0) -> np.ndarray:
    out = np.zeros((len(ids), width), dtype=np.float32)
    out[np.arange(len(ids)), ids] = peak
    return out


def test_blank_penalty_turns_near_blank_frames_into_characters() -> None:
    v = VOCAB
    logits = _logits([v["C"], v["<pad>"], v["A"], v["<pad>"], v["T"]])
    logits[1, v["A"]] = 7.0  # the blank wins by 1 here
    logits[3, v["T"]] = 7.5
    greedy = decoder_for(DecoderSettings(), DEFAULT_VOCABULARY)
    assert greedy(logits) == "CAT"
    penalised_greedy = decoder_for(DecoderSettings(blank_penalty=2.0), DEFAULT_VOCABULARY)
    assert penalised_greedy(logits) == "CAT"  # the blank frames now repeat their neighbours
    logits[1, v["A"]], logits[1, v["C"]] = 0.0, 7.0
    assert penalised_greedy(logits) == "CAT" and greedy(logits) == "CAT"
    logits[1, v["C"]], logits[1, v["O"]] = 0.0, 7.0
    assert greedy(logits) == "CAT" and penalised_greedy(logits) == "COAT"
    assert np.array_equal(penalised(logits, 0, 0.0), logits)


@flashlight_missing
def test_beam_without_lm_agrees_with_greedy_on_peaked_logits() -> None:
    v = VOCAB
    ids = [v[c] for c in "HH"] + [0, v["E"], v["L"], 0, v["L"], v["O"], v["|"], v["<s>"], v["W"], v["E"]]
    beam = decoder_for(DecoderSettings("beam", beam_width=8), DEFAULT_VOCABULARY)
    greedy = decoder_for(DecoderSettings(), DEFAULT_VOCABULARY)
    assert greedy(_logits(ids)) == beam(_logits(ids)) == "HELLO WE"


def test_beam_alphabet_keeps_ids_and_silences_special_tokens() -> None:
    labels, silent = beam_alphabet(DEFAULT_VOCABULARY)
    assert len(labels) == DEFAULT_VOCABULARY.size and labels[0] == "" and labels[VOCAB["|"]] == " "
    assert sorted(silent) == [VOCAB["<s>"], VOCAB["</s>"], VOCAB["<unk>"]] and labels[VOCAB["E"]] == "E"
    assert len(set(labels)) == len(labels)


@flashlight_missing
def test_hotwords_reach_the_beam() -> None:
    """An ambiguous frame: 'CAT' or 'CUT'; the hotword decides."""
    v = VOCAB
    logits = _logits([v["C"], v["A"], v["T"]], peak=5.0)
    logits[1, v["U"]] = 4.8
    plain = decoder_for(DecoderSettings("beam", beam_width=16), DEFAULT_VOCABULARY)
    hot = decoder_for(DecoderSettings("beam", beam_width=16, hotwords=("CUT",)), DEFAULT_VOCABULARY)
    assert plain(logits) == "CAT" and hot(logits) == "CUT"
    assert math.isfinite(float(logits.sum()))


@flashlight_missing
def test_a_hotword_phrase_is_refused_with_the_reason() -> None:
    with pytest.raises(WorkbenchError, match="is a phrase"):
        decoder_for(DecoderSettings("beam", hotwords=("BIG CAT",)), DEFAULT_VOCABULARY)


def test_job_files_carry_the_inference_configuration(tmp_path) -> None:
    """The dashboard's Run page writes a job file; the configuration must come back as the same types."""
    from workbench.jobs.codec import read_job, write_job
    from workbench.jobs.search import SearchInputs
    from workbench.jobs.signoff import SignoffInputs

    lm = tmp_path / "lm.arpa"
    lm.write_text("\\data\\\n")
    config = inference_config(chunk_length_s=8, stride_s=(1, 0.5), decoder="beam", lm=lm, blank_penalty=0.2)
    also = [DecoderSettings(), DecoderSettings("beam", beam_width=4, hotwords=("CAT",))]
    jobs = {
        "signoff": SignoffInputs(eval_set="e", out_dir=tmp_path / "r", inference=config, also_decoders=also),
        "search": SearchInputs(model="m", inference=config),
    }
    for name, inputs in jobs.items():
        write_job(tmp_path / f"{name}.json", inputs)
        _, back = read_job(tmp_path / f"{name}.json")
        assert back.inference == config and isinstance(back.inference.decoder.lm, type(lm))
    assert back.inference.chunks == ChunkSettings(8.0, 1.0, 0.5)
    _, signoff_back = read_job(tmp_path / "signoff.json")
    assert signoff_back.also_decoders == also


def test_search_refuses_several_decoders(capsys) -> None:
    from workbench.cli import main

    assert main(["search", "--decoder", "greedy,beam"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "one --decoder" in err

"""Model folders as the installed transformers saves them: ``Wav2Vec2Processor.save_pretrained`` (the feature
extractor's settings nested in ``processor_config.json``, no ``preprocessor_config.json``) and the layout of a
feature extractor saved on its own (``preprocessor_config.json``, what transformers 4 wrote). Every folder here
is written by transformers' own ``save_pretrained``; no processor file is written by hand."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from modelkit import ENGLISH_TEXTS, unit_set

from workbench.cli import main
from workbench.errors import WorkbenchError
from workbench.model.description import describe_model
from workbench.model.synthetic import PROCESSOR_LAYOUTS, save_lookalike

# LayerNorm feature encoder with conv bias: the layout where feeding normalised audio to a raw-audio model
# changes its output most
LAYER_NORM_MODEL = "facebook/wav2vec2-large-960h-lv60-self"


@pytest.mark.parametrize("layout", PROCESSOR_LAYOUTS)
def test_both_processor_layouts_are_read(layout, tmp_path) -> None:
    folder = save_lookalike(
        tmp_path / "m", LAYER_NORM_MODEL, preprocessor={"do_normalize": False}, layout=layout
    )
    files = {p.name for p in folder.iterdir()}
    # what transformers wrote decides which file holds the settings
    assert ("preprocessor_config.json" in files) is (layout == "separate")
    description = describe_model(folder)
    assert description.features.do_normalize is False and description.features.from_file
    assert description.record()["do_normalize"] is False
    assert (
        description.structure["feat_extract_norm"] == "layer" and description.structure["conv_bias"] is True
    )


@pytest.mark.parametrize("layout", PROCESSOR_LAYOUTS)
def test_an_8_khz_processor_is_refused(layout, tmp_path) -> None:
    folder = save_lookalike(
        tmp_path / "m", "facebook/wav2vec2-base-960h", preprocessor={"sampling_rate": 8000}, layout=layout
    )
    with pytest.raises(WorkbenchError, match="expects 8000 Hz audio"):
        describe_model(folder)


def test_an_8_khz_processor_is_one_error_line_at_calibrate(tmp_path, speech_like, capsys) -> None:
    folder = save_lookalike(
        tmp_path / "m", "facebook/wav2vec2-base-960h", preprocessor={"sampling_rate": 8000}
    )
    calib = unit_set(tmp_path / "calib", ["ONE", "TWO", "THREE", "FOUR"], speech_like)
    engines = tmp_path / "engines"
    capsys.readouterr()  # save_pretrained's progress bar
    code = main(["calibrate", "--model", str(folder), "--set", str(calib.path), "--engines", str(engines)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1 and err[0].startswith("error:") and "8000 Hz" in err[0]
    assert not any(engines.rglob("*.onnx"))


def _transformers_transcripts(
    folder: Path, audios: list[np.ndarray], do_normalize: bool | None = None
) -> list[str]:
    """Greedy CTC transcripts by transformers itself: its processor prepares the clips, its model runs them,
    its tokenizer decodes (collapse repeats first, the default); special tokens left as text are dropped."""
    import torch
    import transformers

    processor = transformers.Wav2Vec2Processor.from_pretrained(str(folder))
    if do_normalize is not None:
        processor.feature_extractor.do_normalize = do_normalize
    model = transformers.AutoModelForCTC.from_pretrained(str(folder)).eval()
    special = [
        t for t in processor.tokenizer.all_special_tokens if t != processor.tokenizer.word_delimiter_token
    ]
    out = []
    for audio in audios:
        inputs = processor(audio, sampling_rate=16_000, return_tensors="pt")
        with torch.no_grad():
            ids = model(inputs.input_values).logits[0].argmax(-1).tolist()
        text = processor.tokenizer.decode(ids)
        for token in special:
            text = text.replace(token, "")
        out.append(" ".join(text.split()))
    return out


@pytest.mark.slow
def test_raw_audio_model_saved_by_transformers_signs_off_with_transformers_transcripts(
    tmp_path, speech_like, capsys
) -> None:
    folder = save_lookalike(
        tmp_path / "m", LAYER_NORM_MODEL, preprocessor={"do_normalize": False}, head_scale=50.0
    )
    assert not (folder / "preprocessor_config.json").exists()
    calib = unit_set(
        tmp_path / "calib", ["THE CAT SAT", "A DOG RAN HOME", "RED SKY", "COLD WATER"], speech_like
    )
    evaluation = unit_set(tmp_path / "eval", ENGLISH_TEXTS[:4], speech_like, seed=1)
    out = tmp_path / "report"
    argv = [
        "signoff",
        "--model",
        str(folder),
        "--calib-set",
        str(calib.path),
        "--eval-set",
        str(evaluation.path),
    ]
    argv += ["--method", "max", "--engines", str(tmp_path / "engines"), "--no-latency", "--resamples", "200"]
    code = main([*argv, "--out", str(out)])
    assert code == 0, capsys.readouterr().err[-2000:]
    record = json.loads((out / "report.json").read_text())
    assert record["model"]["do_normalize"] is False
    hyps = [u["hyp"] for u in record["accuracy"]["candidates"]["fp32"]["utterances"]]
    audios = [a for _, a in evaluation.iter_audio()]
    description = describe_model(folder)
    expected = [description.normalise_text(t) for t in _transformers_transcripts(folder, audios)]
    assert any(expected) and hyps == expected
    # the check can fail: the same model fed normalised audio writes other transcripts
    normalised = [description.normalise_text(t) for t in _transformers_transcripts(folder, audios, True)]
    assert normalised != expected


def test_ctc_decoding_collapses_repeats_before_dropping_special_tokens(tmp_path) -> None:
    """``H E L <pad> L O`` is HELLO (collapse, then drop); transformers' ``skip_special_tokens=True`` drops
    first and writes HELO. A special token between two equal letters separates them like the blank."""
    import transformers

    folder = save_lookalike(tmp_path / "m", "facebook/wav2vec2-base-960h")
    vocabulary = describe_model(folder).vocabulary
    tokenizer = transformers.Wav2Vec2Processor.from_pretrained(str(folder)).tokenizer
    ids = [vocabulary.token_to_id[t] for t in ["H", "E", "L", "<pad>", "L", "O", "|", "L", "<s>", "L"]]
    assert vocabulary.decode(ids) == "HELLO LL"
    assert tokenizer.decode(ids, skip_special_tokens=True) == "HELO L"  # the order the workbench does not use
    assert tokenizer.decode(ids).replace("<s>", "") == "HELLO LL"  # transformers' default: collapse first

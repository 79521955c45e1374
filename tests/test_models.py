"""The model description: look-alikes of the public checkpoints (published configs, shrunk, random weights)
are described, exported and grouped per architecture; vocabularies decode to their own alphabet with their
own blank; references are normalised to the vocabulary and scored in WER or CER; do_normalize=False models
get raw audio; unsupported models are refused with one line before anything is written."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import ClassVar

import numpy as np
import onnx
import pytest
from modelkit import (
    CHECKPOINTS,
    CHINESE_VOCAB,
    LOWER_VOCAB,
    chinese_model,
    lower_case_model,
    tree_state,
    unit_set,
)

from workbench.cli import main
from workbench.errors import WorkbenchError
from workbench.model.architectures import SUPPORTED
from workbench.model.description import describe_model, description_of_onnx
from workbench.model.published import CHECKPOINTS as PUBLISHED
from workbench.model.published import SHRINK, SHRINK_KEEP
from workbench.model.synthetic import save_lookalike
from workbench.model.textnorm import TextNormaliser
from workbench.model.vocab import DEFAULT_VOCABULARY, Vocabulary, load_vocabulary

STRUCTURE = (
    "feat_extract_norm",
    "do_stable_layer_norm",
    "conv_bias",
    "position_embeddings_type",
    "num_buckets",
    "conv_kernel",
    "conv_stride",
    "feat_proj_layer_norm",
    "conv_pos_kernel_size",
    "num_conv_pos_embeddings",
)


@pytest.fixture(scope="module")
def lookalikes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("lookalikes")
    return {
        name: save_lookalike(root / name.replace("/", "--"), name, seed=0, head_scale=50.0)
        for name in CHECKPOINTS
    }


# ---------------------------------------------------------------- description of each public checkpoint


@pytest.mark.parametrize("name", CHECKPOINTS)
def test_lookalike_keeps_the_published_structure_and_is_described(lookalikes, name) -> None:
    folder = lookalikes[name]
    published = PUBLISHED[name]
    saved = json.loads((folder / "config.json").read_text())
    shrunk = set(SHRINK) - set(SHRINK_KEEP.get(saved["model_type"], ()))
    for key in set(STRUCTURE) & set(published["config"]) - shrunk:
        assert saved[key] == published["config"][key], key
    description = describe_model(folder)
    assert description.architecture == published["config"]["architectures"][0]
    assert description.features.do_normalize == published["preprocessor"]["do_normalize"]
    assert description.features.return_attention_mask == published["preprocessor"]["return_attention_mask"]
    assert description.vocabulary.blank_id == 0 and description.error_unit == "wer"
    assert description.normalise_text("Don't stop—now!") == "DON'T STOP NOW"
    assert description.structure["feat_extract_norm"] == published["config"].get("feat_extract_norm", "layer")


@pytest.mark.parametrize("name", CHECKPOINTS)
def test_export_parity_groups_and_metadata(lookalikes, name, tmp_path, speech_like) -> None:
    from workbench.compare.groups import node_groups
    from workbench.model.export import export_onnx, parity_check
    from workbench.model.loading import load_model
    from workbench.quantize.plan import quantizable_nodes

    description = describe_model(lookalikes[name])
    model = load_model(description)
    path = export_onnx(model, tmp_path / "model.onnx", description)
    parity = parity_check(model, path, [speech_like(1.3, seed=1), speech_like(2.1, seed=2)], description)
    assert (
        parity.max_abs_logit_diff < 1e-3 and parity.token_agreement > 0.99 and parity.transcripts_equal == 2
    )
    assert description_of_onnx(path).same_model(description)
    graph = onnx.load(str(path))
    groups = node_groups(graph)
    members = Counter(n for g in groups for n in g.nodes)
    assert set(members) == set(quantizable_nodes(graph)) and set(members.values()) == {1}
    names = {g.name: g for g in groups}
    assert {f"feature_extractor.conv_layers.{i}" for i in range(7)} | {
        "feature_projection",
        "lm_head",
    } <= set(names)
    layers = PUBLISHED[name]["config"]
    for i in range(2):  # the shrunk models have two layers
        if layers["model_type"] == "wav2vec2-conformer":
            attn = f"encoder.layers.{i}.self_attn"
            assert len(names[f"encoder.layers.{i}.conv_module"].nodes) == 3  # pointwise, depthwise, pointwise
            assert {f"encoder.layers.{i}.ffn1", f"encoder.layers.{i}.ffn2"} <= set(names)
            relative = layers["position_embeddings_type"] == "relative"
            assert (f"{attn}.pos_proj" in names) == relative
            assert len(names[f"{attn}.scores"].nodes) == (3 if relative else 2)  # + the position term
        else:
            attn = f"encoder.layers.{i}.attention"
            assert f"encoder.layers.{i}.feed_forward" in names
            assert len(names[f"{attn}.scores"].nodes) == 2  # QK^T and A.V
            if layers["model_type"] == "wavlm":
                assert len(names[f"{attn}.rel_pos_bias"].nodes) == 1  # the gate of the relative position bias
                assert [n.split("/")[-1] for n in names[f"{attn}.out_proj"].nodes] == ["Gemm"]
        assert len(names[f"{attn}.qkv_proj"].nodes) == 3
        assert len(names[f"{attn}.out_proj"].nodes) == 1
    if layers["model_type"] != "wav2vec2-conformer":
        assert "encoder.pos_conv_embed" in names


# ---------------------------------------------------------------- vocabularies and text


def test_lower_case_vocabulary_with_its_blank_last(tmp_path) -> None:
    folder = lower_case_model(tmp_path / "lower")
    description = describe_model(folder)
    vocab = description.vocabulary
    assert vocab.blank_id == 29 and vocab.size == 32 and vocab.word_delimiter == "|"
    assert {"[PAD]", "[UNK]", "<s>", "</s>"} <= vocab.special
    ids = [LOWER_VOCAB[c] for c in "hh"] + [29, 30, 28] + [LOWER_VOCAB[c] for c in "i|'"] + [29, 31, 29]
    ids += [LOWER_VOCAB[c] for c in "ll"] + [0, 29, LOWER_VOCAB["z"]]
    # repeats collapse; blank 29, <s>, </s>, [UNK] write nothing; id 0 (the default blank) is '|' here
    assert vocab.decode(ids) == "hi 'l z"
    assert DEFAULT_VOCABULARY.decode([7, 0, 7]) == "AA" and DEFAULT_VOCABULARY.decode([29]) == "J"
    norm = description.normaliser
    assert norm.case == "lower" and norm.apostrophe
    assert description.normalise_text("HELLO, World! It\u2019s 'quoted'") == "hello world it's quoted"
    assert description.error_unit == "wer"


def test_vocabulary_without_apostrophe_joins_contractions() -> None:
    vocab = Vocabulary(
        {"<pad>": 0, "|": 1, **{c: i + 2 for i, c in enumerate("abcdefghijklmnopqrstuvwxyz")}}, 0
    )
    norm = TextNormaliser.for_vocabulary(vocab)
    assert not norm.apostrophe and norm("Don't STOP") == "dont stop"


def test_default_normaliser_folds_accents_and_keeps_letters_it_cannot_write() -> None:
    norm = TextNormaliser.for_vocabulary(DEFAULT_VOCABULARY)
    assert norm("Héllo wörld, ça va?") == "HELLO WORLD CA VA"
    assert norm("naïve Æsop's straße") == "NAIVE AESOP'S STRASSE"
    assert norm("it\u2019s a well-known_fact 42") == "IT'S A WELL KNOWN FACT"
    assert norm("Привет world") == "ПРИВЕТ WORLD"  # not writable, but in the reference: an error, not hidden


def test_character_vocabulary_is_scored_in_characters(tmp_path) -> None:
    description = describe_model(chinese_model(tmp_path / "zh"))
    assert description.error_unit == "cer" and not description.normaliser.spaces
    assert description.normalise_text("我们 在学习，中文。") == "我们在学习中文"
    assert description.normalise_text("你好 OK") == "你好OK"  # letters it lacks are kept
    assert description.with_error_unit("wer").error_unit == "wer"
    from workbench.evaluate.wer import Scoring, score_utterance

    scored = score_utterance("x", "我们在学习。", "我在学生", Scoring.for_model(description))
    assert (scored.reference_words, scored.errors) == (5, 2)  # 们 deleted, 习 -> 生


def test_vocab_json_is_required(tmp_path) -> None:
    folder = save_lookalike(tmp_path / "m", "facebook/wav2vec2-base-960h")
    (folder / "vocab.json").unlink()
    with pytest.raises(WorkbenchError, match="no vocab.json"):
        describe_model(folder)


def test_vocabulary_of_another_model_is_refused(tmp_path) -> None:
    folder = save_lookalike(tmp_path / "m", "facebook/wav2vec2-base-960h")
    (folder / "vocab.json").write_text(json.dumps(CHINESE_VOCAB), encoding="utf-8")
    with pytest.raises(WorkbenchError, match="CTC head has 32 outputs"):
        describe_model(folder)


def test_multilingual_vocabulary_picks_the_target_language(tmp_path) -> None:
    vocab = {"eng": {"<pad>": 0, "|": 1, "a": 2}, "fra": {"<pad>": 0, "é": 1}}
    (tmp_path / "vocab.json").write_text(json.dumps(vocab))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"target_lang": "fra", "pad_token": "<pad>"}))
    vocab = load_vocabulary(tmp_path)
    assert vocab.token_to_id == {"<pad>": 0, "é": 1} and vocab.word_delimiter is None


# ---------------------------------------------------------------- features: raw audio for do_normalize=False


def _first_conv_input(onnx_path: Path) -> str:
    graph = onnx.load(str(onnx_path))
    conv = next(n for n in graph.graph.node if n.op_type == "Conv")
    return conv.input[0]


@pytest.mark.parametrize(
    "name,raw",
    [("patrickvonplaten/wavlm-libri-clean-100h-base-plus", True), ("facebook/wav2vec2-base-960h", False)],
)
def test_calibration_feeds_what_the_feature_extractor_would(
    lookalikes, name, raw, tmp_path, speech_like
) -> None:
    """The cache's range of the first conv's input (= input_values) is the raw audio's peak for a
    do_normalize=False model and the normalised audio's peak otherwise."""
    from workbench.calibration import cache as cache_mod
    from workbench.calibration.methods import MethodSpec
    from workbench.jobs import calibrate
    from workbench.model.features import normalise_audio as normalise

    sset = unit_set(tmp_path / "calib", ["ONE", "TWO", "THREE"], speech_like)
    result = calibrate.run(
        calibrate.CalibrateInputs(
            lookalikes[name], str(sset.path), MethodSpec("max"), engines=tmp_path / "engines", parity_clips=1
        )
    )
    amax = cache_mod.load(result.cache).amax()[_first_conv_input(result.fp32_onnx)]
    audios = [a for _, a in sset.iter_audio()]
    raw_peak = max(float(np.abs(a).max()) for a in audios)
    normalised_peak = max(float(np.abs(normalise(a)).max()) for a in audios)
    assert raw_peak < 1.0 < normalised_peak  # the two are far apart for these clips
    assert amax == pytest.approx(raw_peak if raw else normalised_peak, rel=1e-4)
    assert result.model.features.do_normalize is (not raw)


def test_transcription_and_timing_feed_raw_audio_to_a_raw_model(lookalikes, tmp_path, speech_like) -> None:
    from workbench.backends.onnxruntime import OnnxRuntimeRunner
    from workbench.evaluate.latency import LatencyConfig, measure_latency
    from workbench.evaluate.transcribe import transcribe
    from workbench.model.export import export_onnx
    from workbench.model.loading import load_model

    class Recording(OnnxRuntimeRunner):  # the real ONNX Runtime runner, keeping what it was fed
        fed: ClassVar[list[np.ndarray]] = []

        def __init__(self, model: Path) -> None:
            super().__init__(model, streams=1)  # every run through infer_impl (concurrent runs bypass it)

        def infer_impl(self, feeds):
            Recording.fed.append(np.array(feeds["input_values"]))
            return super().infer_impl(feeds)

    description = describe_model(lookalikes["patrickvonplaten/wavlm-libri-clean-100h-base-plus"])
    path = export_onnx(load_model(description), tmp_path / "wavlm.onnx", description)
    audio = speech_like(1.5, seed=3)
    transcribe(Recording(path), [audio], description)
    np.testing.assert_array_equal(Recording.fed[0][0], audio)
    Recording.fed.clear()
    measure_latency(
        Recording(path), {"all": (1.5, [audio])}, LatencyConfig((2,), 0, 1), prepare=description.prepare
    )
    np.testing.assert_array_equal(Recording.fed[0], np.stack([audio, audio]))


# ---------------------------------------------------------------- unsupported models: one line, nothing written


def _wav2vec2_model_without_head(folder: Path, claims_ctc: bool) -> Path:
    import torch
    import transformers

    from workbench.model.synthetic import lookalike_config

    values = lookalike_config("facebook/wav2vec2-base-960h")
    values.pop("model_type")
    values["architectures"] = ["Wav2Vec2Model"]
    torch.manual_seed(0)
    transformers.Wav2Vec2Model(transformers.Wav2Vec2Config(**values)).save_pretrained(str(folder))
    (folder / "vocab.json").write_text(json.dumps(PUBLISHED["facebook/wav2vec2-base-960h"]["vocab"]))
    if claims_ctc:  # a config edited to say ForCTC over weights without a head
        config = json.loads((folder / "config.json").read_text())
        config["architectures"] = ["Wav2Vec2ForCTC"]
        (folder / "config.json").write_text(json.dumps(config))
    return folder


def _config_only(folder: Path, config: dict) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "vocab.json").write_text(json.dumps({"<pad>": 0, "a": 1}))
    return folder


def _whisper(folder: Path) -> Path:
    import transformers

    config = transformers.WhisperConfig(
        d_model=32,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
    )
    config.architectures = ["WhisperForConditionalGeneration"]
    folder.mkdir(parents=True)
    config.save_pretrained(str(folder))
    return folder


def _bert(folder: Path) -> Path:
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.BertConfig(
        hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, vocab_size=100
    )
    transformers.BertForMaskedLM(config).save_pretrained(str(folder))
    return folder


def _audio_classifier(folder: Path) -> Path:
    folder = save_lookalike(folder, "facebook/wav2vec2-base-960h")
    config = json.loads((folder / "config.json").read_text())
    config["architectures"] = ["Wav2Vec2ForSequenceClassification"]
    (folder / "config.json").write_text(json.dumps(config))
    return folder


UNSUPPORTED = {
    "wav2vec2-model-without-head": (lambda f: _wav2vec2_model_without_head(f, False), "no CTC head"),
    "ctc-config-over-headless-weights": (lambda f: _wav2vec2_model_without_head(f, True), "no CTC head"),
    "whisper": (_whisper, "WhisperForConditionalGeneration"),
    "bert": (_bert, "BertForMaskedLM"),
    "audio-classifier": (_audio_classifier, "Wav2Vec2ForSequenceClassification"),
    "unknown-model-type": (
        lambda f: _config_only(f, {"model_type": "not-a-model", "architectures": ["Wav2Vec2ForCTC"]}),
        "model_type is 'not-a-model'",
    ),
    "config-transformers-cannot-load": (
        lambda f: _config_only(
            f, {"model_type": "wav2vec2", "architectures": ["Wav2Vec2ForCTC"], "conv_dim": "many"}
        ),
        "transformers cannot load",
    ),
    "config-not-json": (
        lambda f: (_config_only(f, {}), (f / "config.json").write_text("{not json"))[0],
        "config.json cannot be read",
    ),
}


@pytest.fixture(scope="module")
def small_sets(tmp_path_factory: pytest.TempPathFactory):
    from conftest import _speech_like

    root = tmp_path_factory.mktemp("sets")
    return (
        unit_set(root / "unit-calib", ["ONE TWO", "THREE", "FOUR FIVE"], _speech_like),
        unit_set(root / "unit-eval", ["SIX", "SEVEN EIGHT", "NINE"], _speech_like, seed=1),
    )


@pytest.mark.parametrize("case", sorted(UNSUPPORTED))
def test_unsupported_model_is_one_error_line_and_nothing_is_written(
    case, tmp_path, small_sets, capsys
) -> None:
    make, named = UNSUPPORTED[case]
    folder = make(tmp_path / case)
    calib, evaluation = small_sets
    engines, out = tmp_path / "engines", tmp_path / "report"
    before = tree_state(folder, calib.path, evaluation.path)
    capsys.readouterr()  # what making the folder printed
    for argv in (
        ["calibrate", "--model", str(folder), "--set", str(calib.path), "--engines", str(engines)],
        [
            "compare",
            "--model",
            str(folder),
            "--calib-set",
            str(calib.path),
            "--engines",
            str(engines),
            "--no-progress",
        ],
        [
            "search",
            "--model",
            str(folder),
            "--calib-set",
            str(calib.path),
            "--engines",
            str(engines),
            "--no-progress",
        ],
        [
            "signoff",
            "--model",
            str(folder),
            "--calib-set",
            str(calib.path),
            "--eval-set",
            str(evaluation.path),
            "--engines",
            str(engines),
            "--out",
            str(out),
        ],
    ):
        assert main(argv) == 1, argv[0]
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: "), (argv[0], err)
        assert named in err[0] and SUPPORTED in err[0], err[0]
    assert not engines.exists() and not out.exists()
    assert tree_state(folder, calib.path, evaluation.path) == before


def test_damaged_weights_are_one_error_line_and_nothing_is_written(tmp_path, small_sets, capsys) -> None:
    """A pytorch_model.bin that is not a checkpoint passes the checks (pickled weights are not read before
    loading) and then fails to load: one line, no folder under engines/."""
    folder = save_lookalike(tmp_path / "m", "facebook/wav2vec2-base-960h")
    (folder / "model.safetensors").unlink()
    (folder / "pytorch_model.bin").write_bytes(b"not a checkpoint")
    engines = tmp_path / "engines"
    capsys.readouterr()
    assert (
        main(
            ["calibrate", "--model", str(folder), "--set", str(small_sets[0].path), "--engines", str(engines)]
        )
        == 1
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: could not load a Wav2Vec2ForCTC"), err
    assert "save_pretrained" in err[0] and not engines.exists()


def test_a_hub_id_that_is_not_here_is_one_error_line(tmp_path, small_sets, capsys) -> None:
    engines = tmp_path / "engines"
    assert (
        main(
            [
                "calibrate",
                "--model",
                "nobody/no-such-model",
                "--set",
                str(small_sets[0].path),
                "--engines",
                str(engines),
            ]
        )
        == 1
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "hub id 'nobody/no-such-model'" in err[0] and "local folder" in err[0]
    assert not engines.exists()


def test_identical_infinities_carry_no_error() -> None:
    """WavLM's graph holds -inf (log of relative distance 0) in FP32 and in every variant alike."""
    from workbench.compare.metrics import ErrorSums

    ref = np.array([-np.inf, 1.0, 2.0, 3.0], dtype=np.float32)
    sums = ErrorSums()
    sums.add(ref, ref.copy())
    assert sums.cosine == pytest.approx(1.0) and sums.max_abs == 0.0 and sums.numel == 3
    broken = ErrorSums()
    with np.errstate(invalid="ignore"):
        broken.add(ref, np.array([0.0, 1.0, 2.0, 3.0], dtype=np.float32))
    assert not np.isfinite(broken.max_abs)  # a real difference in infinities still shows

"""Randomly initialised CTC models of known shapes, for tests and benchmarks (no download).

``random_wav2vec2``/``save_random_wav2vec2``: a Wav2Vec2ForCTC of the sizes in ``SIZES`` with the default
vocabulary. ``save_lookalike``: a folder shaped like a public checkpoint (``workbench.model.published``):
its config (optionally shrunk), preprocessor and tokenizer files, with random weights, through the installed
transformers' own ``save_pretrained`` (model and ``Wav2Vec2Processor``) exactly as a user's folder is written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.model.vocab import VOCAB

SIZES: dict[str, dict[str, Any]] = {
    "tiny": dict(
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=128,
        conv_dim=(32,) * 7,
        num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=4,
    ),
    "base": dict(
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        intermediate_size=3072,
        conv_dim=(512,) * 7,
        num_conv_pos_embeddings=128,
        num_conv_pos_embedding_groups=16,
    ),
}


def random_wav2vec2(size: str = "tiny", seed: int = 0) -> Any:
    """A Wav2Vec2ForCTC with random weights (character vocabulary of 32), eval mode, float32."""
    import torch
    from transformers import Wav2Vec2Config, Wav2Vec2ForCTC

    if size not in SIZES:
        raise WorkbenchError(f"unknown model size {size!r}; choose one of {', '.join(SIZES)}")
    config = Wav2Vec2Config(
        vocab_size=len(VOCAB),
        conv_kernel=(10, 3, 3, 3, 3, 2, 2),
        conv_stride=(5, 2, 2, 2, 2, 2, 2),
        feat_extract_norm="group",
        do_stable_layer_norm=False,
        pad_token_id=VOCAB["<pad>"],
        **SIZES[size],
    )
    torch.manual_seed(seed)
    return Wav2Vec2ForCTC(config).eval()


def _write_json(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, indent=1, ensure_ascii=False), encoding="utf-8")


def save_random_wav2vec2(folder: Path, size: str = "tiny", seed: int = 0) -> Path:
    """Save a random model in the Hugging Face layout (weights, config, and the processor saved by
    transformers' own ``Wav2Vec2Processor.save_pretrained``)."""
    folder = Path(folder)
    random_wav2vec2(size, seed).save_pretrained(str(folder))
    save_processor(folder, VOCAB, {"pad_token": "<pad>", "word_delimiter_token": "|"}, {"do_normalize": True})
    return folder


#: How ``save_processor`` writes the processor: ``processor`` = ``Wav2Vec2Processor.save_pretrained`` (the
#: feature extractor's settings nested in ``processor_config.json``, as transformers 5 writes them);
#: ``separate`` = the tokenizer and the feature extractor each saved on its own (``preprocessor_config.json``,
#: the file transformers 4 wrote for a processor too).
PROCESSOR_LAYOUTS = ("processor", "separate")


def save_processor(
    folder: Path,
    vocab: dict[str, int],
    tokenizer: dict[str, Any],
    preprocessor: dict[str, Any],
    added_tokens: dict[str, int] | None = None,
    layout: str = "processor",
) -> None:
    """Write a model's processor files with the installed transformers' own ``save_pretrained``.

    ``tokenizer``/``preprocessor`` are the keyword settings of ``Wav2Vec2CTCTokenizer`` and
    ``Wav2Vec2FeatureExtractor``; ``added_tokens`` are tokens beyond ``vocab`` that must get exactly these
    ids (the tokenizer adds missing ``bos``/``eos`` tokens itself, after the vocabulary).
    """
    import tempfile

    from transformers import Wav2Vec2CTCTokenizer, Wav2Vec2FeatureExtractor, Wav2Vec2Processor

    if layout not in PROCESSOR_LAYOUTS:
        raise WorkbenchError(
            f"unknown processor layout {layout!r}; choose one of {', '.join(PROCESSOR_LAYOUTS)}"
        )
    ignored = ("tokenizer_class", "feature_extractor_type", "processor_class")
    with tempfile.TemporaryDirectory() as tmp:
        vocab_file = Path(tmp) / "vocab.json"
        _write_json(vocab_file, vocab)
        tok = Wav2Vec2CTCTokenizer(
            str(vocab_file), **{k: v for k, v in tokenizer.items() if k not in ignored}
        )
    missing = [t for t in (added_tokens or {}) if t not in tok.get_vocab()]
    if missing:
        tok.add_tokens(missing)
    got = {t: tok.convert_tokens_to_ids(t) for t in added_tokens or {}}
    if got != dict(added_tokens or {}):
        raise WorkbenchError(f"the tokenizer gave the added tokens ids {got}, not {added_tokens}")
    features = Wav2Vec2FeatureExtractor(**{k: v for k, v in preprocessor.items() if k not in ignored})
    if layout == "processor":
        Wav2Vec2Processor(feature_extractor=features, tokenizer=tok).save_pretrained(str(folder))
    else:
        tok.save_pretrained(str(folder))
        features.save_pretrained(str(folder))


def lookalike_config(name: str, shrink: bool = True, **overrides: Any) -> dict[str, Any]:
    """The public ``config.json`` of checkpoint ``name`` (shrunk to test size when ``shrink``), with overrides."""
    from workbench.model.published import CHECKPOINTS, SHRINK, SHRINK_KEEP

    if name not in CHECKPOINTS:
        raise WorkbenchError(f"no published config for {name!r}; known: {', '.join(CHECKPOINTS)}")
    config = dict(CHECKPOINTS[name]["config"])
    if shrink:
        keep = SHRINK_KEEP.get(config["model_type"], ())
        config.update({k: v for k, v in SHRINK.items() if k not in keep})
    config.update(overrides)
    return config


def save_lookalike(
    folder: Path,
    name: str,
    *,
    shrink: bool = True,
    seed: int = 0,
    config: dict[str, Any] | None = None,
    vocab: dict[str, int] | None = None,
    tokenizer: dict[str, Any] | None = None,
    preprocessor: dict[str, Any] | None = None,
    added_tokens: dict[str, int] | None = None,
    head_scale: float = 1.0,
    layout: str = "processor",
) -> Path:
    """A folder like checkpoint ``name``: its config (``config`` overrides keys), preprocessor and tokenizer
    files (``vocab``/``tokenizer``/``preprocessor`` replace or extend them; ``added_tokens`` are tokens after
    the vocabulary, as tokenizers that add ``<s>``/``</s>`` write them), saved by transformers itself in
    ``layout`` (``PROCESSOR_LAYOUTS``), and random weights (the CTC head as wide as the highest token id + 1).

    ``head_scale`` multiplies the CTC head's random weights: random heads are nearly flat, and a larger
    scale makes the greedy path change token from frame to frame, so decoding has something to show.
    """
    import torch
    import transformers

    from workbench.model.published import CHECKPOINTS

    files = CHECKPOINTS.get(name)
    if files is None:
        raise WorkbenchError(f"no published config for {name!r}; known: {', '.join(CHECKPOINTS)}")
    vocab = dict(vocab or files["vocab"])
    width = max([*vocab.values(), *(added_tokens or {}).values()]) + 1
    values = lookalike_config(name, shrink, **{"vocab_size": width, **(config or {})})
    model_type = values.pop("model_type")
    architecture = values["architectures"][0]
    torch.manual_seed(seed)
    model = getattr(transformers, architecture)(
        transformers.AutoConfig.for_model(model_type, **values)
    ).eval()
    if head_scale != 1.0:
        with torch.no_grad():
            model.lm_head.weight.mul_(head_scale)
    folder = Path(folder)
    model.save_pretrained(str(folder))
    save_processor(
        folder,
        vocab,
        {**files["tokenizer"], **(tokenizer or {})},
        {**files["preprocessor"], **(preprocessor or {})},
        added_tokens,
        layout,
    )
    return folder

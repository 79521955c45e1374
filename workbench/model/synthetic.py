"""Randomly initialised CTC models of known shapes, for tests and benchmarks (no download).

``random_wav2vec2``/``save_random_wav2vec2``: a Wav2Vec2ForCTC of the sizes in ``SIZES`` with the default
vocabulary. ``save_lookalike``: a folder shaped like a public checkpoint (``workbench.model.published``):
its config (optionally shrunk), preprocessor and tokenizer files, with random weights, through
``save_pretrained`` exactly as a user's folder would be written.
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
    """Save a random model in the Hugging Face layout (weights, config, vocab, tokenizer, preprocessor)."""
    folder = Path(folder)
    random_wav2vec2(size, seed).save_pretrained(str(folder))
    _write_json(folder / "vocab.json", VOCAB)
    _write_json(
        folder / "tokenizer_config.json",
        {"pad_token": "<pad>", "word_delimiter_token": "|", "tokenizer_class": "Wav2Vec2CTCTokenizer"},
    )
    _write_json(
        folder / "preprocessor_config.json",
        {
            "do_normalize": True,
            "feature_extractor_type": "Wav2Vec2FeatureExtractor",
            "feature_size": 1,
            "padding_value": 0.0,
            "sampling_rate": 16000,
            "return_attention_mask": False,
        },
    )
    return folder


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
) -> Path:
    """A folder like checkpoint ``name``: its config (``config`` overrides keys), preprocessor and tokenizer
    files (``vocab``/``tokenizer``/``preprocessor`` replace or extend them; ``added_tokens`` goes to
    ``added_tokens.json``, as tokenizers that add ``<s>``/``</s>`` after the vocabulary write it) and
    random weights (the CTC head as wide as the highest token id + 1).

    ``head_scale`` multiplies the CTC head's random weights: random heads are nearly flat, and a larger
    scale makes the greedy path change token from frame to frame, so decoding has something to show.
    """
    import torch
    import transformers

    from workbench.model.published import CHECKPOINTS, SPECIAL_TOKENS

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
    tok = {**files["tokenizer"], **(tokenizer or {})}
    _write_json(folder / "vocab.json", vocab)
    _write_json(folder / "tokenizer_config.json", tok)
    _write_json(
        folder / "special_tokens_map.json",
        {k: tok.get(k, v) for k, v in SPECIAL_TOKENS.items() if tok.get(k, v) is not None},
    )
    _write_json(folder / "preprocessor_config.json", {**files["preprocessor"], **(preprocessor or {})})
    if added_tokens:
        _write_json(folder / "added_tokens.json", added_tokens)
    return folder

"""Randomly initialised Wav2Vec2ForCTC models of known sizes, for tests and benchmarks (no download)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.model.vocab import VOCAB

SIZES: dict[str, dict[str, Any]] = {
    "tiny": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128,
                 conv_dim=(32,) * 7, num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4),
    "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
                 conv_dim=(512,) * 7, num_conv_pos_embeddings=128, num_conv_pos_embedding_groups=16),
}


def random_wav2vec2(size: str = "tiny", seed: int = 0) -> Any:
    """A Wav2Vec2ForCTC with random weights (character vocabulary of 32), eval mode, float32."""
    import torch
    from transformers import Wav2Vec2Config, Wav2Vec2ForCTC

    if size not in SIZES:
        raise WorkbenchError(f"unknown model size {size!r}; choose one of {', '.join(SIZES)}")
    config = Wav2Vec2Config(vocab_size=len(VOCAB), conv_kernel=(10, 3, 3, 3, 3, 2, 2),
                            conv_stride=(5, 2, 2, 2, 2, 2, 2), feat_extract_norm="group",
                            do_stable_layer_norm=False, pad_token_id=VOCAB["<pad>"], **SIZES[size])
    torch.manual_seed(seed)
    return Wav2Vec2ForCTC(config).eval()


def save_random_wav2vec2(folder: Path, size: str = "tiny", seed: int = 0) -> Path:
    """Save a random model in the Hugging Face layout (weights, config, vocab, tokenizer, preprocessor)."""
    folder = Path(folder)
    random_wav2vec2(size, seed).save_pretrained(str(folder))
    (folder / "vocab.json").write_text(json.dumps(VOCAB, indent=1))
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"pad_token": "<pad>", "word_delimiter_token": "|", "tokenizer_class": "Wav2Vec2CTCTokenizer"}))
    (folder / "preprocessor_config.json").write_text(json.dumps(
        {"do_normalize": True, "feature_extractor_type": "Wav2Vec2FeatureExtractor", "feature_size": 1,
         "padding_value": 0.0, "sampling_rate": 16000, "return_attention_mask": False}))
    return folder

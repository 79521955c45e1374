"""Public configuration files of the CTC checkpoints the workbench supports, for look-alike models.

No weights can be downloaded here, so tests and benchmarks rebuild these checkpoints' folders from their
published ``config.json``, ``preprocessor_config.json`` and tokenizer files (values as published on the
Hugging Face hub; keys that only matter for pre-training or fine-tuning, such as dropouts, masking and
quantizer settings, are kept where they were public, since ``from_pretrained`` reads them anyway) and
fill them with random weights (``workbench.model.synthetic.save_lookalike``). ``SHRINK`` lists the keys
that a test makes small; everything that decides the graph's structure (norms, conv bias, stable layer
norm, position embeddings, the feature encoder's kernels and strides) stays as published.
"""

from __future__ import annotations

from typing import Any

#: The 32-token character vocabulary of the English LibriSpeech fine-tunes (blank ``<pad>`` = 0).
LIBRISPEECH_VOCAB: dict[str, int] = {
    "<pad>": 0,
    "<s>": 1,
    "</s>": 2,
    "<unk>": 3,
    "|": 4,
    "E": 5,
    "T": 6,
    "A": 7,
    "O": 8,
    "N": 9,
    "I": 10,
    "H": 11,
    "S": 12,
    "R": 13,
    "D": 14,
    "L": 15,
    "U": 16,
    "M": 17,
    "W": 18,
    "C": 19,
    "F": 20,
    "G": 21,
    "Y": 22,
    "P": 23,
    "B": 24,
    "V": 25,
    "K": 26,
    "'": 27,
    "X": 28,
    "J": 29,
    "Q": 30,
    "Z": 31,
}
LIBRISPEECH_TOKENIZER: dict[str, Any] = {
    "unk_token": "<unk>",
    "bos_token": "<s>",
    "eos_token": "</s>",
    "pad_token": "<pad>",
    "do_lower_case": False,
    "return_attention_mask": False,
    "do_normalize": True,
    "word_delimiter_token": "|",
    "tokenizer_class": "Wav2Vec2CTCTokenizer",
}
SPECIAL_TOKENS = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}

_CONV = {
    "conv_dim": [512] * 7,
    "conv_kernel": [10, 3, 3, 3, 3, 2, 2],
    "conv_stride": [5, 2, 2, 2, 2, 2, 2],
    "num_feat_extract_layers": 7,
}
_COMMON = {
    "activation_dropout": 0.1,
    "apply_spec_augment": True,
    "attention_dropout": 0.1,
    "bos_token_id": 1,
    "ctc_loss_reduction": "sum",
    "ctc_zero_infinity": False,
    "eos_token_id": 2,
    "feat_extract_activation": "gelu",
    "feat_extract_dropout": 0.0,
    "feat_proj_dropout": 0.1,
    "final_dropout": 0.1,
    "gradient_checkpointing": False,
    "hidden_act": "gelu",
    "hidden_dropout": 0.1,
    "hidden_dropout_prob": 0.1,
    "initializer_range": 0.02,
    "layer_norm_eps": 1e-05,
    "layerdrop": 0.1,
    "mask_feature_length": 10,
    "mask_feature_prob": 0.0,
    "mask_time_length": 10,
    "mask_time_prob": 0.05,
    "pad_token_id": 0,
    "vocab_size": 32,
    **_CONV,
}
_BASE = {"hidden_size": 768, "intermediate_size": 3072, "num_attention_heads": 12, "num_hidden_layers": 12}
_LARGE = {"hidden_size": 1024, "intermediate_size": 4096, "num_attention_heads": 16, "num_hidden_layers": 24}


def _preprocessor(do_normalize: bool, return_attention_mask: bool) -> dict[str, Any]:
    return {
        "do_normalize": do_normalize,
        "feature_extractor_type": "Wav2Vec2FeatureExtractor",
        "feature_size": 1,
        "padding_side": "right",
        "padding_value": 0.0,
        "return_attention_mask": return_attention_mask,
        "sampling_rate": 16000,
    }


def _conformer(position_embeddings: str) -> dict[str, Any]:
    """The files of the Wav2Vec2-Conformer large fine-tunes (they differ in the position embeddings only)."""
    return {
        "config": {
            **_COMMON,
            **_LARGE,
            "architectures": ["Wav2Vec2ConformerForCTC"],
            "model_type": "wav2vec2-conformer",
            "conv_bias": True,
            "do_stable_layer_norm": True,
            "feat_extract_norm": "layer",
            "position_embeddings_type": position_embeddings,
            "conv_depthwise_kernel_size": 31,
            "max_source_positions": 5000,
            "rotary_embedding_base": 10000,
            "num_conv_pos_embedding_groups": 16,
            "num_conv_pos_embeddings": 128,
            "transformers_version": "4.19.0.dev0",
        },
        "preprocessor": _preprocessor(True, True),
        "vocab": LIBRISPEECH_VOCAB,
        "tokenizer": {**LIBRISPEECH_TOKENIZER, "return_attention_mask": True},
    }


#: name -> {"config", "preprocessor", "vocab", "tokenizer"}: the public files of each checkpoint.
CHECKPOINTS: dict[str, dict[str, Any]] = {
    "facebook/wav2vec2-base-960h": {  # GroupNorm feature encoder, post-LN, no conv bias, no attention mask
        "config": {
            **_COMMON,
            **_BASE,
            "architectures": ["Wav2Vec2ForCTC"],
            "model_type": "wav2vec2",
            "conv_bias": False,
            "do_stable_layer_norm": False,
            "feat_extract_norm": "group",
            "num_conv_pos_embedding_groups": 16,
            "num_conv_pos_embeddings": 128,
            "codevector_dim": 256,
            "contrastive_logits_temperature": 0.1,
            "diversity_loss_weight": 0.1,
            "num_codevector_groups": 2,
            "num_codevectors_per_group": 320,
            "num_negatives": 100,
            "proj_codevector_dim": 256,
            "feat_quantizer_dropout": 0.0,
            "transformers_version": "4.7.0.dev0",
        },
        "preprocessor": _preprocessor(True, False),
        "vocab": LIBRISPEECH_VOCAB,
        "tokenizer": LIBRISPEECH_TOKENIZER,
    },
    "facebook/wav2vec2-large-960h-lv60-self": {  # LayerNorm feature encoder, stable (pre-)LN, conv bias
        "config": {
            **_COMMON,
            **_LARGE,
            "architectures": ["Wav2Vec2ForCTC"],
            "model_type": "wav2vec2",
            "conv_bias": True,
            "do_stable_layer_norm": True,
            "feat_extract_norm": "layer",
            "num_conv_pos_embedding_groups": 16,
            "num_conv_pos_embeddings": 128,
            "transformers_version": "4.7.0.dev0",
        },
        "preprocessor": _preprocessor(True, True),
        "vocab": LIBRISPEECH_VOCAB,
        "tokenizer": {**LIBRISPEECH_TOKENIZER, "return_attention_mask": True},
    },
    "facebook/hubert-large-ls960-ft": {
        "config": {
            **_COMMON,
            **_LARGE,
            "architectures": ["HubertForCTC"],
            "model_type": "hubert",
            "conv_bias": True,
            "do_stable_layer_norm": True,
            "feat_extract_norm": "layer",
            "feat_proj_layer_norm": True,
            "num_conv_pos_embedding_groups": 16,
            "num_conv_pos_embeddings": 128,
            "transformers_version": "4.10.0.dev0",
        },
        "preprocessor": _preprocessor(True, True),
        "vocab": LIBRISPEECH_VOCAB,
        "tokenizer": {**LIBRISPEECH_TOKENIZER, "return_attention_mask": True},
    },
    # WavLM Base+ fine-tuned with CTC on LibriSpeech clean-100 (the public WavLMForCTC example checkpoint):
    # gated relative position bias, GroupNorm feature encoder, raw (un-normalised) audio like WavLM Base+
    "patrickvonplaten/wavlm-libri-clean-100h-base-plus": {
        "config": {
            **_COMMON,
            **_BASE,
            "architectures": ["WavLMForCTC"],
            "model_type": "wavlm",
            "conv_bias": False,
            "do_stable_layer_norm": False,
            "feat_extract_norm": "group",
            "num_conv_pos_embedding_groups": 16,
            "num_conv_pos_embeddings": 128,
            "num_buckets": 320,
            "max_bucket_distance": 800,
            "ctc_loss_reduction": "mean",
            "ctc_zero_infinity": False,
            "layerdrop": 0.1,
            "mask_time_prob": 0.05,
            "replace_prob": 0.5,
            "num_ctc_classes": 80,
            "use_weighted_layer_sum": False,
            "transformers_version": "4.15.0.dev0",
        },
        "preprocessor": _preprocessor(False, True),
        "vocab": LIBRISPEECH_VOCAB,
        "tokenizer": {**LIBRISPEECH_TOKENIZER, "return_attention_mask": True},
    },
    "facebook/data2vec-audio-base-960h": {  # LayerNorm conv encoder, 5 positional conv layers (kernel 19)
        "config": {
            **_COMMON,
            **_BASE,
            "architectures": ["Data2VecAudioForCTC"],
            "model_type": "data2vec-audio",
            "conv_bias": False,
            "conv_pos_kernel_size": 19,
            "num_conv_pos_embedding_groups": 16,
            "num_conv_pos_embeddings": 5,
            "ctc_loss_reduction": "sum",
            "layerdrop": 0.0,
            "use_weighted_layer_sum": False,
            "transformers_version": "4.18.0.dev0",
        },
        "preprocessor": _preprocessor(True, True),
        "vocab": LIBRISPEECH_VOCAB,
        "tokenizer": {**LIBRISPEECH_TOKENIZER, "return_attention_mask": True},
    },
    "facebook/wav2vec2-conformer-rel-pos-large-960h-ft": _conformer(
        "relative"
    ),  # relative position attention
    "facebook/wav2vec2-conformer-rope-large-960h-ft": _conformer("rotary"),  # rotary position embeddings
}

#: What a test shrinks (layers and widths); the structure-deciding keys above stay as published.
SHRINK: dict[str, Any] = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 2,
    "num_hidden_layers": 2,
    "conv_dim": [32] * 7,
    "num_conv_pos_embeddings": 16,
    "num_conv_pos_embedding_groups": 4,
    "conv_depthwise_kernel_size": 7,
}
#: Keys whose published value is kept when shrinking (a count of layers, not a width).
SHRINK_KEEP: dict[str, tuple[str, ...]] = {"data2vec-audio": ("num_conv_pos_embeddings",)}

"""Helpers for the model tests: look-alike checkpoints of the public models, their vocabularies, small sets.

Look-alikes come from ``workbench.model.synthetic.save_lookalike`` (the published config, preprocessor and
tokenizer files, layers and widths shrunk, random weights, written with ``save_pretrained``). Two more
vocabulary layouts that real fine-tunes use:

- ``LOWER_VOCAB``: the layout of the Hugging Face "fine-tune XLSR" recipe: lower-case letters sorted, the
  space replaced by ``|``, ``[UNK]`` and ``[PAD]`` appended (so the CTC blank is id 29, not 0), and
  ``<s>``/``</s>`` added by the tokenizer as ids 30/31;
- ``CHINESE_VOCAB``: a character vocabulary (the layout of the Chinese XLSR fine-tunes, thousands of
  characters there, 160 common ones here) with ``<pad>`` = 0 and ``|`` = 4.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from workbench.artifacts import sha256_tree

CHECKPOINTS = (
    "facebook/wav2vec2-base-960h",
    "facebook/wav2vec2-large-960h-lv60-self",
    "facebook/hubert-large-ls960-ft",
    "patrickvonplaten/wavlm-libri-clean-100h-base-plus",
    "facebook/data2vec-audio-base-960h",
    "facebook/wav2vec2-conformer-rel-pos-large-960h-ft",
    "facebook/wav2vec2-conformer-rope-large-960h-ft",
)

_LOWER = ["|", "'"] + [chr(c) for c in range(ord("a"), ord("z") + 1)]
LOWER_VOCAB: dict[str, int] = {**{t: i for i, t in enumerate(_LOWER)}, "[UNK]": 28, "[PAD]": 29}
LOWER_TOKENIZER: dict[str, Any] = {
    "unk_token": "[UNK]",
    "pad_token": "[PAD]",
    "bos_token": "<s>",
    "eos_token": "</s>",
    "word_delimiter_token": "|",
    "do_lower_case": False,
    "tokenizer_class": "Wav2Vec2CTCTokenizer",
}
LOWER_ADDED = {"<s>": 30, "</s>": 31}

HANZI = (
    "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可里后小么心多天而"
    "能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长水山风雨花草木火土金"
    "月星云白红绿黄黑"
)
CHINESE_VOCAB: dict[str, int] = {
    "<pad>": 0,
    "<s>": 1,
    "</s>": 2,
    "<unk>": 3,
    "|": 4,
    **{ch: 5 + i for i, ch in enumerate(dict.fromkeys(HANZI))},
}
CHINESE_TOKENIZER: dict[str, Any] = {
    "unk_token": "<unk>",
    "pad_token": "<pad>",
    "bos_token": "<s>",
    "eos_token": "</s>",
    "word_delimiter_token": "|",
    "tokenizer_class": "Wav2Vec2CTCTokenizer",
}

ENGLISH_TEXTS = [
    "Hello, World!",
    "The cat's bowl is empty.",
    "Don't stop now",
    "A quiet morning",
    "Open the window, please",
    "Read the book again",
]
CHINESE_TEXTS = ["我们在学习中文。", "今天天气很好", "他说你好", "水山风雨花草", "我想看书", "大家都来了！"]


def lower_case_model(folder: Path, name: str = "facebook/wav2vec2-base-960h", seed: int = 0) -> Path:
    """A look-alike of ``name`` with the lower-case ``[PAD]``-last vocabulary (config pad_token_id 29)."""
    from workbench.model.synthetic import save_lookalike

    return save_lookalike(
        folder,
        name,
        seed=seed,
        vocab=LOWER_VOCAB,
        added_tokens=LOWER_ADDED,
        config={"pad_token_id": 29},
        tokenizer=LOWER_TOKENIZER,
        head_scale=50.0,
    )


def chinese_model(folder: Path, name: str = "facebook/wav2vec2-large-960h-lv60-self", seed: int = 0) -> Path:
    """A look-alike of a Chinese XLSR fine-tune: the lv60 structure with a character vocabulary."""
    from workbench.model.synthetic import save_lookalike

    return save_lookalike(
        folder, name, seed=seed, vocab=CHINESE_VOCAB, tokenizer=CHINESE_TOKENIZER, head_scale=50.0
    )


def unit_set(
    folder: Path,
    texts: list[str],
    speech_like: Callable[..., np.ndarray],
    seed: int = 0,
    seconds: tuple[float, float] = (1.0, 1.6),
):
    """A small stored set (the store's own writer, no TTS) of short clips with these texts; conditions cycle."""
    from dashkit import write_unit_set

    return write_unit_set(folder, texts, speech_like, seed=seed, seconds=seconds)


def tree_state(*roots: Path) -> dict[str, str]:
    """Content hash of every folder given (missing ones as 'absent'): compare before and after a command."""
    return {str(r): sha256_tree(r) if r.exists() else "absent" for r in roots}

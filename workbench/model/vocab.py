"""A model's character vocabulary (``vocab.json`` beside the weights) and greedy CTC decoding.

Falls back to the default character vocabulary (identical to facebook/wav2vec2-base-960h) when the
folder has none. Decoding collapses repeats, drops the blank (pad) and special tokens and turns the
word delimiter ``|`` into spaces; the algorithm itself lives in ``workbench.model_vocab``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workbench.errors import WorkbenchError
from workbench.model_vocab import VOCAB, WORD_DELIMITER, decode_ids


@dataclass(frozen=True)
class Vocabulary:
    """Token ids of one model, with its blank id and word delimiter."""

    token_to_id: dict[str, int]
    blank_id: int
    word_delimiter: str = WORD_DELIMITER

    @property
    def id_to_token(self) -> dict[int, str]:
        return {i: t for t, i in self.token_to_id.items()}

    def decode(self, ids: list[int]) -> str:
        mapping = {i: (WORD_DELIMITER if t == self.word_delimiter else t) for i, t in self.id_to_token.items()}
        return decode_ids(list(ids), mapping, self.blank_id)

    def greedy(self, logits: np.ndarray) -> str:
        """Transcript of one utterance's logits [frames, vocab]."""
        return self.decode(np.asarray(logits).argmax(-1).tolist())


DEFAULT_VOCABULARY = Vocabulary(dict(VOCAB), VOCAB["<pad>"])


def load_vocabulary(model_dir: str | Path) -> Vocabulary:
    """The vocabulary saved with a model (vocab.json + tokenizer_config.json), else the default one."""
    folder = Path(model_dir)
    vocab_path = folder / "vocab.json"
    if not vocab_path.is_file():
        return DEFAULT_VOCABULARY
    try:
        tokens = json.loads(vocab_path.read_text())
        config_path = folder / "tokenizer_config.json"
        config = json.loads(config_path.read_text()) if config_path.is_file() else {}
    except (OSError, json.JSONDecodeError) as exc:
        raise WorkbenchError(f"cannot read the vocabulary of {folder}: {exc}") from exc
    if tokens and isinstance(next(iter(tokens.values())), dict):  # multilingual layout {lang: vocab}
        tokens = tokens.get(config.get("target_lang") or next(iter(tokens)))
    pad = config.get("pad_token", "<pad>")
    pad = pad.get("content", "<pad>") if isinstance(pad, dict) else pad
    if pad not in tokens:
        raise WorkbenchError(f"{vocab_path}: the pad (CTC blank) token {pad!r} is not in the vocabulary")
    return Vocabulary({str(t): int(i) for t, i in tokens.items()}, int(tokens[pad]),
                      str(config.get("word_delimiter_token", WORD_DELIMITER)))

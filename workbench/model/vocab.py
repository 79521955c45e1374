"""Character vocabularies and greedy CTC decoding: the default one and a model's own.

``VOCAB`` is the default character vocabulary (identical to facebook/wav2vec2-base-960h; the demo
model and the training recipe use it); ``encode_text``/``decode_ids`` turn text into label ids and
greedy CTC ids back into text (collapse repeats, drop the blank (pad) and special tokens, word
delimiter ``|`` -> space). ``load_vocabulary`` reads a model's own ``vocab.json`` beside the weights,
falling back to the default when the folder has none.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workbench.errors import WorkbenchError

VOCAB: dict[str, int] = {
    "<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3, "|": 4, "E": 5, "T": 6, "A": 7, "O": 8, "N": 9, "I": 10,
    "H": 11, "S": 12, "R": 13, "D": 14, "L": 15, "U": 16, "M": 17, "W": 18, "C": 19, "F": 20, "G": 21,
    "Y": 22, "P": 23, "B": 24, "V": 25, "K": 26, "'": 27, "X": 28, "J": 29, "Q": 30, "Z": 31,
}
_ID_TO_CHAR = {i: c for c, i in VOCAB.items()}
BLANK_ID = VOCAB["<pad>"]
WORD_DELIMITER = "|"


def encode_text(text: str, vocab: dict[str, int] = VOCAB) -> list[int]:
    """Normalised text (A-Z, apostrophe, spaces) -> label ids with '|' between words."""
    return [vocab.get(WORD_DELIMITER if ch == " " else ch, vocab["<unk>"]) for ch in " ".join(text.split())]


def decode_ids(ids: list[int], id_to_char: dict[int, str] = _ID_TO_CHAR, blank: int = BLANK_ID) -> str:
    """Greedy CTC: collapse repeats, drop blanks and special tokens, '|' -> space."""
    out, prev = [], None
    for i in ids:
        if i != prev and i != blank:
            ch = id_to_char.get(i, "")
            if ch == WORD_DELIMITER:
                out.append(" ")
            elif not (ch.startswith("<") and ch.endswith(">")):
                out.append(ch)
        prev = i
    return " ".join("".join(out).split())


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


DEFAULT_VOCABULARY = Vocabulary(dict(VOCAB), BLANK_ID)


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

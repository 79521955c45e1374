"""Character vocabularies and greedy CTC decoding: the default one and a model's own.

``VOCAB`` is the default character vocabulary (identical to facebook/wav2vec2-base-960h; the demo
model and the training recipe use it); ``encode_text``/``decode_ids`` turn text into label ids and
greedy CTC ids back into text. ``Vocabulary`` is one model's vocabulary: its tokens, CTC blank (the
pad token), word delimiter and special tokens, read from the files saved beside the weights
(``vocab.json``, ``tokenizer_config.json``, ``special_tokens_map.json``, ``added_tokens.json``) by
``load_vocabulary``. Greedy decoding collapses repeats, drops the blank and every special token and
turns the word delimiter into a space.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from workbench.errors import WorkbenchError

VOCAB: dict[str, int] = {
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
_ID_TO_CHAR = {i: c for c, i in VOCAB.items()}
BLANK_ID = VOCAB["<pad>"]
WORD_DELIMITER = "|"
_SPECIAL_KEYS = ("pad_token", "unk_token", "bos_token", "eos_token")


def encode_text(text: str, vocab: dict[str, int] = VOCAB) -> list[int]:
    """Normalised text (A-Z, apostrophe, spaces) -> label ids with '|' between words."""
    return [vocab.get(WORD_DELIMITER if ch == " " else ch, vocab["<unk>"]) for ch in " ".join(text.split())]


def is_markup(token: str) -> bool:
    """``<unk>``, ``[PAD]``: a bracketed multi-character token, never written text."""
    return len(token) > 2 and ((token[0], token[-1]) in (("<", ">"), ("[", "]")))


def decode_ids(ids: list[int], id_to_char: dict[int, str] = _ID_TO_CHAR, blank: int = BLANK_ID) -> str:
    """Greedy CTC: collapse repeats, drop blanks and bracketed special tokens, '|' -> space."""
    out, prev = [], None
    for i in ids:
        if i != prev and i != blank:
            ch = id_to_char.get(i, "")
            if ch == WORD_DELIMITER:
                out.append(" ")
            elif not is_markup(ch):
                out.append(ch)
        prev = i
    return " ".join("".join(out).split())


@dataclass(frozen=True)
class Vocabulary:
    """Token ids of one model, with its blank id, word delimiter and special (never written) tokens."""

    token_to_id: dict[str, int]
    blank_id: int
    word_delimiter: str | None = WORD_DELIMITER
    special: frozenset[str] = field(default_factory=frozenset)

    @property
    def size(self) -> int:
        """Logits needed to address every token (highest id + 1)."""
        return max(self.token_to_id.values()) + 1

    def written(self, token: str) -> str | None:
        """What a token writes: a space for the delimiter, nothing for special or markup tokens."""
        if token == self.word_delimiter or token == " ":
            return " "
        if token in self.special or is_markup(token):
            return None
        return token

    @property
    def characters(self) -> frozenset[str]:
        """Every character the model can write (the delimiter's space excluded)."""
        return frozenset(ch for t in self.token_to_id if (w := self.written(t)) and w != " " for ch in w)

    @property
    def writes_spaces(self) -> bool:
        return any(self.written(t) == " " for t in self.token_to_id)

    def decode(self, ids: list[int]) -> str:
        """Greedy CTC: collapse repeats, drop the blank and special tokens, delimiter -> space."""
        table = {i: self.written(t) for t, i in self.token_to_id.items()}
        out, prev = [], None
        for i in ids:
            if i != prev and i != self.blank_id:
                piece = table.get(int(i))
                if piece:
                    out.append(piece)
            prev = i
        return " ".join("".join(out).split())

    def greedy(self, logits: np.ndarray) -> str:
        """Transcript of one utterance's logits [frames, vocab]."""
        return self.decode(np.asarray(logits).argmax(-1).tolist())

    def to_json(self) -> dict[str, Any]:
        return {
            "tokens": dict(self.token_to_id),
            "blank_id": self.blank_id,
            "word_delimiter": self.word_delimiter,
            "special": sorted(self.special),
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Vocabulary:
        return cls(
            {str(t): int(i) for t, i in obj["tokens"].items()},
            int(obj["blank_id"]),
            obj.get("word_delimiter"),
            frozenset(obj.get("special", ())),
        )


DEFAULT_VOCABULARY = Vocabulary(
    dict(VOCAB), BLANK_ID, WORD_DELIMITER, frozenset({"<pad>", "<s>", "</s>", "<unk>"})
)


def _read_json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # ValueError: bad JSON or bytes that are not UTF-8
        raise WorkbenchError(
            f"cannot read {what} {path} ({exc}); save the processor again with "
            "processor.save_pretrained(folder)"
        ) from exc


def _token_text(value: Any) -> str | None:
    """A token as tokenizer files write it: a string or an AddedToken object ``{"content": ...}``."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def load_vocabulary(model_dir: str | Path, blank_id: int | None = None) -> Vocabulary:
    """The vocabulary saved with a model; ``blank_id`` (the config's ``pad_token_id``) wins over the tokenizer's.

    A folder without ``vocab.json`` is refused: the default vocabulary would decode another model's
    ids into wrong letters without any sign of it.
    """
    folder = Path(model_dir)
    vocab_path = folder / "vocab.json"
    if not vocab_path.is_file():
        raise WorkbenchError(
            f"{folder} has no vocab.json, so its token ids cannot be turned into text; save the "
            "processor beside the weights (processor.save_pretrained(folder))"
        )
    tokens = _read_json(vocab_path, "vocabulary")
    configs: dict[str, Any] = {}
    for name in ("special_tokens_map.json", "tokenizer_config.json"):  # the second wins, as in transformers
        if (folder / name).is_file():
            loaded = _read_json(folder / name, "tokenizer file")
            if isinstance(loaded, dict):
                configs.update(loaded)
    if isinstance(tokens, dict) and tokens and all(isinstance(v, dict) for v in tokens.values()):
        lang = configs.get("target_lang") or next(iter(tokens))  # multilingual layout {lang: vocab}
        if lang not in tokens:
            raise WorkbenchError(
                f"{vocab_path} has no vocabulary for target_lang {lang!r} (has {sorted(tokens)})"
            )
        tokens = tokens[lang]
    if (
        not isinstance(tokens, dict)
        or not tokens
        or not all(isinstance(t, str) and isinstance(i, int) and i >= 0 for t, i in tokens.items())
    ):
        raise WorkbenchError(f"{vocab_path} must map tokens to non-negative integer ids")
    token_to_id = dict(tokens)
    added = folder / "added_tokens.json"
    extra: dict[str, int] = {}
    if added.is_file():
        loaded = _read_json(added, "tokenizer file")
        extra = (
            {t: i for t, i in loaded.items() if isinstance(t, str) and isinstance(i, int)}
            if isinstance(loaded, dict)
            else {}
        )
    for i, obj in (configs.get("added_tokens_decoder") or {}).items():
        if (text := _token_text(obj)) is not None and str(i).isdigit():
            extra.setdefault(text, int(i))
    for text, i in extra.items():
        token_to_id.setdefault(text, i)
    special = {t for k in _SPECIAL_KEYS if (t := _token_text(configs.get(k))) is not None}
    special |= set(extra)
    pad = _token_text(configs.get("pad_token")) or "<pad>"
    if blank_id is None:
        if pad not in token_to_id:
            raise WorkbenchError(f"{vocab_path}: the pad (CTC blank) token {pad!r} is not in the vocabulary")
        blank_id = token_to_id[pad]
    delimiter = _token_text(configs.get("word_delimiter_token")) or WORD_DELIMITER
    return Vocabulary(
        token_to_id, int(blank_id), delimiter if delimiter in token_to_id else None, frozenset(special)
    )

"""The demo model's character vocabulary (identical to facebook/wav2vec2-base-960h) and CTC greedy decoding."""

from __future__ import annotations

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

"""Reference text made comparable with what a model can write, and the error-rate unit that fits it.

``TextNormaliser.for_vocabulary`` reads the rules off a model's vocabulary: letter case (upper-case
vocabulary -> upper-case text, lower-case -> lower-case, mixed -> kept), apostrophes (kept when the
vocabulary has one, typographic ones mapped to it; dropped inside words otherwise, so "don't" and "dont"
match), accents (folded only where the vocabulary lacks the accented letter but has its base letters),
the language's own characters (a letter the vocabulary lacks is kept: the model cannot write it, and
that is an error, not something to hide), everything else (punctuation, symbols, digits the vocabulary
lacks) becomes a word break. Scripts written without spaces (Han, kana, Thai, Lao, Khmer, Myanmar,
Tibetan) lose all whitespace and are scored per character (CER); space-delimited vocabularies are
scored per word (WER). The same normaliser is applied to references and hypotheses.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from workbench.errors import WorkbenchError
from workbench.model.vocab import Vocabulary

ERROR_UNITS = ("wer", "cer")
NO_SPACE_SCRIPTS = (
    "CJK UNIFIED IDEOGRAPH",
    "CJK COMPATIBILITY IDEOGRAPH",
    "HIRAGANA",
    "KATAKANA",
    "THAI",
    "LAO",
    "KHMER",
    "MYANMAR",
    "TIBETAN",
)
APOSTROPHES = "'\u2019\u2018\u02bc`\u00b4"
# Latin letters that Unicode decomposition does not reduce to base letters.
_TRANSLITERATE = {
    "ß": "ss",
    "æ": "ae",
    "œ": "oe",
    "ø": "o",
    "ł": "l",
    "đ": "d",
    "þ": "th",
    "ð": "d",
    "ẞ": "SS",
    "Æ": "AE",
    "Œ": "OE",
    "Ø": "O",
    "Ł": "L",
    "Đ": "D",
    "Þ": "TH",
    "Ð": "D",
}


def _fold(ch: str) -> str:
    """``É`` -> ``E``, ``ß`` -> ``ss``: the letter without accents."""
    ch = _TRANSLITERATE.get(ch, ch)
    return "".join(c for c in unicodedata.normalize("NFKD", ch) if not unicodedata.combining(c))


def _no_space_script(ch: str) -> bool:
    name = unicodedata.name(ch, "")
    return name.startswith(NO_SPACE_SCRIPTS)


@dataclass(frozen=True)
class TextNormaliser:
    """Rules that turn any text into the form a model's transcripts take (see the module docstring)."""

    alphabet: frozenset[str]
    case: str = "upper"  # upper | lower | keep
    apostrophe: bool = True
    spaces: bool = True  # False: a script written without spaces; whitespace is removed

    @classmethod
    def for_vocabulary(cls, vocabulary: Vocabulary) -> TextNormaliser:
        chars = vocabulary.characters
        cased = [c for c in chars if c.lower() != c.upper()]
        upper = sum(c == c.upper() for c in cased)
        case = "keep" if not cased or 0 < upper < len(cased) else ("upper" if upper else "lower")
        letters = [c for c in chars if unicodedata.category(c).startswith("L")]
        no_space = sum(_no_space_script(c) for c in letters)
        spaces = vocabulary.writes_spaces and not (letters and no_space * 2 > len(letters))
        return cls(frozenset(chars), case, "'" in chars, spaces)

    @property
    def error_unit(self) -> str:
        """``cer`` for scripts written without spaces, ``wer`` for space-delimited vocabularies."""
        return "wer" if self.spaces else "cer"

    def _cased(self, text: str) -> str:
        return text.upper() if self.case == "upper" else text.lower() if self.case == "lower" else text

    def _char(self, ch: str) -> str:
        if ch in self.alphabet:
            return ch
        if ch.isspace() or ch in "-_":
            return " "
        if ch in APOSTROPHES:
            return "'" if self.apostrophe else ""
        folded = self._cased(_fold(ch))
        if folded and all(f in self.alphabet for f in folded):
            return folded
        if unicodedata.category(ch).startswith(("L", "M")):
            return ch  # a letter of the language that the model cannot write: kept, it counts as an error
        return " "

    def __call__(self, text: str) -> str:
        text = self._cased(unicodedata.normalize("NFC", text))
        out = "".join(self._char(ch) for ch in text)
        if self.apostrophe:
            out = re.sub(r"(^|\s)'+|'+(\s|$)", " ", out)  # quote marks, not apostrophes
        if not self.spaces:
            return "".join(out.split())
        return " ".join(out.split())

    def describe(self) -> str:
        """One sentence for reports: what was done to references and hypotheses before scoring."""
        case = {"upper": "upper-cased", "lower": "lower-cased", "keep": "case kept"}[self.case]
        apostrophe = (
            "typographic apostrophes -> ', quote marks at word edges removed"
            if self.apostrophe
            else "apostrophes removed (the vocabulary has none)"
        )
        spaces = (
            "whitespace collapsed; words are the space-separated tokens"
            if self.spaces
            else "all whitespace removed (a script written without spaces)"
        )
        return (
            f"{case} (as the model's vocabulary of {len(self.alphabet)} characters); {apostrophe}; accents "
            "folded where the vocabulary lacks the accented letter; letters outside the vocabulary kept "
            f"(they count as errors); punctuation, symbols and other characters -> space; {spaces}"
        )


def check_error_unit(unit: str | None) -> str | None:
    """``unit`` if it is ``wer``/``cer`` (or None); otherwise a user error."""
    if unit is not None and unit not in ERROR_UNITS:
        raise WorkbenchError(f"error unit must be one of {', '.join(ERROR_UNITS)}, not {unit!r}")
    return unit

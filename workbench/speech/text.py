"""English text for synthetic speech, from WordNet (Debian/PyPI package data), and its normaliser.

Sentences are WordNet's example sentences (the quoted parts of each gloss) and glosses. Each text is
normalised to the default alphabet (``normalise_text``: what the synthetic voices say and the set's
reference text; sources use it too) and assigned to one split (train, calib or eval) by a hash of the
normalised text, so the splits are disjoint on every machine without coordination. Scoring normalises
references and hypotheses with the rules of the model's own vocabulary (``workbench.model.textnorm``).
"""

from __future__ import annotations

import hashlib
import os
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ' ")
WORDNET_DIRS = (
    Path(os.environ.get("WORKBENCH_WORDNET_DIR", "/usr/share/wordnet")),
    Path("/usr/share/wordnet"),
)
SPLITS = ("train", "calib", "eval")
_SPLIT_OF_BUCKET = {0: "eval", 1: "calib"}  # buckets 2..9 of 10 go to training

_QUOTE = re.compile(r'"([^"]+)"')
_NOT_ALPHABET = re.compile(r"[^A-Z' ]+")


@dataclass(frozen=True)
class NormalisedText:
    text: str
    changed: bool
    dropped_chars: str


# Latin letters that Unicode decomposition does not reduce to A-Z.
_TRANSLITERATE = {"ß": "SS", "Æ": "AE", "Œ": "OE", "Ø": "O", "Ł": "L", "Đ": "D", "Þ": "TH", "Ð": "D"}


def _fold_accents(text: str) -> str:
    """``É`` -> ``E``, ``ß`` -> ``SS``: keep accented Latin words whole instead of splitting them."""
    text = "".join(_TRANSLITERATE.get(ch, ch) for ch in text)
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def normalise_text(text: str) -> NormalisedText:
    """Upper-case, fold accents, map separators to spaces, drop characters outside the alphabet.

    ``dropped_chars`` lists the characters that did not survive (accented letters are reported too,
    since the transcript changed)."""
    upper = text.upper().replace("-", " ").replace("_", " ").replace("`", "'")
    upper = upper.replace("\u2019", "'")
    accented = "".join(
        sorted(
            {
                c
                for c in upper
                if c not in ALPHABET
                and not c.isspace()
                and _fold_accents(c) != c
                and all(f in ALPHABET for f in _fold_accents(c))
            }
        )
    )
    upper = _fold_accents(upper)
    dropped = "".join(sorted({c for c in upper if c not in ALPHABET and not c.isspace()}))
    cleaned = _NOT_ALPHABET.sub(" ", upper)
    cleaned = re.sub(r"(^|\s)'+|'+(\s|$)", " ", cleaned)  # quotes, not apostrophes
    cleaned = " ".join(cleaned.split())
    dropped = "".join(sorted(set(dropped) | set(accented)))
    return NormalisedText(cleaned, cleaned != " ".join(text.split()), dropped)


def split_of(text: str) -> str:
    """Deterministic split of a normalised text: 10 % eval, 10 % calib, 80 % train."""
    bucket = int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big") % 10
    return _SPLIT_OF_BUCKET.get(bucket, "train")


def _wordnet_dir() -> Path:
    for folder in WORDNET_DIRS:
        if (folder / "data.noun").exists():
            return folder
    from workbench.errors import WorkbenchError

    raise WorkbenchError(
        "WordNet text not found (looked in "
        + ", ".join(str(d) for d in WORDNET_DIRS)
        + "). Install it: apt-get install wordnet-base, or set WORKBENCH_WORDNET_DIR."
    )


def _raw_sentences(folder: Path) -> list[str]:
    out: list[str] = []
    for pos in ("noun", "verb", "adj", "adv"):
        path = folder / f"data.{pos}"
        with open(path, encoding="latin-1") as handle:
            for line in handle:
                if line.startswith("  ") or "|" not in line:
                    continue
                gloss = line.split("|", 1)[1]
                out.extend(_QUOTE.findall(gloss))
                definition = gloss.split('"', 1)[0].split(";")[0].strip()
                if definition:
                    out.append(definition)
    return out


@lru_cache(maxsize=4)
def sentence_pool(min_words: int = 3, max_words: int = 22) -> dict[str, tuple[str, ...]]:
    """Normalised, de-duplicated sentences per split, sorted for determinism."""
    pools: dict[str, set[str]] = {s: set() for s in SPLITS}
    for raw in _raw_sentences(_wordnet_dir()):
        if any(ch.isdigit() for ch in raw):
            continue
        text = normalise_text(raw).text
        words = text.split()
        if not (min_words <= len(words) <= max_words):
            continue
        if sum(len(w) == 1 and w not in ("A", "I") for w in words) > 1:
            continue
        pools[split_of(text)].add(text)
    return {split: tuple(sorted(texts)) for split, texts in pools.items()}

"""Training and held-out texts for the demo model: WordNet plus Debian's fortune-cookie collections.

Training text is WordNet's ``train`` split (glosses and example sentences; the calibration and evaluation
splits stay out by construction) plus the sentences of every ``fortunes`` category but the held-out ones.
The held-out text domain is whole fortune categories (songs and poems, literature), never used in
training; their sentences whose normalised form also occurs in a training category are dropped too.
The GPU machine has no fortunes package, so ``python -m training.corpus --out FILE`` writes the training
texts to a file that travels with the run (``synth_data`` reads it through ``--texts``).
"""

from __future__ import annotations

import argparse
import re
from functools import lru_cache
from pathlib import Path

from workbench.speech.text import normalise_text, sentence_pool

FORTUNE_DIR = Path("/usr/share/games/fortunes")
HELD_OUT_CATEGORIES: tuple[str, ...] = ("songs-poems", "literature")
SKIPPED_CATEGORIES: tuple[str, ...] = ("ascii-art", "translate-me")
_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+")


def _category_texts(path: Path, min_words: int, max_words: int) -> set[str]:
    texts: set[str] = set()
    raw = path.read_text(encoding="utf-8", errors="replace")
    for cookie in raw.split("\n%\n"):
        body = "\n".join(line for line in cookie.splitlines() if not line.strip().startswith("--"))
        for sentence in _SENTENCE_END.split(" ".join(body.split())):
            if any(ch.isdigit() for ch in sentence):
                continue
            text = normalise_text(sentence).text
            words = text.split()
            if (
                min_words <= len(words) <= max_words
                and sum(len(w) == 1 and w not in ("A", "I") for w in words) <= 1
            ):
                texts.add(text)
    return texts


@lru_cache(maxsize=2)
def fortune_texts(min_words: int = 3, max_words: int = 22) -> dict[str, tuple[str, ...]]:
    """``{'train': ..., 'held_out': ...}`` sentences from the fortunes package (empty when absent)."""
    if not FORTUNE_DIR.is_dir():
        return {"train": (), "held_out": ()}
    train: set[str] = set()
    held: set[str] = set()
    for path in sorted(FORTUNE_DIR.iterdir()):
        if path.suffix or not path.is_file() or path.name in SKIPPED_CATEGORIES:
            continue
        bucket = held if path.name in HELD_OUT_CATEGORIES else train
        bucket |= _category_texts(path, min_words, max_words)
    return {"train": tuple(sorted(train)), "held_out": tuple(sorted(held - train))}


def training_texts() -> tuple[str, ...]:
    """WordNet's train split plus the training fortune categories, minus anything in evaluation splits."""
    pools = sentence_pool()
    excluded = set(pools["eval"]) | set(pools["calib"]) | set(fortune_texts()["held_out"])
    merged = set(pools["train"]) | set(fortune_texts()["train"])
    return tuple(sorted(merged - excluded))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--out", type=Path, required=True, help="file to write, one normalised sentence per line"
    )
    args = parser.parse_args()
    texts = training_texts()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(texts) + "\n")
    fortunes = fortune_texts()
    print(
        f"{len(texts)} training sentences ({len(fortunes['train'])} from fortunes) -> {args.out}; "
        f"held-out domain {', '.join(HELD_OUT_CATEGORIES)}: {len(fortunes['held_out'])} sentences"
    )


if __name__ == "__main__":
    main()

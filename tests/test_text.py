"""Transcript normalisation to the model's alphabet and the hash split of texts."""

from __future__ import annotations

import pytest

from workbench.speech.text import ALPHABET, normalise_text, split_of


@pytest.mark.parametrize(
    "raw,expected",
    [
        ("Hello, world!", "HELLO WORLD"),
        ("Héllo wörld, ça va?", "HELLO WORLD CA VA"),
        ("naïve Æsop's straße", "NAIVE AESOP'S STRASSE"),
        ("don't say 'quoted' words", "DON'T SAY QUOTED WORDS"),
        ("it\u2019s a well-known_fact", "IT'S A WELL KNOWN FACT"),
        ("  many   spaces\tand\nlines ", "MANY SPACES AND LINES"),
        ("Привет world", "WORLD"),
    ],
)
def test_normalise(raw, expected):
    result = normalise_text(raw)
    assert result.text == expected
    assert set(result.text) <= ALPHABET


def test_normalise_reports_what_it_changed():
    result = normalise_text("Café au lait!")
    assert result.changed and "É" in result.dropped_chars and "!" in result.dropped_chars
    assert normalise_text("ALREADY CLEAN").dropped_chars == ""
    assert normalise_text("?!").text == ""


def test_split_is_deterministic_and_roughly_ten_percent():
    texts = [f"SENTENCE NUMBER {'A' * i}" for i in range(3000)]
    splits = [split_of(t) for t in texts]
    assert splits == [split_of(t) for t in texts]
    for name, share in (("eval", 0.1), ("calib", 0.1), ("train", 0.8)):
        assert abs(splits.count(name) / len(texts) - share) < 0.03

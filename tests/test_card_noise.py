"""A set card counts noise by kind; noisy utterances whose manifest states no kind (noise recorded with the
speech, ``"condition": "noisy"``) are counted as such, not as ``none``."""

from __future__ import annotations

from workbench.speech.records import Utterance
from workbench.speech.store import UNSTATED_NOISE, build_card


def _utt(i: int, condition: str, kind: str | None = None) -> Utterance:
    return Utterance(f"u{i}", "A B", f"s{i}", "v", "us", condition, 2.0, "manifest", noise_kind=kind)


def test_noisy_rows_without_a_kind_are_not_counted_as_no_noise() -> None:
    utts = [_utt(i, "noisy") for i in range(20)] + [_utt(20 + i, "quiet") for i in range(5)]
    utts += [_utt(30, "noisy", "babble")]
    card = build_card(utts, "0" * 64, {}, [], {})
    assert card["noise_kinds"] == {UNSTATED_NOISE: 20, "none": 5, "babble": 1}

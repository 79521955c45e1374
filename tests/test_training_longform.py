"""The demo model's long training items: one voice's utterances joined into 1-30 s with pauses and level changes."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from training.longform import (
    RATE,
    Item,
    LongFormRecipe,
    item_audio,
    item_text,
    make_items,
    validation_items,
)


def _corpus(voices: int = 6, per_voice: int = 40, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    speakers = np.array([f"v{k % voices}" for k in range(voices * per_voice)], dtype=object)
    lengths = rng.integers(int(0.8 * RATE), int(6 * RATE), len(speakers))
    return speakers, lengths


def test_every_utterance_lands_in_exactly_one_item_of_its_own_voice() -> None:
    speakers, lengths = _corpus()
    recipe = LongFormRecipe(share=0.5, seconds=(1.0, 30.0), pause_s=(0.15, 1.0), gain_db=6.0)
    items = make_items(speakers, lengths, recipe, np.random.default_rng(3))
    counts = Counter(i for item in items for i in item.parts)
    assert sorted(counts) == list(range(len(lengths))) and set(counts.values()) == {1}
    joined = [item for item in items if len(item.parts) > 1]
    assert joined, "a share of 0.5 must join some utterances"
    for item in joined:
        assert len({speakers[i] for i in item.parts}) == 1  # one voice per item
        assert len(item.pauses) == len(item.parts) - 1 == len(item.gains) - 1
        assert all(0.15 * RATE <= p <= 1.0 * RATE for p in item.pauses)
        assert all(10 ** (-6 / 20) - 1e-9 <= g <= 10 ** (6 / 20) + 1e-9 for g in item.gains)
        assert item.samples(lengths) <= 30 * RATE  # a joined item never passes the longest target
    longest = max(item.samples(lengths) for item in items) / RATE
    assert longest > 15, f"joined items should reach well past the clips' 6 s, longest {longest:.1f} s"


def test_share_zero_keeps_every_clip_alone_and_draws_nothing() -> None:
    speakers, lengths = _corpus()
    rng = np.random.default_rng(1)
    items = make_items(speakers, lengths, LongFormRecipe(), rng)
    assert [item.parts for item in items] == [(i,) for i in range(len(lengths))]
    # the recipe without long items leaves the epoch's generator untouched: the batches stay those of before
    assert rng.random() == np.random.default_rng(1).random()


def test_the_recipe_is_read_from_the_config_and_checked() -> None:
    recipe = LongFormRecipe.from_config({"long_form": {"share": 0.35, "seconds": [2, 20]}})
    assert recipe.share == 0.35 and recipe.seconds == (2, 20) and recipe.pause_s == (0.15, 1.0)
    assert LongFormRecipe.from_config({}).share == 0.0
    with pytest.raises(ValueError, match="share"):
        LongFormRecipe.from_config({"long_form": {"share": 1.5}})
    with pytest.raises(ValueError, match="seconds"):
        LongFormRecipe.from_config({"long_form": {"share": 0.2, "seconds": [10, 5]}})


def test_item_audio_lays_parts_at_their_gains_with_silent_pauses_between() -> None:
    parts = [np.full(1600, 8000, dtype=np.int16), np.full(800, -4000, dtype=np.int16)]
    audio = np.concatenate(parts)
    offsets = np.array([0, 1600, 2400])
    texts = np.array(["HELLO", "WORLD"], dtype=object)
    item = Item((0, 1), (320,), (0.5, 2.0))
    wave = item_audio(audio, offsets, item)
    assert wave.dtype == np.float32 and len(wave) == 1600 + 320 + 800 == item.samples(np.diff(offsets))
    assert np.allclose(wave[:1600], 8000 / 32768 * 0.5)
    assert not wave[1600:1920].any()
    assert np.allclose(wave[1920:], -4000 / 32768 * 2.0)
    assert item_text(texts, item) == "HELLO WORLD"


def test_item_audio_scales_a_joined_item_down_rather_than_clip() -> None:
    audio = np.full(1000, 30000, dtype=np.int16)
    wave = item_audio(audio, np.array([0, 1000]), Item((0,), (), (2.0,)))
    assert np.abs(wave).max() == pytest.approx(0.99)


def test_validation_items_join_consecutive_utterances_up_to_the_length() -> None:
    lengths = np.full(10, 4 * RATE)
    items = validation_items(10, lengths, seconds=10.0, pause_s=0.5)
    # 4 + 0.5 + 4 = 8.5 s fits 10 s; a third would not: pairs, in order
    assert [item.parts for item in items] == [(0, 1), (2, 3), (4, 5), (6, 7), (8, 9)]
    assert all(item.pauses == (RATE // 2,) for item in items)

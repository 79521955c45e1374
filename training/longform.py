"""Long training items for the demo model: one voice's utterances joined into 1-30 s, with pauses and level changes.

Synthesis speaks one sentence at a time (0.5-10 s), so a model trained on its clips alone never hears the
10-30 s requests a speech service gets. Each epoch, ``make_items`` groups the training utterances by voice
(``speakers``) and starts a joined item at a share of positions: it draws a target length (uniform over
``seconds``) and takes that voice's next utterances while they fit, with a pause between each two (uniform over
``pause_s``) and each part's level moved by up to ``gain_db`` either way, as one speaker's sentences in a real
recording differ in level. The other positions stay single clips, so short speech keeps its share. Pauses are
digital silence here; ``train_demo.augment`` lays noise, reverberation and the channel over the whole item,
pauses included. ``validation_items`` joins consecutive validation utterances into fixed long items (whatever
their voices), the same every call, to watch long-form WER while training.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

RATE = 16000


@dataclass(frozen=True)
class LongFormRecipe:
    """How a share of each epoch's items is joined: ``share`` of item starts become joined items."""

    share: float = 0.0
    seconds: tuple[float, float] = (1.0, 30.0)
    pause_s: tuple[float, float] = (0.15, 1.0)
    gain_db: float = 6.0

    @classmethod
    def from_config(cls, data_config: dict) -> LongFormRecipe:
        lf = data_config.get("long_form") or {}
        recipe = cls(
            share=float(lf.get("share", 0.0)),
            seconds=tuple(lf.get("seconds", (1.0, 30.0))),  # type: ignore[arg-type]
            pause_s=tuple(lf.get("pause_s", (0.15, 1.0))),  # type: ignore[arg-type]
            gain_db=float(lf.get("gain_db", 6.0)),
        )
        if not 0.0 <= recipe.share <= 1.0:
            raise ValueError(f"long_form.share must be within 0-1, not {recipe.share}")
        if not 0 < recipe.seconds[0] <= recipe.seconds[1]:
            raise ValueError(f"long_form.seconds must be 0 < shortest <= longest, not {recipe.seconds}")
        if not 0 <= recipe.pause_s[0] <= recipe.pause_s[1]:
            raise ValueError(f"long_form.pause_s must be 0 <= shortest <= longest, not {recipe.pause_s}")
        return recipe


@dataclass(frozen=True)
class Item:
    """One training item: utterance indices in order, the pause (samples) after each but the last, and each
    part's gain (linear)."""

    parts: tuple[int, ...]
    pauses: tuple[int, ...]
    gains: tuple[float, ...]

    def samples(self, lengths: np.ndarray) -> int:
        return int(sum(int(lengths[i]) for i in self.parts) + sum(self.pauses))


def single(index: int) -> Item:
    return Item((index,), (), (1.0,))


def make_items(
    speakers: np.ndarray, lengths: np.ndarray, recipe: LongFormRecipe, rng: np.random.Generator
) -> list[Item]:
    """Every utterance exactly once: in a joined item of its own voice, or alone."""
    if recipe.share <= 0:
        return [single(int(i)) for i in range(len(lengths))]
    by_voice: dict[str, list[int]] = defaultdict(list)
    for index in rng.permutation(len(lengths)):
        by_voice[str(speakers[index])].append(int(index))
    items: list[Item] = []
    for indices in by_voice.values():
        pos = 0
        while pos < len(indices):
            first = indices[pos]
            pos += 1
            if rng.random() >= recipe.share:
                items.append(single(first))
                continue
            target = rng.uniform(*recipe.seconds) * RATE
            parts, pauses, total = [first], [], int(lengths[first])
            while pos < len(indices):
                pause = int(rng.uniform(*recipe.pause_s) * RATE)
                nxt = int(lengths[indices[pos]])
                if total + pause + nxt > target:
                    break
                parts.append(indices[pos])
                pauses.append(pause)
                total += pause + nxt
                pos += 1
            gains = (
                10 ** (rng.uniform(-recipe.gain_db, recipe.gain_db, len(parts)) / 20)
                if len(parts) > 1
                else [1]
            )
            items.append(Item(tuple(parts), tuple(pauses), tuple(float(g) for g in gains)))
    return items


def validation_items(
    count: int, lengths: np.ndarray, seconds: float = 20.0, pause_s: float = 0.5
) -> list[Item]:
    """Consecutive validation utterances joined up to ``seconds`` each (a fixed, seedless grouping)."""
    items, parts, total = [], [], 0
    pause = int(pause_s * RATE)
    for index in range(count):
        n = int(lengths[index])
        if parts and total + pause + n > seconds * RATE:
            items.append(Item(tuple(parts), (pause,) * (len(parts) - 1), (1.0,) * len(parts)))
            parts, total = [], 0
        total += (pause if parts else 0) + n
        parts.append(index)
    if len(parts) > 1:
        items.append(Item(tuple(parts), (pause,) * (len(parts) - 1), (1.0,) * len(parts)))
    return items


def item_audio(audio: np.ndarray, offsets: np.ndarray, item: Item) -> np.ndarray:
    """The item's waveform in float32 (-1..1): its parts at their gains with silent pauses between."""
    pieces: list[np.ndarray] = []
    for k, index in enumerate(item.parts):
        if k:
            pieces.append(np.zeros(item.pauses[k - 1], dtype=np.float32))
        part = audio[offsets[index] : offsets[index + 1]].astype(np.float32) / 32768.0
        pieces.append(part * np.float32(item.gains[k]))
    joined = np.concatenate(pieces)
    peak = float(np.abs(joined).max()) if joined.size else 0.0
    return joined / peak * 0.99 if peak > 0.99 else joined


def item_text(texts: np.ndarray, item: Item) -> str:
    return " ".join(str(texts[i]) for i in item.parts)

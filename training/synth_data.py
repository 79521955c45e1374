"""Training data for the demo model: WordNet training-split text spoken by the workbench's voices.

Uses only ``train``-split texts (disjoint from calibration/evaluation texts by construction) and
only voices with ``seen_in_training``. Clean audio is stored; noise and level augmentation happen
on the fly in ``train_demo.py``.
"""

from __future__ import annotations

import hashlib
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np
from tqdm import tqdm

from workbench.speech.text import sentence_pool
from workbench.speech.tts import Prosody, Voice, available_voices, synthesize


@dataclass(frozen=True)
class DataSpec:
    count: int
    split: str
    seed: int
    majority_share: float
    rate_range: tuple[float, float]
    pitch_range: tuple[float, float]
    max_seconds: float
    seen_voices_only: bool = True


def _voice_table(seen_only: bool) -> tuple[list[Voice], list[Voice]]:
    voices = [v for v in available_voices() if v.seen_in_training or not seen_only]
    return [v for v in voices if v.is_majority_accent], [v for v in voices if not v.is_majority_accent]


def _one(args: tuple[DataSpec, int]) -> tuple[np.ndarray, str, str] | None:
    spec, index = args
    digest = hashlib.sha256(f"{spec.seed}|{spec.split}|{index}".encode()).digest()
    rng = np.random.default_rng(int.from_bytes(digest[:8], "big"))
    majority, other = _voice_table(spec.seen_voices_only)
    pool = majority if rng.random() < spec.majority_share else other
    voice = pool[int(rng.integers(len(pool)))]
    texts = sentence_pool()[spec.split]
    text = texts[int(rng.integers(len(texts)))]
    prosody = Prosody(float(rng.uniform(*spec.rate_range)), float(rng.uniform(*spec.pitch_range)))
    try:
        audio = synthesize(voice, text, prosody)
    except Exception:
        return None
    if len(audio) > spec.max_seconds * 16000 or len(audio) < 8000:
        return None
    return (np.clip(audio * 32767, -32768, 32767).astype(np.int16), text, voice.speaker)


def generate(spec: DataSpec, workers: int) -> dict[str, object]:
    """Returns {'audio': int16 concat, 'offsets': int64 [n+1], 'texts': [...], 'speakers': [...]}."""
    sentence_pool()  # warm the cache before forking
    jobs = [(spec, i) for i in range(spec.count)]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        results = list(
            tqdm(
                pool.map(_one, jobs, chunksize=16), total=len(jobs), desc=f"tts {spec.split}", mininterval=10
            )
        )
    kept = [r for r in results if r is not None]
    offsets = np.cumsum([0] + [len(r[0]) for r in kept]).astype(np.int64)
    return {
        "audio": np.concatenate([r[0] for r in kept]),
        "offsets": offsets,
        "texts": [r[1] for r in kept],
        "speakers": [r[2] for r in kept],
    }

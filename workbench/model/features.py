"""Input features as ``Wav2Vec2FeatureExtractor`` makes them: raw 16 kHz float32, optionally normalised."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def normalise_audio(audio: np.ndarray) -> np.ndarray:
    """Per-utterance zero mean, unit variance (``do_normalize=True``; same epsilon as transformers)."""
    audio = np.asarray(audio, dtype=np.float32).reshape(-1)
    return ((audio - audio.mean()) / np.sqrt(audio.var() + 1e-7)).astype(np.float32)


def wants_normalisation(model_dir: str | Path) -> bool:
    """``do_normalize`` from the model's preprocessor_config.json (True when absent, as for base-960h)."""
    path = Path(model_dir) / "preprocessor_config.json"
    if not path.is_file():
        return True
    return bool(json.loads(path.read_text()).get("do_normalize", True))

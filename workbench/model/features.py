"""Input features as a model's ``Wav2Vec2FeatureExtractor`` makes them: raw 16 kHz float32, optionally normalised.

``FeatureSettings`` holds what the folder's feature-extractor settings say (``do_normalize``,
``sampling_rate``, ``return_attention_mask``, ``padding_value``; transformers' defaults when absent), read
where transformers reads them: nested in ``processor_config.json`` (what transformers 5 writes), else
``preprocessor_config.json`` (transformers 4);
``prepare`` turns one clip into the model's ``input_values`` row. The workbench runs accuracy at batch 1
without padding and times equal-length rows, so no attention mask is ever needed: every row is all signal.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from workbench.config import SAMPLE_RATE
from workbench.errors import WorkbenchError


def normalise_audio(audio: np.ndarray) -> np.ndarray:
    """Per-utterance zero mean, unit variance (``do_normalize=True``; same epsilon as transformers)."""
    audio = np.asarray(audio, dtype=np.float32).reshape(-1)
    return ((audio - audio.mean()) / np.sqrt(audio.var() + 1e-7)).astype(np.float32)


def raw(audio: np.ndarray) -> np.ndarray:
    """The clip as float32, unchanged (``do_normalize=False``)."""
    return np.asarray(audio, dtype=np.float32).reshape(-1)


@dataclass(frozen=True)
class FeatureSettings:
    """The feature extractor's settings that change what the model is fed."""

    do_normalize: bool = True
    sampling_rate: int = SAMPLE_RATE
    return_attention_mask: bool = False
    padding_value: float = 0.0
    from_file: bool = True  # False: no feature-extractor settings were saved and transformers' defaults apply

    def prepare(self, audio: np.ndarray) -> np.ndarray:
        """One clip -> its ``input_values`` row (float32, normalised when ``do_normalize``)."""
        return normalise_audio(audio) if self.do_normalize else raw(audio)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> FeatureSettings:
        return cls(
            bool(obj["do_normalize"]),
            int(obj["sampling_rate"]),
            bool(obj["return_attention_mask"]),
            float(obj.get("padding_value", 0.0)),
            bool(obj.get("from_file", True)),
        )


#: Where a model folder keeps its feature extractor's settings, in the order transformers reads them:
#: transformers 5's ``Processor.save_pretrained`` nests them in ``processor_config.json`` (under
#: ``feature_extractor``, or ``audio_processor``) and writes no ``preprocessor_config.json``; transformers 4
#: (and a feature extractor saved on its own) writes ``preprocessor_config.json``.
PROCESSOR_FILE = "processor_config.json"
FEATURE_EXTRACTOR_FILE = "preprocessor_config.json"
_NESTED_KEYS = ("feature_extractor", "audio_processor")


def _read_object(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise WorkbenchError(
            f"cannot read {path} ({exc}); save the processor again (processor.save_pretrained(folder))"
        ) from exc
    if not isinstance(data, dict):
        raise WorkbenchError(f"{path} must hold a JSON object (the processor's settings)")
    return data


def find_feature_settings(model_dir: str | Path) -> tuple[Path, dict[str, Any]] | None:
    """The file holding a folder's feature-extractor settings and those settings, as transformers finds them:
    the nested object of ``processor_config.json`` first, else ``preprocessor_config.json``; None when
    neither holds them."""
    folder = Path(model_dir)
    processor = folder / PROCESSOR_FILE
    if processor.is_file():
        data = _read_object(processor)
        for key in _NESTED_KEYS:
            if key in data:
                nested = data[key]
                if not isinstance(nested, dict):
                    raise WorkbenchError(
                        f"{processor}: {key!r} must be a JSON object (the feature extractor's settings)"
                    )
                return processor, nested
    legacy = folder / FEATURE_EXTRACTOR_FILE
    if legacy.is_file():
        data = _read_object(legacy)
        return legacy, data.get("feature_extractor", data)
    return None


def read_feature_settings(model_dir: str | Path) -> FeatureSettings:
    """The settings a model folder saved for its feature extractor (transformers' defaults when absent).

    Both layouts are read (``find_feature_settings``). A model trained on another sampling rate than the
    workbench's 16 kHz sets is refused.
    """
    found = find_feature_settings(model_dir)
    if found is None:
        return FeatureSettings(from_file=False)
    path, data = found
    try:
        settings = FeatureSettings(
            bool(data.get("do_normalize", True)),
            int(data.get("sampling_rate", SAMPLE_RATE)),
            bool(data.get("return_attention_mask", False)),
            float(data.get("padding_value", 0.0)),
        )
    except (TypeError, ValueError) as exc:
        raise WorkbenchError(f"{path}: a value has the wrong type ({exc})") from exc
    if settings.sampling_rate != SAMPLE_RATE:
        raise WorkbenchError(
            f"{path}: the model expects {settings.sampling_rate} Hz audio; the workbench feeds "
            f"{SAMPLE_RATE} Hz speech sets, so only {SAMPLE_RATE} Hz models are supported"
        )
    return settings

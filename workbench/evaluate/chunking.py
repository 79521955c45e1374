"""Long audio through a fixed-length engine: overlapping chunks whose stride logits are dropped, then joined.

The arithmetic is transformers' ASR pipeline's (``chunk_length_s``/``stride_length_s``), so a transcript
measured here is what that pipeline gives on the same model and audio: lengths are rounded to whole
frames (``samples_per_frame``, the model's ``inputs_to_logits_ratio``); chunk ``k`` starts at
``k * (chunk - left - right)`` samples; the first chunk keeps its left edge, the last its right edge; a
trailing piece no longer than the left stride is not run; each chunk is prepared on its own (normalised
per chunk when the model's feature extractor does so) and fed at its own length; its stride is rescaled
to frames (``round(samples / samples_per_frame)``) and ``[left : frames - right]`` of its logits kept.
A clip no longer than one chunk is fed whole, exactly as without chunking.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING

import numpy as np

from workbench.config import INFERENCE
from workbench.errors import WorkbenchError
from workbench.evaluate.inference import ChunkSettings

if TYPE_CHECKING:
    from workbench.model.description import ModelDescription


@dataclass(frozen=True)
class Chunk:
    """One chunk in samples: ``audio[start:end]``, and the samples of each edge whose logits are dropped."""

    start: int
    end: int
    left: int
    right: int

    @property
    def samples(self) -> int:
        return self.end - self.start


def samples_per_frame(model: ModelDescription) -> int:
    """Input samples per logit frame: the product of the model's conv strides (320 for the Wav2Vec2 family)."""
    if model.folder is not None and (model.folder / "config.json").is_file():
        try:
            config = json.loads((model.folder / "config.json").read_text(encoding="utf-8"))
            strides = config.get("conv_stride")
            if isinstance(strides, list) and strides and all(isinstance(s, int) and s > 0 for s in strides):
                return int(reduce(lambda a, b: a * b, strides, 1))
        except (OSError, ValueError):
            pass
    return INFERENCE.samples_per_frame


def to_samples(seconds: float, sampling_rate: int, align: int) -> int:
    """Seconds -> samples, rounded to whole frames (as the pipeline does)."""
    return int(round(seconds * sampling_rate / align) * align)


def chunk_spans(n_samples: int, chunk: int, left: int, right: int) -> list[Chunk]:
    """The chunks the pipeline cuts ``n_samples`` into (lengths in samples, already frame-aligned)."""
    if chunk <= left + right:
        raise WorkbenchError(
            f"a chunk of {chunk} samples leaves nothing between its strides ({left} + {right} samples, "
            "rounded to whole frames); pass a longer --chunk-seconds or shorter strides"
        )
    if n_samples <= chunk:
        return [Chunk(0, n_samples, 0, 0)]
    spans: list[Chunk] = []
    for start in range(0, n_samples, chunk - left - right):
        end = min(start + chunk, n_samples)
        is_last = start + chunk >= n_samples
        this_left = 0 if start == 0 else left
        if end - start > this_left:
            spans.append(Chunk(start, end, this_left, 0 if is_last else right))
        if is_last:
            break
    return spans


def spans_of(n_samples: int, settings: ChunkSettings, sampling_rate: int, align: int) -> list[Chunk]:
    """``chunk_spans`` with the settings' seconds turned into frame-aligned samples."""
    return chunk_spans(
        n_samples,
        to_samples(settings.length_s, sampling_rate, align),
        to_samples(settings.left_s, sampling_rate, align),
        to_samples(settings.right_s, sampling_rate, align),
    )


def kept_frames(logits: np.ndarray, span: Chunk, align: int) -> np.ndarray:
    """The frames of one chunk's logits [frames, vocab] that survive its strides."""
    frames = int(round(span.samples / align))
    left = int(round(span.left / span.samples * frames))
    right = int(round(span.right / span.samples * frames))
    return logits[left : frames - right]


def chunked_logits(
    audio: np.ndarray,
    settings: ChunkSettings,
    infer: Callable[[np.ndarray], np.ndarray],
    prepare: Callable[[np.ndarray], np.ndarray],
    sampling_rate: int,
    align: int,
) -> np.ndarray:
    """One recording's merged logits [frames, vocab]: every chunk prepared, run (``infer``: one
    ``input_values`` row -> logits [frames, vocab]) and trimmed, then joined in order."""
    audio = np.asarray(audio, dtype=np.float32).reshape(-1)
    spans = spans_of(len(audio), settings, sampling_rate, align)
    if len(spans) == 1 and spans[0].left == spans[0].right == 0:
        return infer(prepare(audio))
    return np.concatenate(
        [kept_frames(infer(prepare(audio[s.start : s.end])), s, align) for s in spans], axis=0
    )


def chunk_lengths_s(
    duration_s: float, settings: ChunkSettings, sampling_rate: int, align: int
) -> list[float]:
    """The lengths (seconds) of the pieces a recording of ``duration_s`` is fed as (calibration, profiles)."""
    spans = spans_of(int(round(duration_s * sampling_rate)), settings, sampling_rate, align)
    return [s.samples / sampling_rate for s in spans]


def chunk_audio(
    audio: np.ndarray, settings: ChunkSettings, sampling_rate: int, align: int
) -> list[np.ndarray]:
    """The raw audio of each chunk (what a calibration pass sees when deployment chunks)."""
    audio = np.asarray(audio, dtype=np.float32).reshape(-1)
    spans = spans_of(len(audio), settings, sampling_rate, align)
    return [audio[s.start : s.end] for s in spans]

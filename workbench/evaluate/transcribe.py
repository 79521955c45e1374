"""Greedy CTC transcription of audio through any Runner (ONNX: ``input_values`` [1, samples] -> ``logits``)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from workbench.backends.base import Runner
from workbench.errors import WorkbenchError
from workbench.model.export import INPUT, OUTPUT
from workbench.model.features import normalise_audio
from workbench.model.vocab import decode_ids

def logits_of(runner: Runner, batch: np.ndarray) -> np.ndarray:
    """Run a [batch, samples] float32 array; returns logits [batch, frames, vocab]."""
    outputs = runner.infer({INPUT: batch})
    if OUTPUT in outputs:
        return np.asarray(outputs[OUTPUT])
    if len(outputs) == 1:
        return np.asarray(next(iter(outputs.values())))
    raise WorkbenchError(f"{runner.name}: model has no '{OUTPUT}' output (outputs: {sorted(outputs)})")


@dataclass(frozen=True)
class Transcripts:
    candidate: str
    texts: list[str]
    seconds: float  # wall time of the whole pass


def transcribe(runner: Runner, audios: Iterable[np.ndarray], name: str | None = None) -> Transcripts:
    """Transcribe clips one at a time (batch 1, no padding, so results do not depend on batching)."""
    texts: list[str] = []
    start = time.perf_counter()
    with runner:
        for audio in audios:
            logits = logits_of(runner, normalise_audio(audio)[None, :])
            if logits.ndim != 3:
                raise WorkbenchError(f"{runner.name}: logits should be [batch, frames, vocab], got {logits.shape}")
            texts.append(decode_ids(logits[0].argmax(axis=-1).tolist()))
    return Transcripts(name or runner.name, texts, time.perf_counter() - start)


def transcribe_set(runner: Runner, speech_set, name: str | None = None,
                   limit: int | None = None) -> Transcripts:
    """Transcribe every utterance of a stored ``SpeechSet`` (the first ``limit`` when given)."""
    utts: Sequence = speech_set.utterances[:limit] if limit else speech_set.utterances
    return transcribe(runner, (speech_set.audio(u) for u in utts), name)

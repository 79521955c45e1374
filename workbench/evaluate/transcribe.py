"""Transcription of audio through any Runner, with the model's own features and vocabulary.

ONNX models take ``input_values`` [batch, samples] and give ``logits``. Each clip is prepared the way the
model's feature extractor would (``ModelDescription.prepare``: normalised only when ``do_normalize``) and
its logits decoded with the model's own vocabulary (blank, word delimiter, special tokens). An
``InferenceConfig`` says whether long clips go in chunks (``workbench.evaluate.chunking``) and which
decoder turns the logits into text (``workbench.evaluate.decoders``); the default is whole clips, greedy.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from workbench.backends.base import Runner
from workbench.backends.onnxruntime import OutOfMemory
from workbench.errors import WorkbenchError
from workbench.evaluate.chunking import chunked_logits, samples_per_frame
from workbench.evaluate.decoders import decoder_for
from workbench.evaluate.inference import GREEDY, DecoderSettings, InferenceConfig
from workbench.model.export import INPUT, OUTPUT

if TYPE_CHECKING:
    from workbench.model.description import ModelDescription


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
    by_decoder: dict[str, list[str]] = field(default_factory=dict)  # the ``also`` decoders' texts, by name


def transcribe(
    runner: Runner,
    audios: Iterable[np.ndarray],
    model: ModelDescription,
    name: str | None = None,
    inference: InferenceConfig = GREEDY,
    also: Sequence[DecoderSettings] = (),
    labels: Sequence[str] | None = None,
) -> Transcripts:
    """Transcribe clips one at a time (batch 1, no padding, so results do not depend on batching), each
    whole or in chunks, decoded as ``inference`` says (``workbench.evaluate.inference``); the same logits
    are also decoded by each decoder in ``also`` (``Transcripts.by_decoder``). A clip the model runs out of
    memory on is a user error naming it (``labels[i]``, else its number)."""
    texts: list[str] = []
    width = model.vocabulary.size
    decode = decoder_for(inference.decoder, model.vocabulary)
    others = {d.name: decoder_for(d, model.vocabulary) for d in also}
    by_decoder: dict[str, list[str]] = {name: [] for name in others}
    align = samples_per_frame(model)

    def infer(row: np.ndarray) -> np.ndarray:
        logits = logits_of(runner, row[None, :])
        if logits.ndim != 3:
            raise WorkbenchError(
                f"{runner.name}: logits should be [batch, frames, vocab], got {logits.shape}"
            )
        if logits.shape[-1] < width:
            raise WorkbenchError(
                f"{runner.name}: {logits.shape[-1]} logits per frame, but the model "
                f"{model.source} has {width} tokens; this ONNX file is another model's"
            )
        return logits[0]

    start = time.perf_counter()
    with runner:
        for i, audio in enumerate(audios):
            try:
                if inference.chunks is None:
                    logits = infer(model.prepare(audio))
                else:
                    rate = model.features.sampling_rate
                    logits = chunked_logits(audio, inference.chunks, infer, model.prepare, rate, align)
            except OutOfMemory as exc:
                clip = labels[i] if labels is not None else f"clip {i + 1}"
                raise WorkbenchError(f"{clip}: {exc}") from exc
            texts.append(decode(logits))
            for other, decode_other in others.items():
                by_decoder[other].append(decode_other(logits))
    return Transcripts(name or runner.name, texts, time.perf_counter() - start, by_decoder)


def transcribe_set(
    runner: Runner,
    speech_set,
    model: ModelDescription,
    name: str | None = None,
    limit: int | None = None,
    inference: InferenceConfig = GREEDY,
) -> Transcripts:
    """Transcribe every utterance of a stored ``SpeechSet`` (the first ``limit`` when given)."""
    utts: Sequence = speech_set.utterances[:limit] if limit else speech_set.utterances
    labels = [f"utterance {u.id} ({speech_set.path / u.audio})" for u in utts]
    return transcribe(runner, (speech_set.audio(u) for u in utts), model, name, inference, labels=labels)

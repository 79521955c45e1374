"""Where chunked inference loses words on a long-form set: FP32 WER per chunk length and stride, per part.

A long-form recording is its parts (the joined utterances, ``extra["parts"]``) with pauses between them
(``extra["pauses_s"]``). For each chunk setting the recording's merged logits are cut at the pauses'
midpoints and each part's stretch decoded on its own, so every part gets its own errors and a flag saying
whether a seam (where one chunk's kept logits end and the next one's begin) falls inside its speech. Parts
with a seam against parts without one tells the seams' share of the loss; parts without one against the same
utterances fed one by one tells what the rest of the recording around them costs (the model's context).
``chunk_s`` 0 feeds each recording whole. Used by ``benchmarks/as_deployed.py --sweep``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from workbench.backends.base import Runner
from workbench.evaluate.batching import logits_of
from workbench.evaluate.chunking import chunked_logits, samples_per_frame, spans_of
from workbench.evaluate.inference import ChunkSettings
from workbench.evaluate.wer import Scoring, UtteranceErrors, corpus_wer, score_utterances
from workbench.model.description import ModelDescription


@dataclass(frozen=True)
class Part:
    """One joined utterance inside a recording: its speech ``[start, end)`` and the stretch ``[low, high)``
    (pause midpoints) whose logits are its own, in samples."""

    text: str
    start: int
    end: int
    low: int
    high: int


def parts_of(recording: Any, source: Any, rate: int) -> list[Part]:
    """A long-form recording's parts, laid out as ``workbench.speech.longform.join`` wrote them."""
    by_id = {u.id: u for u in source.utterances}
    utts = [by_id[i] for i in recording.extra["parts"]]
    pauses = [int(round(s * rate)) for s in recording.extra["pauses_s"]]
    spans, pos = [], 0
    for i, utt in enumerate(utts):
        pos += pauses[i - 1] if i else 0
        n = len(source.audio(utt))
        spans.append((pos, pos + n))
        pos += n
    out = []
    for i, (start, end) in enumerate(spans):
        low = 0 if i == 0 else (spans[i - 1][1] + start) // 2
        high = pos if i == len(spans) - 1 else (end + spans[i + 1][0]) // 2
        out.append(Part(utts[i].text, start, end, low, high))
    return out


def seams_of(n_samples: int, settings: ChunkSettings, rate: int, align: int) -> list[int]:
    """Sample positions where one chunk's kept logits end and the next chunk's begin."""
    spans = spans_of(n_samples, settings, rate, align)
    return [s.end - s.right for s in spans[:-1]]


def merged_logits(
    runner: Runner, model: ModelDescription, audio: np.ndarray, settings: ChunkSettings | None
) -> np.ndarray:
    """One recording's logits [frames, vocab]: whole, or chunked and merged (an active ``runner``)."""

    def infer(row: np.ndarray) -> np.ndarray:
        return logits_of(runner, row[None, :].astype(np.float32))[0]

    if settings is None:
        return infer(model.prepare(audio))
    rate = model.features.sampling_rate
    return chunked_logits(audio, settings, infer, model.prepare, rate, samples_per_frame(model))


def _rate(rows: Sequence[UtteranceErrors]) -> float | None:
    return corpus_wer(list(rows)) if rows else None


def sweep_row(
    runner: Runner,
    model: ModelDescription,
    long_set: Any,
    source: Any,
    settings: ChunkSettings | None,
    scoring: Scoring,
) -> dict[str, Any]:
    """FP32 WER of the long-form set under one chunk setting: per recording, per part, and split by seams."""
    rate = model.features.sampling_rate
    align = samples_per_frame(model)
    refs, hyps, part_refs, part_hyps, crossed = [], [], [], [], []
    for rec in long_set.utterances:
        audio = long_set.audio(rec)
        logits = merged_logits(runner, model, audio, settings)
        refs.append(rec.text)
        hyps.append(model.decode(logits))
        seams = seams_of(len(audio), settings, rate, align) if settings is not None else []
        for part in parts_of(rec, source, rate):
            part_refs.append(part.text)
            part_hyps.append(model.decode(logits[part.low // align : part.high // align]))
            crossed.append(any(part.start < s < part.end for s in seams))
    ids = [str(i) for i in range(len(part_refs))]
    parts = score_utterances(ids, part_refs, part_hyps, scoring)
    whole = score_utterances([str(i) for i in range(len(refs))], refs, hyps, scoring)
    return {
        "chunk_s": settings.length_s if settings is not None else 0.0,
        "stride_s": [settings.left_s, settings.right_s] if settings is not None else None,
        "wer": corpus_wer(whole),
        "parts_wer": corpus_wer(parts),
        "parts": len(parts),
        "parts_with_a_seam": int(sum(crossed)),
        "wer_parts_with_a_seam": _rate([p for p, c in zip(parts, crossed) if c]),
        "wer_parts_without_a_seam": _rate([p for p, c in zip(parts, crossed) if not c]),
    }


def parse_settings(text: str) -> list[ChunkSettings | None]:
    """``4/0.67,8/1.33,0``: chunk seconds / stride seconds (both edges); ``0`` feeds recordings whole."""
    out: list[ChunkSettings | None] = []
    for item in (t.strip() for t in text.split(",") if t.strip()):
        length, _, stride = item.partition("/")
        if float(length) == 0:
            out.append(None)
        else:
            out.append(ChunkSettings.of(float(length), float(stride) if stride else None))
    return out

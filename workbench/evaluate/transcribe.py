"""Transcription of audio through any Runner, with the model's own features and vocabulary.

ONNX models take ``input_values`` [batch, samples] (and ``attention_mask`` when exported with one) and give
``logits``. Each clip is prepared the way the model's feature extractor would (``ModelDescription.prepare``:
normalised only when ``do_normalize``). An ``InferenceConfig`` says whether long clips go in chunks
(``workbench.evaluate.chunking``) and which decoder turns the logits into text (``workbench.evaluate.decoders``);
the default is whole clips, greedy. Whole clips go through the batching layer (``workbench.evaluate.batching``),
which runs clips of similar length together and hands back each utterance's own logits; chunked clips run one
chunk at a time. Either way the logits are decoded one utterance at a time with the model's own vocabulary
(blank, word delimiter, special tokens). ``batch_check`` transcribes a sample again at batch 1 and records how
many transcripts batching changed and by how much WER.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from workbench.backends.base import Runner
from workbench.backends.onnxruntime import OutOfMemory
from workbench.config import BATCH_CHECK_UTTERANCES
from workbench.errors import WorkbenchError
from workbench.evaluate.batching import (
    MASK_INPUT,
    BatchPolicy,
    ConvGeometry,
    logits_of,
    plan_batches,
    utterance_logits,
)
from workbench.evaluate.chunking import chunked_logits, samples_per_frame
from workbench.evaluate.decoders import decoder_for
from workbench.evaluate.inference import GREEDY, DecoderSettings, InferenceConfig
from workbench.evaluate.wer import Scoring, corpus_wer, score_utterances

__all__ = [
    "BatchCheck",
    "Transcripts",
    "batch_check",
    "check_sample",
    "compare_batched",
    "logits_of",
    "transcribe",
    "transcribe_checked",
    "transcribe_set",
]

if TYPE_CHECKING:
    from workbench.model.description import ModelDescription


@dataclass(frozen=True)
class Transcripts:
    candidate: str
    texts: list[str]
    seconds: float  # wall time of the whole pass
    batching: dict[str, Any] = field(default_factory=dict)  # the batch policy used (size, mask, padding)
    by_decoder: dict[str, list[str]] = field(default_factory=dict)  # the ``also`` decoders' texts, by name
    # the clips the ``also`` decoders decoded (their texts are in this order); None: every clip
    also_on: tuple[int, ...] | None = None


def transcribe(
    runner: Runner,
    audios: Iterable[np.ndarray],
    model: ModelDescription,
    name: str | None = None,
    inference: InferenceConfig = GREEDY,
    also: Sequence[DecoderSettings] = (),
    labels: Sequence[str] | None = None,
    batch_size: int = 1,
    also_on: Sequence[int] | None = None,
    pad: bool = False,
    on_logits: Callable[[int, np.ndarray], None] | None = None,
) -> Transcripts:
    """Transcribe clips, each whole or in chunks, decoded as ``inference`` says (``workbench.evaluate.inference``);
    the same logits are also decoded by each decoder in ``also`` (``Transcripts.by_decoder``), on every clip or, with
    ``also_on``, on those clips only (their texts in ``also_on``'s sorted order). Whole clips run in
    length-bucketed batches of up to ``batch_size`` (1: one clip at a time, no padding; clips of different lengths
    share a batch only when the model takes an attention mask, or with ``pad``, the deployment padding them:
    ``BatchPolicy``); chunked clips run one chunk at a time. The texts come back in the clips' order. A clip the
    model runs out of memory on is a user error naming it (``labels[i]``, else its number; in a batch, its longest
    clip). ``on_logits`` (optional) gets each clip's index and its logits [frames, vocab] as they are decoded (e.g.
    the model's own confidence)."""
    rows = list(audios)
    texts: list[str] = [""] * len(rows)
    width = model.vocabulary.size
    decode = decoder_for(inference.decoder, model.vocabulary)
    others = {d.name: decoder_for(d, model.vocabulary) for d in also}
    by_decoder: dict[str, list[str]] = {name: [""] * len(rows) for name in others}
    picked = None if also_on is None else tuple(sorted(set(also_on)))
    if picked is not None and picked and not 0 <= picked[0] <= picked[-1] < len(rows):
        raise ValueError(f"also_on holds clip indices outside 0..{len(rows) - 1}")
    wanted = None if picked is None else set(picked)

    def clip(i: int) -> str:
        return labels[i] if labels is not None else f"clip {i + 1}"

    def keep(index: int, logits: np.ndarray) -> None:
        texts[index] = decode(logits)
        if on_logits is not None:
            on_logits(index, logits)
        if wanted is not None and index not in wanted:
            return
        for other, decode_other in others.items():
            by_decoder[other][index] = decode_other(logits)

    def infer(row: np.ndarray) -> np.ndarray:
        batch = row[None, :]
        # a graph exported with an attention mask gets one (every sample real: a chunk is never padded)
        mask = np.ones(batch.shape, dtype=np.int64) if MASK_INPUT in runner.graph_inputs() else None
        logits = logits_of(runner, batch, mask)
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
    was_active = runner.is_active  # a runner the caller keeps active (block by block) stays active
    runner.activate()
    try:
        if inference.chunks is None:
            prepared = [model.prepare(audio) for audio in rows]
            policy = BatchPolicy.for_runner(runner, model, batch_size, pad)
            geometry = ConvGeometry.of_model(model)
            done: set[int] = set()
            try:
                for index, logits in utterance_logits(runner, prepared, policy, geometry, width):
                    keep(index, logits)
                    done.add(index)
            except OutOfMemory as exc:
                lengths = [len(r) for r in prepared]
                batches = plan_batches(lengths, policy.batch_size, policy.max_padding)
                failing = next((b for b in batches if not set(b) <= done), [0])
                longest = max(failing, key=lambda i: lengths[i])
                where = clip(longest)
                if len(failing) > 1:
                    where += (
                        f" (the longest clip of a batch of {len(failing)}; "
                        "a smaller --batch-size needs less memory)"
                    )
                raise WorkbenchError(f"{where}: {exc}") from exc
            described = policy.describe()
        else:
            rate = model.features.sampling_rate
            align = samples_per_frame(model)
            for i, audio in enumerate(rows):
                try:
                    logits = chunked_logits(audio, inference.chunks, infer, model.prepare, rate, align)
                except OutOfMemory as exc:
                    raise WorkbenchError(f"{clip(i)}: {exc}") from exc
                keep(i, logits)
            # chunks run one at a time: batch 1 whatever ``batch_size`` asked for
            described = {"batch_size": 1, "attention_mask": False, "max_padding": None, "chunked": True}
    finally:
        if not was_active:
            runner.deactivate()
    if picked is not None:
        by_decoder = {other: [got[i] for i in picked] for other, got in by_decoder.items()}
    return Transcripts(name or runner.name, texts, time.perf_counter() - start, described, by_decoder, picked)


def transcribe_set(
    runner: Runner,
    speech_set,
    model: ModelDescription,
    name: str | None = None,
    limit: int | None = None,
    inference: InferenceConfig = GREEDY,
    batch_size: int = 1,
) -> Transcripts:
    """Transcribe every utterance of a stored ``SpeechSet`` (the first ``limit`` when given)."""
    utts: Sequence = speech_set.utterances[:limit] if limit else speech_set.utterances
    labels = [f"utterance {u.id} ({speech_set.path / u.audio})" for u in utts]
    return transcribe(
        runner,
        [speech_set.audio(u) for u in utts],
        model,
        name,
        inference,
        labels=labels,
        batch_size=batch_size,
    )


def check_sample(count: int, size: int = BATCH_CHECK_UTTERANCES) -> list[int]:
    """Indices of up to ``size`` utterances spread evenly over ``count`` (all of them when fewer)."""
    if count <= size:
        return list(range(count))
    return sorted({round(i * (count - 1) / (size - 1)) for i in range(size)})


@dataclass(frozen=True)
class BatchCheck:
    """Batched transcripts against batch 1 on a sample: how many differ, and the WER each gives."""

    candidate: str
    batch_size: int
    utterances: int
    differing: int
    wer_batched: float | None
    wer_batch1: float | None

    @property
    def wer_difference_points(self) -> float | None:
        if self.wer_batched is None or self.wer_batch1 is None:
            return None
        return 100.0 * (self.wer_batched - self.wer_batch1)

    def to_json(self) -> dict[str, Any]:
        return {
            "candidate": self.candidate,
            "batch_size": self.batch_size,
            "utterances": self.utterances,
            "differing_transcripts": self.differing,
            "wer_batched": self.wer_batched,
            "wer_batch1": self.wer_batch1,
            "wer_difference_points": self.wer_difference_points,
        }

    def summary(self) -> str:
        diff = self.wer_difference_points
        return (
            f"{self.candidate}: batch {self.batch_size} vs batch 1 on {self.utterances} utterances: "
            f"{self.differing} transcript(s) differ"
            + (f", WER {diff:+.2f} points" if diff is not None else "")
        )


def batch_check(
    runner: Runner,
    audios: Sequence[np.ndarray],
    batched: Sequence[str],
    model: ModelDescription,
    batch_size: int,
    references: Sequence[str] | None = None,
    name: str | None = None,
    inference: InferenceConfig = GREEDY,
) -> BatchCheck:
    """Transcribe ``audios`` (a sample) at batch 1 and compare with their ``batched`` transcripts; with
    ``references`` the error rate of both (the model's error unit and text normaliser)."""
    single = transcribe(runner, audios, model, name, inference, batch_size=1).texts
    return compare_batched(single, batched, model, batch_size, references, name or runner.name)


def compare_batched(
    single: Sequence[str],
    batched: Sequence[str],
    model: ModelDescription,
    batch_size: int,
    references: Sequence[str] | None,
    name: str,
) -> BatchCheck:
    """The ``BatchCheck`` of a sample's batch-1 transcripts (``single``) against its ``batched`` ones."""
    differing = sum(a != b for a, b in zip(single, batched))
    wer_batched = wer_single = None
    if references is not None:
        scoring = Scoring.for_model(model)
        ids = [str(i) for i in range(len(single))]

        def rate(texts: Sequence[str]) -> float:
            return corpus_wer(score_utterances(ids, list(references), list(texts), scoring))

        wer_batched, wer_single = rate(batched), rate(single)
    return BatchCheck(name, batch_size, len(single), differing, wer_batched, wer_single)


def transcribe_checked(
    runner: Runner,
    audios: Sequence[np.ndarray],
    model: ModelDescription,
    name: str,
    batch_size: int,
    references: Sequence[str] | None = None,
    sample: int = BATCH_CHECK_UTTERANCES,
    inference: InferenceConfig = GREEDY,
    also: Sequence[DecoderSettings] = (),
    labels: Sequence[str] | None = None,
    also_on: Sequence[int] | None = None,
    pad: bool = False,
) -> tuple[Transcripts, BatchCheck | None]:
    """``transcribe`` in batches of ``batch_size`` (``also`` decoded on the clips ``also_on``, else all), then (when batching) ``batch_check`` on up to ``sample``
    utterances spread over the set: the transcripts batching changed and the WER difference it made. Chunked
    inference runs at batch 1 anyway, so it gets no check."""
    result = transcribe(runner, audios, model, name, inference, also, labels, batch_size, also_on, pad)
    if batch_size <= 1 or inference.chunks is not None:
        return result, None
    picked = check_sample(len(audios), sample)
    check = batch_check(
        runner,
        [audios[i] for i in picked],
        [result.texts[i] for i in picked],
        model,
        batch_size,
        [references[i] for i in picked] if references is not None else None,
        name,
        inference,
    )
    return result, check

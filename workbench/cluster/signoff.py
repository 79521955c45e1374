"""A sign-off's transcription on the cluster: utterance shards per candidate. Each candidate's clips are cut into
the batches a serial run makes (``plan_batches`` on the driver), whole batches are dealt into shards balanced by
audio duration (a shard of whole batches batches the same way on a worker), and the batch-1 check sample runs as
shards too; texts come back by utterance index, so the transcripts, the batch check and the paired bootstrap on
them equal the serial run's. Latency is not measured here: it stays on the driver's one device."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from workbench.backends.base import Runner
from workbench.cluster.address import ClusterAddress
from workbench.cluster.check import CheckSet
from workbench.cluster.pool import open_pool
from workbench.cluster.shards import balanced_groups, shard_weights
from workbench.cluster.worker import WorkerContext
from workbench.config import BATCH_CHECK_UTTERANCES, RAY_CHECK_CLIPS, RAY_SHARDS_PER_WORKER
from workbench.errors import WorkbenchError
from workbench.evaluate.batching import BatchPolicy, plan_batches
from workbench.evaluate.inference import DecoderSettings, InferenceConfig
from workbench.evaluate.transcribe import BatchCheck, Transcripts, check_sample, compare_batched, transcribe
from workbench.model.description import ModelDescription


@dataclass(frozen=True)
class ShardTexts:
    indices: tuple[int, ...]
    texts: list[str]
    by_decoder: dict[str, list[str]]
    batching: dict[str, Any]


@dataclass(frozen=True)
class TranscribeShard:
    """Transcribe the utterances ``indices`` (of the judged clips in the object store) with one candidate."""

    name: str
    model: Any  # object-store reference to the candidate's ONNX bytes
    audio: Any  # object-store reference to the judged clips (raw audio)
    indices: tuple[int, ...]
    batch_size: int
    description: ModelDescription
    inference: InferenceConfig
    also: tuple[DecoderSettings, ...]
    providers: tuple[str, ...]
    sample: bool = False  # the batch-1 check sample, not the batched transcription

    def run(self, context: WorkerContext) -> ShardTexts:
        runner = context.runner(self.model, self.providers, self.name)
        audio = context.blob(self.audio)
        result = transcribe(
            runner,
            [audio[i] for i in self.indices],
            self.description,
            self.name,
            self.inference,
            self.also,
            labels=[f"clip {i + 1}" for i in self.indices],
            batch_size=self.batch_size,
        )
        return ShardTexts(self.indices, result.texts, result.by_decoder, result.batching)


def _shards(groups: list[list[int]], lengths: Sequence[int], workers: int) -> list[tuple[int, ...]]:
    return [tuple(s) for s in balanced_groups(groups, lengths, RAY_SHARDS_PER_WORKER * workers)]


def spread_transcription(
    address: ClusterAddress,
    candidates: Sequence[tuple[str, Path]],
    runners: dict[str, Runner],
    audios: Sequence[np.ndarray],
    model: ModelDescription,
    batch_size: int,
    references: Sequence[str],
    inference: InferenceConfig,
    also: Sequence[DecoderSettings],
    providers: Sequence[str],
) -> dict[str, tuple[Transcripts, BatchCheck | None]]:
    """Per candidate, what ``transcribe_checked`` gives, computed on the cluster's checked workers (the check set:
    the first clips through the baseline, the first candidate). ``runners`` (the driver's, for latency) give each
    candidate's batch policy."""
    prepared = [model.prepare(a) for a in audios]
    lengths = [len(p) for p in prepared]
    batched = batch_size > 1 and inference.chunks is None
    batches: dict[str, list[list[int]]] = {}
    for name, _ in candidates:
        if not batched:
            batches[name] = [[i] for i in range(len(audios))]
            continue
        with runners[name] as runner:
            policy = BatchPolicy.for_runner(runner, model, batch_size)
        batches[name] = plan_batches(lengths, policy.batch_size, policy.max_padding)
    sample = check_sample(len(audios), BATCH_CHECK_UTTERANCES) if batched else []
    blobs = {name: Path(path).read_bytes() for name, path in candidates}
    check = CheckSet.of(blobs[candidates[0][0]], prepared[:RAY_CHECK_CLIPS], providers, candidates[0][0])
    with open_pool(address, check, gpu="CUDAExecutionProvider" in providers) as pool:
        audio_ref = pool.put(list(audios))
        refs = {
            name: pool.check_model if k == 0 else pool.put(blobs[name])
            for k, (name, _) in enumerate(candidates)
        }
        tasks: list[TranscribeShard] = []
        for name, _ in candidates:
            for shard in _shards(batches[name], lengths, len(pool.workers)):
                tasks.append(
                    TranscribeShard(
                        name,
                        refs[name],
                        audio_ref,
                        shard,
                        batch_size,
                        model,
                        inference,
                        tuple(also),
                        tuple(providers),
                    )
                )
            for shard in _shards([[i] for i in sample], lengths, len(pool.workers)):
                tasks.append(
                    TranscribeShard(
                        name, refs[name], audio_ref, shard, 1, model, inference, (), tuple(providers), True
                    )
                )
        weights = shard_weights([t.indices for t in tasks], lengths)
        results = pool.map(tasks, "transcription", weights)
    return _merged(candidates, tasks, results, len(audios), sample, model, batch_size, references)


def _merged(
    candidates: Sequence[tuple[str, Path]],
    tasks: Sequence[TranscribeShard],
    results: Sequence[ShardTexts],
    count: int,
    sample: list[int],
    model: ModelDescription,
    batch_size: int,
    references: Sequence[str],
) -> dict[str, tuple[Transcripts, BatchCheck | None]]:
    out: dict[str, tuple[Transcripts, BatchCheck | None]] = {}
    for name, _ in candidates:
        texts: list[str] = [""] * count
        single: dict[int, str] = {}
        by_decoder: dict[str, list[str]] = {}
        policies = []
        for task, result in zip(tasks, results):
            if task.name != name:
                continue
            if task.sample:
                single.update(zip(result.indices, result.texts))
                continue
            policies.append(result.batching)
            for index, text in zip(result.indices, result.texts):
                texts[index] = text
            for decoder, found in result.by_decoder.items():
                column = by_decoder.setdefault(decoder, [""] * count)
                for index, text in zip(result.indices, found):
                    column[index] = text
        if any(p != policies[0] for p in policies):
            raise WorkbenchError(f"{name}: the workers batched differently ({policies}); run without --ray")
        transcripts = Transcripts(name, texts, 0.0, policies[0] if policies else {}, by_decoder)
        check = None
        if sample:
            check = compare_batched(
                [single[i] for i in sample],
                [texts[i] for i in sample],
                model,
                batch_size,
                [references[i] for i in sample],
                name,
            )
        out[name] = (transcripts, check)
    return out

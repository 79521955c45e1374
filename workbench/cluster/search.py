"""The search's WER evaluations on the cluster: each look of a sequential evaluation (the dev utterances it buys)
is cut into the batches a serial run makes, whole batches are dealt into shards balanced by audio duration, and
each worker transcribes its shard with the plan's variant, built there from the FP32 model it fetched once (one
variant session per worker at a time). Texts come back by utterance, so every look, and the search, is the serial
one; the search's steps stay in order (each depends on the last)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from workbench.cluster.address import ClusterAddress
from workbench.cluster.compare import VariantSetup, check_set
from workbench.cluster.pool import open_pool
from workbench.cluster.shards import balanced_groups, shard_weights
from workbench.cluster.worker import WorkerContext
from workbench.compare.sensitivity import VariantRunner
from workbench.config import RAY_SHARDS_PER_WORKER
from workbench.evaluate.batching import BatchPolicy, plan_batches
from workbench.evaluate.inference import InferenceConfig
from workbench.evaluate.transcribe import transcribe
from workbench.model.description import ModelDescription
from workbench.quantize.plan import PrecisionPlan
from workbench.speech.records import Clip

Transcriber = Callable[[PrecisionPlan, Sequence[int]], list[str]]


@dataclass(frozen=True)
class PlanShard:
    """Transcribe the clips ``indices`` (in the object store) with ``plan``'s variant."""

    setup: VariantSetup
    plan: PrecisionPlan
    indices: tuple[int, ...]
    batch_size: int
    description: ModelDescription
    inference: InferenceConfig

    def run(self, context: WorkerContext) -> list[str]:
        import hashlib
        import json

        variants = self.setup.variants(context)
        key = hashlib.sha256(json.dumps(self.plan.to_json(), sort_keys=True).encode()).hexdigest()

        def make():
            runner = variants.runner(self.plan)
            runner.activate()
            return runner

        runner = context.latest("plan-runner", key, make)
        clips = context.blob(self.setup.clips)
        return transcribe(
            runner,
            [clips[i].audio for i in self.indices],
            self.description,
            self.plan.name,
            self.inference,
            batch_size=self.batch_size,
        ).texts


@contextmanager
def spread_plans(
    address: ClusterAddress,
    variants: VariantRunner,
    clips: Sequence[Clip],
    model: ModelDescription,
    batch_size: int,
    inference: InferenceConfig,
) -> Iterator[Transcriber]:
    """A transcriber for ``DevEvaluator``: (plan, clip indices) -> texts, computed on the cluster's checked
    workers."""
    lengths = [len(variants.prepare(c.audio)) for c in clips]
    batched = batch_size > 1 and inference.chunks is None
    policy = None
    if batched:
        with variants.runner(PrecisionPlan("fp32")) as runner:
            policy = BatchPolicy.for_runner(runner, model, batch_size)
    gpu = "CUDAExecutionProvider" in variants.providers
    with open_pool(address, check_set(variants, clips), gpu=gpu) as pool:
        setup = VariantSetup.of(pool, variants, clips)

        def transcribe_plan(plan: PrecisionPlan, indices: Sequence[int]) -> list[str]:
            local = [lengths[i] for i in indices]
            groups = (
                plan_batches(local, policy.batch_size, policy.max_padding)
                if policy is not None
                else [[k] for k in range(len(indices))]
            )
            shards = balanced_groups(groups, local, RAY_SHARDS_PER_WORKER * len(pool.workers))
            tasks = [
                PlanShard(setup, plan, tuple(indices[k] for k in shard), batch_size, model, inference)
                for shard in shards
            ]
            texts = [""] * len(indices)
            found_texts = pool.map(tasks, f"WER of {plan.name}", shard_weights(shards, local))
            for shard, found in zip(shards, found_texts):
                for k, text in zip(shard, found):
                    texts[k] = text
            return texts

        yield transcribe_plan

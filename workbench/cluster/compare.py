"""The sensitivity ranking's group evaluations on the cluster: the FP32 reference logits in clip shards on the
workers' FP32 sessions (those of the check set), then one task per variant (a precision plan), built on the worker
from the FP32 model it fetched once and judged there against those logits; the damages come back in plan order,
so the ranking equals the one computed without Ray with the workers' ONNX Runtime thread count (whose float
results depend on it: the reference is computed by the workers, not the driver, for that reason)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from workbench.cluster.address import ClusterAddress
from workbench.cluster.check import CheckSet
from workbench.cluster.pool import WorkerPool, open_pool
from workbench.cluster.shards import balanced, shard_weights
from workbench.cluster.worker import WorkerContext
from workbench.compare.sensitivity import Damage, Evaluate, VariantRunner, clip_logits, damage_of
from workbench.config import RAY_CHECK_CLIPS, RAY_SHARDS_PER_WORKER
from workbench.quantize.plan import PrecisionPlan
from workbench.speech.records import Clip


@dataclass(frozen=True)
class VariantSetup:
    """What every variant task shares, as object-store references (fetched once per worker)."""

    model: Any  # FP32 ONNX bytes
    clips: Any  # list[Clip]
    reference: Any  # list of FP32 logits per clip (the driver's); None where no task compares logits
    amax: Any  # dict[str, float]
    guard: dict[str, str]
    providers: tuple[str, ...]
    prepare: Callable[[np.ndarray], np.ndarray]

    def variants(self, context: WorkerContext) -> VariantRunner:
        """The worker's one ``VariantRunner`` of the FP32 model (parsed once)."""
        import onnx

        return context.cached(
            f"variants:{self.model.hex()}",
            lambda: VariantRunner(
                onnx.load_model_from_string(context.blob(self.model)),
                context.blob(self.amax),
                context.threads,
                self.providers,
                self.prepare,
                self.guard,
            ),
        )

    @classmethod
    def of(
        cls, pool: WorkerPool, variants: VariantRunner, clips: Sequence[Clip], reference: Any = None
    ) -> VariantSetup:
        """Everything shared put into the object store once (the FP32 model is the check set's)."""
        return cls(
            pool.check_model,
            pool.put(list(clips)),
            None if reference is None else pool.put(reference),
            pool.put(dict(variants.amax)),
            dict(variants.guard),
            tuple(variants.providers),
            variants.prepare,
        )


def check_set(variants: VariantRunner, clips: Sequence[Clip]) -> CheckSet:
    """The check set of a variant pool: the first clips through the FP32 model."""
    inputs = [variants.prepare(c.audio) for c in clips[:RAY_CHECK_CLIPS]]
    return CheckSet.of(variants.fp32.SerializeToString(), inputs, variants.providers, "the FP32 model")


@dataclass(frozen=True)
class ReferenceShard:
    """The FP32 logits of the clips ``indices``, on the worker's FP32 session of the check set."""

    setup: VariantSetup
    indices: tuple[int, ...]

    def run(self, context: WorkerContext) -> list[np.ndarray]:
        clips = context.blob(self.setup.clips)
        runner = context.runner(self.setup.model, self.setup.providers, "the FP32 model")
        return clip_logits(runner, [clips[i] for i in self.indices], self.setup.prepare)


def spread_reference(pool: WorkerPool, setup: VariantSetup, clips: Sequence[Clip]) -> list[np.ndarray]:
    """Every clip's FP32 logits, in clip order, computed in shards balanced by clip length."""
    lengths = [len(c.audio) for c in clips]
    shards = balanced(lengths, RAY_SHARDS_PER_WORKER * len(pool.workers))
    tasks = [ReferenceShard(setup, tuple(shard)) for shard in shards]
    found = pool.map(tasks, "FP32 reference logits", shard_weights(shards, lengths))
    reference: list[np.ndarray] = [np.empty(0)] * len(clips)
    for shard, logits in zip(shards, found):
        for index, one in zip(shard, logits):
            reference[index] = one
    return reference


@dataclass(frozen=True)
class VariantDamage:
    """Damage of one plan's variant on the clips against the FP32 reference."""

    setup: VariantSetup
    plan: PrecisionPlan

    def run(self, context: WorkerContext) -> Damage:
        clips = context.blob(self.setup.clips)
        logits = self.setup.variants(context).logits(self.plan, clips)
        return damage_of(context.blob(self.setup.reference), logits, clips)


@contextmanager
def spread_variants(
    address: ClusterAddress, variants: VariantRunner, clips: Sequence[Clip]
) -> Iterator[Evaluate]:
    """An ``evaluate`` for ``rank_groups`` that runs the variants on the cluster's checked workers."""
    gpu = "CUDAExecutionProvider" in variants.providers
    with open_pool(address, check_set(variants, clips), gpu=gpu) as pool:
        setup = VariantSetup.of(pool, variants, clips)
        setup = replace(setup, reference=pool.put(spread_reference(pool, setup, clips)))

        def evaluate(plans: list[PrecisionPlan]) -> list[Damage]:
            return pool.map([VariantDamage(setup, plan) for plan in plans], "sensitivity ranking")

        yield evaluate

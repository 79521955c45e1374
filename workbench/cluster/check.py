"""The check set every worker runs before its shards: a few clips through the reference model, whose logits must
equal the driver's within a stated tolerance; a worker that differs more (another ONNX Runtime, CPU or model
file) is refused, never averaged in."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from workbench.backends.base import Runner
from workbench.backends.onnxruntime import OnnxRuntimeRunner
from workbench.config import RAY_CHECK_ATOL, RAY_CHECK_CLIPS
from workbench.evaluate.batching import logits_of


def check_logits(runner: Runner, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Logits of each prepared input row, one at a time (no batching: nothing but the worker differs)."""
    return [np.asarray(logits_of(runner, row[None])) for row in inputs]


@dataclass(frozen=True)
class CheckSet:
    """The driver's side: the reference model's bytes, the prepared check inputs and their logits here."""

    model: bytes
    inputs: list[np.ndarray]
    reference: list[np.ndarray]
    providers: tuple[str, ...]
    label: str
    atol: float = RAY_CHECK_ATOL
    histograms: bool = False  # the job counts histograms: workers compile the kernel while they run the check

    @classmethod
    def of(
        cls,
        model: bytes,
        inputs: Sequence[np.ndarray],
        providers: Sequence[str],
        label: str,
        atol: float = RAY_CHECK_ATOL,
    ) -> CheckSet:
        """The first ``RAY_CHECK_CLIPS`` inputs and the reference logits computed on this machine."""
        rows = [np.asarray(x, dtype=np.float32) for x in list(inputs)[:RAY_CHECK_CLIPS]]
        with OnnxRuntimeRunner(model, providers=tuple(providers), name=label) as runner:
            reference = check_logits(runner, rows)
        return cls(model, rows, reference, tuple(providers), label, atol)

    def for_workers(self, model_ref: Any) -> WorkerCheck:
        return WorkerCheck(
            model_ref, self.inputs, self.reference, self.atol, self.providers, self.label, self.histograms
        )


@dataclass(frozen=True)
class WorkerCheck:
    """What travels to each worker: the reference model's object-store reference instead of its bytes."""

    model: Any
    inputs: list[np.ndarray]
    reference: list[np.ndarray]
    atol: float
    providers: tuple[str, ...]
    label: str
    histograms: bool = False


def worker_difference(check: WorkerCheck, runner: Runner) -> float:
    """Largest |logit difference| of a worker's ``runner`` of the reference model against the reference (inf
    for another shape)."""
    found = check_logits(runner, check.inputs)
    worst = 0.0
    for mine, ref in zip(found, check.reference):
        if mine.shape != ref.shape:
            return float("inf")
        if ref.size:
            worst = max(worst, float(np.max(np.abs(mine.astype(np.float64) - ref))))
    return worst

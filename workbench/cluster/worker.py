"""What runs inside each Ray worker: a context that fetches blobs from the object store once and keeps one ONNX
Runtime session per model, and the actor body (the check set, then tasks)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from workbench.backends.onnxruntime import OnnxRuntimeRunner
from workbench.calibration import kernels
from workbench.cluster.check import WorkerCheck, worker_difference

T = TypeVar("T")


class WorkerContext:
    """Per-worker caches: object-store values by reference (fetched once) and anything built from them (one
    ONNX Runtime session per model), for the life of the worker."""

    def __init__(self, threads: int | None) -> None:
        self.threads = threads
        self._cache: dict[str, Any] = {}

    def blob(self, ref: Any) -> Any:
        """The value behind an object-store reference, fetched on first use."""
        import ray

        key = f"blob:{ref.hex()}"
        if key not in self._cache:
            self._cache[key] = ray.get(ref)
        return self._cache[key]

    def cached(self, key: str, make: Callable[[], T]) -> T:
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    def latest(self, slot: str, key: str, make: Callable[[], T]) -> T:
        """One value per ``slot``: the cached one while ``key`` stays the same, else a new one (the old dropped,
        so a search's many variants hold one session at a time)."""
        held = self._cache.get(f"slot:{slot}")
        if held is None or held[0] != key:
            held = self._cache[f"slot:{slot}"] = (key, make())
        return held[1]

    def runner(self, model_ref: Any, providers: tuple[str, ...], name: str) -> OnnxRuntimeRunner:
        """The worker's one activated session of the ONNX model behind ``model_ref``."""

        def make() -> OnnxRuntimeRunner:
            runner = OnnxRuntimeRunner(
                self.blob(model_ref), providers=providers, threads=self.threads, name=name
            )
            runner.activate()
            return runner

        return self.cached(f"runner:{model_ref.hex()}:{','.join(providers)}", make)


class Task(Protocol):
    """A unit of work: everything it needs travels with it (large values as object-store references)."""

    def run(self, context: WorkerContext) -> Any: ...


@dataclass
class WorkerBody:
    """The actor: runs the check set, then tasks, in one process with one context."""

    threads: int | None = None
    context: WorkerContext = field(init=False)

    def __post_init__(self) -> None:
        self.context = WorkerContext(self.threads)

    def pid(self) -> int:
        return os.getpid()

    def check(self, check: WorkerCheck) -> float:
        if check.histograms:  # numba's import and the kernel's compile (about a second) overlap the check
            kernels.warm_up()
        return worker_difference(check, self.context.runner(check.model, check.providers, check.label))

    def run(self, task: Task) -> Any:
        return task.run(self.context)

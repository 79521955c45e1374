"""The runner interface every back-end implements, modelled on Polygraphy's runner life cycle."""

from __future__ import annotations

import abc
import time
from collections.abc import Iterable, Iterator, Mapping

import numpy as np


class Runner(abc.ABC):
    """Runs one model. Use as a context manager: ``with runner: runner.infer(feeds)``."""

    name: str = "runner"
    backend: str = "abstract"

    def __init__(self) -> None:
        self.is_active = False
        self._last_inference_time: float | None = None

    def activate(self) -> None:
        if not self.is_active:
            self.activate_impl()
            self.is_active = True

    def deactivate(self) -> None:
        if self.is_active:
            self.deactivate_impl()
            self.is_active = False

    def __enter__(self) -> Runner:
        self.activate()
        return self

    def __exit__(self, *exc: object) -> None:
        self.deactivate()

    def infer(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run once; records the wall time of the inference itself (seconds)."""
        if not self.is_active:
            raise RuntimeError(f"{self.name}: call activate() (or use 'with') before infer()")
        start = time.perf_counter()
        outputs = self.infer_impl(feeds)
        elapsed = self.device_time_of_last_call()
        self._last_inference_time = elapsed if elapsed is not None else time.perf_counter() - start
        return outputs

    def infer_each(self, feeds: Iterable[Mapping[str, np.ndarray]]) -> Iterator[dict[str, np.ndarray]]:
        """The outputs of each of ``feeds``, in their order: for throughput (transcription), not timing. This runs
        them one after another; a runner may run several at once where that gives the same outputs sooner
        (``OnnxRuntimeRunner`` on the CPU)."""
        for feed in feeds:
            yield self.infer(feed)

    def last_inference_time(self) -> float | None:
        return self._last_inference_time

    def device_time_of_last_call(self) -> float | None:
        """Back-ends that time on the device (CUDA events) override this."""
        return None

    @abc.abstractmethod
    def activate_impl(self) -> None: ...

    @abc.abstractmethod
    def infer_impl(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]: ...

    @abc.abstractmethod
    def deactivate_impl(self) -> None: ...

    def graph_inputs(self) -> list[str]:
        """Names of the inputs the model takes (after ``activate``); empty when the back-end cannot say."""
        return []

    def batch_limit(self) -> int | None:
        """The largest batch the model accepts (a TensorRT profile's max), None when unbounded."""
        return None

    def describe(self) -> dict[str, str]:
        """What produced a figure: recorded beside every latency number."""
        return {"runner": self.name, "backend": self.backend}

"""One candidate behind the dynamic batcher: load time, memory per batch, single-request latency, the sweep.

``ServingModel`` turns a batch of requests into one inference on an active runner (rows padded to the
longest, with the attention mask when the model takes one). ``prepare_candidate`` activates a fresh runner
(its load time), checks that ``max_batch`` fits the runner's profile and the memory limit (peak resident
memory of the process per batch size, at the longest request) and times a single request;
``measure_serving`` does that for every candidate, refuses a p99 target below every candidate's single-request
latency, then sweeps each candidate's offered loads.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from workbench.backends.base import Runner
from workbench.errors import WorkbenchError
from workbench.evaluate.batching import BatchPolicy, logits_of, padded_batch
from workbench.evaluate.latency import PeakRss, make_batch
from workbench.inputs.serving import ServingConfig
from workbench.serving.batcher import BatcherSettings
from workbench.serving.capacity import Sweep, sweep, sweep_rates
from workbench.serving.load import Request

SAMPLE_RATE = 16_000
SINGLE_REPEATS = 5


@dataclass(frozen=True)
class RequestSet:
    """The requests' audio, made ``input_values``: one row per clip (its own length, or ``request_s`` each)."""

    rows: list[np.ndarray]
    description: str

    @property
    def lengths(self) -> list[int]:
        return [len(r) for r in self.rows]

    @classmethod
    def of(
        cls, clips: Sequence[np.ndarray], prepare: Callable[[np.ndarray], np.ndarray], request_s: float | None
    ) -> RequestSet:
        if not clips:
            raise WorkbenchError("the serving benchmark needs at least one evaluation clip")
        if request_s is None:
            seconds = [len(c) / SAMPLE_RATE for c in clips]
            return cls(
                [prepare(c).astype(np.float32) for c in clips],
                f"{len(clips)} evaluation clips at their lengths ({min(seconds):.1f}-{max(seconds):.1f} s)",
            )
        rows = make_batch(list(clips), min(len(clips), 32), request_s, prepare)
        return cls(list(rows), f"{request_s:g} s requests (evaluation clips cropped or repeated)")


class ServingModel:
    """Runs a batch of requests on an active runner: rows padded to the longest (with the mask the policy
    feeds); the logits are computed, not decoded (decoding runs per request after the model)."""

    def __init__(self, runner: Runner, requests: RequestSet, policy: BatchPolicy) -> None:
        self.runner, self.requests, self.policy = runner, requests, policy

    def __call__(self, batch: list[Request]) -> object:
        values, mask = padded_batch([self.requests.rows[r.clip] for r in batch], self.policy.padding_value)
        return logits_of(self.runner, values, mask if self.policy.mask else None)


def _peak_mb(model: ServingModel, batch: int, clip: int) -> float:
    requests = [Request(i, 0.0, clip, model.requests.lengths[clip]) for i in range(batch)]
    with PeakRss() as peak:
        model(requests)
    return round(peak.peak_mb, 1)


def memory_by_batch(model: ServingModel, max_batch: int) -> dict[int, float]:
    """Peak resident memory of this process (MB) running batches of 1, 2, 4, ... and ``max_batch`` of the
    longest request (host memory: a GPU's own memory is not in it)."""
    sizes = sorted({2**k for k in range(max_batch.bit_length()) if 2**k <= max_batch} | {max_batch})
    longest = int(np.argmax(model.requests.lengths))
    return {b: _peak_mb(model, b, longest) for b in sizes}


def warm_batches(model: ServingModel, max_batch: int, ran: Collection[int] = ()) -> float:
    """Run every batch size from 1 to ``max_batch`` once on the longest request, before any load is timed, as a
    server's model warm-up does: a GPU backend tunes its kernels for each new input shape on first sight
    (ONNX Runtime CUDA's cuDNN algorithm search took hundreds of ms per new batch size on an H100), which
    would otherwise land in the sweep's tail latency as first-request costs. Sizes in ``ran`` already ran on
    the longest request (``memory_by_batch``). Returns the seconds spent."""
    longest = int(np.argmax(model.requests.lengths))
    began = time.perf_counter()
    for size in sorted(set(range(1, max_batch + 1)) - set(ran)):
        model([Request(i, 0.0, longest, model.requests.lengths[longest]) for i in range(size)])
    return time.perf_counter() - began


@dataclass
class CandidateServing:
    """A candidate's serving numbers: load time, single-request latency, memory per batch, and its sweep."""

    candidate: str
    load_s: float
    single_ms: float
    memory_mb: dict[int, float]
    memory_limit_mb: float | None
    sweep: Sweep | None = None
    note: str | None = None
    models: list[ServingModel] = field(default_factory=list, repr=False)
    warmup_s: float = 0.0  # every batch size run once per instance before the sweep (``warm_batches``)

    @property
    def peak_mb(self) -> float:
        return max(self.memory_mb.values())

    @property
    def largest_batch_fitting(self) -> int | None:
        limit = self.memory_limit_mb
        fitting = [b for b, mb in self.memory_mb.items() if limit is None or mb <= limit]
        return max(fitting) if fitting else None

    def to_json(self) -> dict[str, Any]:
        return {
            "candidate": self.candidate,
            "load_s": round(self.load_s, 4),
            "warmup_s": round(self.warmup_s, 3),
            "single_request_ms": round(self.single_ms, 3),
            "peak_rss_mb_by_batch": {str(b): mb for b, mb in self.memory_mb.items()},
            "peak_rss_mb": self.peak_mb,
            "memory_limit_mb": self.memory_limit_mb,
            "largest_batch_fitting": self.largest_batch_fitting,
            "sweep": self.sweep.to_json() if self.sweep is not None else None,
            "capacity_qps": self.sweep.capacity_qps if self.sweep is not None else None,
            "note": self.note,
        }


def prepare_candidate(
    name: str,
    make_runner: Callable[[], Runner],
    policy_of: Callable[[Runner], BatchPolicy],
    requests: RequestSet,
    config: ServingConfig,
) -> CandidateServing:
    """Activate ``config.instances`` fresh runners (the first one's activation is the load time), check the
    batch against the profile and the memory limit, warm every batch size on every instance, and time one
    request (median of a few)."""
    models: list[ServingModel] = []
    load_s = 0.0
    for i in range(config.instances):
        runner = make_runner()
        began = time.perf_counter()
        runner.activate()
        if i == 0:
            load_s = time.perf_counter() - began
        models.append(ServingModel(runner, requests, policy_of(runner)))
    limit = models[0].runner.batch_limit()
    if limit is not None and config.max_batch > limit:
        release(models)
        raise WorkbenchError(
            f"{name}: serving.max_batch {config.max_batch} does not fit the engine's optimisation profile "
            f"(at most {limit}); lower serving.max_batch or build the engine for a larger batch"
        )
    memory = memory_by_batch(models[0], config.max_batch)
    if config.memory_limit_mb is not None and memory[config.max_batch] > config.memory_limit_mb:
        fitting = [b for b, mb in memory.items() if mb <= config.memory_limit_mb]
        release(models)
        raise WorkbenchError(
            f"{name}: serving.max_batch {config.max_batch} does not fit serving.memory_limit_mb "
            f"{config.memory_limit_mb:g}: the process peaked at {memory[config.max_batch]:.0f} MB at that batch; "
            + (f"the largest batch that fits is {max(fitting)}" if fitting else "not even batch 1 fits")
        )
    warmup_s = sum(
        warm_batches(model, config.max_batch, memory if i == 0 else ()) for i, model in enumerate(models)
    )
    median = int(np.argsort(requests.lengths)[len(requests.lengths) // 2])
    one = [Request(0, 0.0, median, requests.lengths[median])]
    models[0](one)
    times = []
    for _ in range(SINGLE_REPEATS):
        began = time.perf_counter()
        models[0](one)
        times.append(1000.0 * (time.perf_counter() - began))
    return CandidateServing(
        name,
        load_s,
        statistics.median(times),
        memory,
        config.memory_limit_mb,
        models=models,
        warmup_s=warmup_s,
    )


def release(models: Sequence[ServingModel]) -> None:
    for model in models:
        model.runner.deactivate()


def run_sweep(
    prepared: CandidateServing, requests: RequestSet, config: ServingConfig, rates: Sequence[float]
) -> None:
    """Sweep the offered ``rates`` of ``prepared`` behind the batcher (its runners released after)."""
    batcher = BatcherSettings(
        config.max_batch,
        config.max_queue_delay_ms / 1000.0,
        config.preferred_batch,
        config.instances,
        pad=prepared.models[0].policy.max_padding > 0.0,
    )
    try:
        prepared.sweep = sweep(
            prepared.models,
            requests.lengths,
            batcher,
            rates,
            config.seconds_per_rate,
            config.p99_ms,
            config.budget_s,
            config.qps,
            config.seed,
        )
    finally:
        release(prepared.models)
        prepared.models = []


def measure_serving(
    candidates: Sequence[tuple[str, Callable[[], Runner]]],
    policy_of: Callable[[Runner], BatchPolicy],
    requests: RequestSet,
    config: ServingConfig,
    log: Callable[[str], None] = lambda _: None,
) -> dict[str, CandidateServing]:
    """Every candidate prepared (load time, memory, single request), then swept over the same offered loads
    (``serving.rates``, else multiples of the fastest candidate's batch-1 throughput). A p99 target below every
    candidate's single-request latency is refused before any sweep; a candidate slower than the target alone
    is not swept (capacity none)."""
    prepared: dict[str, CandidateServing] = {}
    try:
        for name, make_runner in candidates:
            prepared[name] = prepare_candidate(name, make_runner, policy_of, requests, config)
            log(
                f"[{name}] serving: load {prepared[name].load_s:.2f} s, one request {prepared[name].single_ms:.1f} ms"
            )
        fastest = min(prepared.values(), key=lambda c: c.single_ms)
        if fastest.single_ms > config.p99_ms:
            raise WorkbenchError(
                f"the serving target p99_ms = {config.p99_ms:g} is below a single request's latency: the fastest "
                f"candidate, {fastest.candidate}, takes {fastest.single_ms:.1f} ms for one request alone "
                f"({requests.description}); raise serving.p99_ms or shorten serving.request_s"
            )
    except BaseException:
        for c in prepared.values():
            release(c.models)
        raise
    rates = sweep_rates(fastest.single_ms, config.instances, config.rates, config.qps)
    for name, cand in prepared.items():
        if cand.single_ms > config.p99_ms:
            cand.note = (
                f"one request alone takes {cand.single_ms:.1f} ms, over the {config.p99_ms:g} ms target"
            )
            release(cand.models)
            cand.models = []
            continue
        log(f"[{name}] serving sweep (budget {config.budget_s:g} s)")
        run_sweep(cand, requests, config, rates)
    return prepared


def load_average() -> list[float] | None:
    """The 1/5/15-minute load average (None where the OS has none)."""
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return None


def serving_record(
    results: Mapping[str, CandidateServing], config: ServingConfig, backend: str, requests: RequestSet
) -> dict[str, Any]:
    """The record's ``serving`` section: settings, where it ran, the requests, the load average, per candidate."""
    return {
        "settings": config.to_json(),
        "summary": config.summary(),
        "backend": backend,
        "requests": requests.description,
        "load_average": load_average(),
        "candidates": {n: r.to_json() for n, r in results.items()},
    }

"""A dynamic batcher like Triton's: queued requests are dispatched in batches to free model instances.

The decision is a pure function of the queue and the time (``next_batch``), so it is tested on arrival
lists; ``serve`` runs it in real time: the load generator's thread enqueues requests as they arrive, one
thread per model instance takes the next batch whenever it is free and runs it.

Rule (``next_batch``), for a free instance: the batch is the oldest request and the queued requests that
may share its batch, oldest first: those of its length, or every one when batches are padded (``pad``: the
model takes an attention mask, or the deployment pads), at most ``max_batch``. It is dispatched at once when
it is full (``max_batch``) or one of the ``preferred`` sizes can be formed (the largest such), otherwise
when the oldest request has waited ``max_queue_delay_s``; until then the instance waits for more arrivals.
Requests leave the queue in arrival order among those of one length.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from workbench.serving.load import Released, Request, start_release


@dataclass(frozen=True)
class BatcherSettings:
    """Max batch, max queue delay (s), preferred batch sizes, model instances, and whether lengths may mix."""

    max_batch: int = 8
    max_queue_delay_s: float = 0.005
    preferred: tuple[int, ...] = ()
    instances: int = 1
    pad: bool = False


@dataclass(frozen=True)
class Queued:
    """A request waiting in the queue: its number, when it entered (s) and its length in samples."""

    index: int
    arrival_s: float
    samples: int


def next_batch(
    queue: Sequence[Queued], now: float, settings: BatcherSettings
) -> tuple[list[int], float | None]:
    """Positions in ``queue`` (oldest first) to dispatch now; when none, the time at which to decide again
    (None: not before another arrival). See the module docstring for the rule."""
    if not queue:
        return [], None
    oldest = queue[0]
    fits = [i for i, q in enumerate(queue) if settings.pad or q.samples == oldest.samples]
    fits = fits[: settings.max_batch]
    if len(fits) >= settings.max_batch:
        return fits, None
    formable = [p for p in settings.preferred if p <= len(fits)]
    if formable:
        return fits[: max(formable)], None
    due = oldest.arrival_s + settings.max_queue_delay_s
    if now >= due:
        return fits, None
    return [], due


@dataclass(frozen=True)
class Served:
    """One answered request: released, batch started and finished (s after the start), batch size, instance."""

    index: int
    arrival_s: float
    start_s: float
    end_s: float
    batch: int
    instance: int

    @property
    def latency_ms(self) -> float:
        return 1000.0 * (self.end_s - self.arrival_s)


@dataclass
class ServeResult:
    """Every request's outcome: answered (``served``, by completion) or still queued at the cut-off."""

    requests: int
    served: list[Served] = field(default_factory=list)
    unfinished: list[int] = field(default_factory=list)
    released: Released | None = None
    wall_s: float = 0.0


# an idle instance looks at the queue at least this often (so it notices the end of the run)
_POLL_S = 0.05


def serve(
    requests: Sequence[Request],
    computes: Sequence[Callable[[list[Request]], object]],
    settings: BatcherSettings,
    drain_s: float,
) -> ServeResult:
    """Release ``requests`` on schedule (open loop) into the batcher and run each dispatched batch with the
    ``computes`` of a free instance (one per instance). Batches are taken until every request is answered or
    ``drain_s`` after the last arrival; requests still queued then are ``unfinished``. An error in a compute
    stops the run and is raised here."""
    if len(computes) != settings.instances:
        raise ValueError(
            f"{settings.instances} instance(s) need as many compute functions, got {len(computes)}"
        )
    by_index = {r.index: r for r in requests}
    queue: list[Queued] = []
    served: list[Served] = []
    lock = threading.Condition()
    releasing = [True]
    failed: list[BaseException] = []
    start = time.perf_counter() + 0.005
    cutoff = start + (requests[-1].arrival_s if requests else 0.0) + drain_s

    def submit(req: Request, at: float) -> None:
        with lock:
            queue.append(Queued(req.index, at, req.samples))
            lock.notify()

    def take() -> list[Queued] | None:
        with lock:
            while True:
                now = time.perf_counter()
                if failed or now > cutoff or (not queue and not releasing[0]):
                    return None
                picked, due = next_batch(queue, now - start, settings)
                if picked:
                    batch = [queue[p] for p in picked]
                    for p in reversed(picked):
                        del queue[p]
                    return batch
                wait = _POLL_S if due is None else min(_POLL_S, max(0.0, start + due - now))
                lock.wait(wait)

    def work(instance: int) -> None:
        while (batch := take()) is not None:
            began = time.perf_counter()
            try:
                computes[instance]([by_index[q.index] for q in batch])
            except BaseException as exc:  # handed to the caller, which raises it
                with lock:
                    failed.append(exc)
                    lock.notify_all()
                return
            ended = time.perf_counter()
            with lock:
                served.extend(
                    Served(q.index, q.arrival_s, began - start, ended - start, len(batch), instance)
                    for q in batch
                )

    workers = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(settings.instances)]
    for worker in workers:
        worker.start()
    releaser, released = start_release(requests, submit, start)
    releaser.join()
    with lock:
        releasing[0] = False
        lock.notify_all()
    for worker in workers:
        worker.join()
    if failed:
        raise failed[0]
    done = {s.index for s in served}
    return ServeResult(
        len(requests),
        served,
        [r.index for r in requests if r.index not in done],
        released[0] if released else None,
        time.perf_counter() - start,
    )

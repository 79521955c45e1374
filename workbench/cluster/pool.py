"""A pool of Ray worker actors: checked before use, tasks handed out as workers free up, a lost worker's task
retried on another; results come back in task order, so merges do not depend on which worker ran what."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from workbench.backends.onnxruntime import available_cores
from workbench.cluster.address import ClusterAddress, connected
from workbench.cluster.check import CheckSet
from workbench.cluster.shards import heaviest_first
from workbench.cluster.worker import Task, WorkerBody
from workbench.config import RAY_START_TIMEOUT_S
from workbench.errors import WorkbenchError

logger = logging.getLogger(__name__)


@dataclass
class Worker:
    actor: Any
    pid: int
    label: str


class WorkerPool:
    """Checked workers of one job (see ``open_pool``)."""

    def __init__(self, ray: Any, workers: list[Worker], check_model: Any = None) -> None:
        self.ray = ray
        self.check_model = check_model  # the check set's model in the object store: tasks reuse it
        self.workers = workers
        self.lost: list[str] = []
        self.refused: list[str] = []

    def put(self, value: Any) -> Any:
        """Put ``value`` into the object store once; tasks carry the reference."""
        return self.ray.put(value)

    def map(self, tasks: Sequence[Task], what: str, weights: Sequence[float] | None = None) -> list[Any]:
        """Every task's result, in task order. Tasks go to whichever worker is free, heaviest ``weights`` first
        (given), else in task order. A worker lost mid-task is dropped and its task runs on another; with no
        worker left the job fails with one line (nothing has been written: results merge after)."""
        from ray.exceptions import RayActorError, RayTaskError, WorkerCrashedError

        if weights is not None and len(weights) != len(tasks):
            raise ValueError(f"{len(weights)} weights for {len(tasks)} tasks")
        results: list[Any] = [None] * len(tasks)
        pending = deque(heaviest_first(weights) if weights is not None else range(len(tasks)))
        idle = list(self.workers)
        running: dict[Any, tuple[Worker, int]] = {}
        while pending or running:
            while idle and pending:
                worker, index = idle.pop(0), pending.popleft()
                running[worker.actor.run.remote(tasks[index])] = (worker, index)
            if not running:
                raise WorkbenchError(
                    f"{what}: no Ray worker left ({len(pending)} of {len(tasks)} shards unfinished; lost: "
                    f"{', '.join(self.lost) or 'none'}); nothing was written. Check the cluster and run again"
                )
            done, _ = self.ray.wait(list(running), num_returns=1)
            for ref in done:
                worker, index = running.pop(ref)
                try:
                    results[index] = self.ray.get(ref)
                except (RayActorError, WorkerCrashedError) as exc:
                    self._lose(worker, exc)
                    pending.appendleft(index)
                    continue
                except RayTaskError as exc:
                    cause = getattr(exc, "cause", None)
                    if isinstance(cause, WorkbenchError):
                        raise WorkbenchError(f"{what} (on {worker.label}): {cause}") from None
                    raise
                idle.append(worker)
        return results

    def _lose(self, worker: Worker, exc: BaseException) -> None:
        self.workers = [w for w in self.workers if w is not worker]
        self.lost.append(worker.label)
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        logger.info(f"ray: lost {worker.label} ({reason}); its shard runs on another worker")


def _start(ray: Any, count: int, resources: dict[str, float], threads: int | None) -> list[Any]:
    actor_class = ray.remote(**resources)(WorkerBody)
    return [actor_class.remote(threads) for _ in range(count)]


def _started(ray: Any, actors: list[Any], address: ClusterAddress) -> list[Worker]:
    """The workers that come up within ``RAY_START_TIMEOUT_S`` (a cluster busy with other work may not place
    them all); the others are stopped. None at all is one error line."""
    asked = {a.pid.remote(): a for a in actors}
    ready, late = ray.wait(list(asked), num_returns=len(asked), timeout=RAY_START_TIMEOUT_S)
    for ref in late:
        ray.kill(asked[ref])
    if not ready:
        raise WorkbenchError(
            f"no Ray worker started on {address.describe()} within {RAY_START_TIMEOUT_S:g} s (is it busy with "
            "other work?); free some CPUs or use fewer workers"
        )
    if late:
        logger.info(
            f"ray: {len(late)} of {len(asked)} workers did not start in time; going on with {len(ready)}"
        )
    from ray.exceptions import RayActorError

    came = set(ready)
    workers: list[Worker] = []
    for ref in [ref for ref in asked if ref in came]:
        try:
            pid = ray.get(ref)
        except RayActorError as exc:  # it died starting (a broken install on its node): left out
            logger.info(f"ray: a worker failed to start: {str(exc).splitlines()[0] if str(exc) else exc!r}")
            continue
        workers.append(Worker(asked[ref], pid, f"worker {len(workers) + 1} (pid {pid})"))
    if not workers:
        raise WorkbenchError(f"no Ray worker started on {address.describe()}; check the workers' installs")
    return workers


def worker_count(ray: Any, address: ClusterAddress, gpu: bool) -> int:
    """One worker per CPU (per GPU for a GPU backend) of the cluster; ``local:N``: N (at most one per GPU of this
    machine for a GPU backend: a worker holds a whole GPU, and more would wait out ``RAY_START_TIMEOUT_S``)."""
    if address.local and not gpu:
        return address.local
    total = ray.cluster_resources().get("GPU" if gpu else "CPU", 0)
    if address.local and total >= 1:
        if address.local > total:
            logger.info(
                f"ray: {address.local} workers asked for, {int(total)} GPU(s) here: one worker per GPU"
            )
        return min(address.local, int(total))
    if total < 1:
        raise WorkbenchError(
            f"{address.describe()} has no {'GPU' if gpu else 'CPU'} to run workers on; "
            "add nodes or use another --backend"
        )
    return int(total)


@contextmanager
def open_pool(address: ClusterAddress, check: CheckSet, gpu: bool = False) -> Iterator[WorkerPool]:
    """Connect, start the workers (one CPU each, or one GPU each for ``gpu``; ONNX Runtime threads: one per
    worker, or the cores this process may run on (``available_cores``: its CPU affinity, at most one per physical
    core, as a run without Ray uses) shared out among ``local:N`` workers),
    run the check set on every one, refuse those whose logits differ from the reference by more than its
    tolerance, and yield the pool of the rest; the workers are stopped after the block."""
    from ray.exceptions import RayActorError, RayTaskError, WorkerCrashedError

    with connected(address) as ray:
        count = worker_count(ray, address, gpu)
        resources: dict[str, float] = {"num_gpus": 1, "num_cpus": 1} if gpu else {"num_cpus": 1}
        threads = None if gpu else max(1, available_cores() // count) if address.local else 1
        actors = _start(ray, count, resources, threads)
        model_ref = ray.put(check.model)
        check_ref = ray.put(check.for_workers(model_ref))
        try:
            workers = _started(ray, actors, address)
            pool = WorkerPool(ray, [], model_ref)
            answers = [(w, w.actor.check.remote(check_ref)) for w in workers]
            for worker, answer in answers:
                try:
                    difference = ray.get(answer)
                except (RayActorError, WorkerCrashedError) as exc:
                    pool._lose(worker, exc)
                    continue
                except RayTaskError as exc:
                    cause = getattr(exc, "cause", exc)
                    pool.refused.append(f"{worker.label}: {str(cause).splitlines()[0]}")
                    ray.kill(worker.actor)
                    continue
                if difference <= check.atol:
                    pool.workers.append(worker)
                else:
                    pool.refused.append(
                        f"{worker.label}: max |logit difference| {difference:.3g} > {check.atol:g}"
                    )
                    ray.kill(worker.actor)
            for line in pool.refused:
                logger.info(f"ray: refused {line} on the check set")
            if not pool.workers:
                raise WorkbenchError(
                    f"no Ray worker passed the check set ({len(check.inputs)} clips of {check.label}, "
                    f"tolerance {check.atol:g}): {'; '.join(pool.refused or pool.lost)}; check that the "
                    "workers run the same workbench, ONNX Runtime and model as this machine"
                )
            logger.info(
                f"ray: {len(pool.workers)} of {count} workers on {address.describe()} passed the check set "
                f"({len(check.inputs)} clips, max |logit difference| <= {check.atol:g})"
            )
            yield pool
        finally:
            for actor in actors:
                ray.kill(actor)

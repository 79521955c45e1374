"""Latency against offered load, and capacity: the highest offered load whose p99 meets the target.

``run_load`` serves one offered rate through the batcher and summarises it (``LoadPoint``: p50/p95/p99 of
every request, a request still queued at the cut-off counting as beyond any target); ``sweep`` runs rates in
ascending order within a time budget and stops once a load overwhelms the server (p99 over the target and
requests left unanswered or throughput below the offered rate) or misses the target at or beyond the gate's
load (no higher load can raise the capacity), then looks below the grid when even its lowest load misses the
target and bisects between the capacity and the first load that misses, so that every candidate's capacity is
resolved on a grid shared by candidates of different speeds.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from workbench.config import SERVING
from workbench.serving.batcher import BatcherSettings, ServeResult, serve
from workbench.serving.load import Request, check_generated, poisson_arrivals

Compute = Callable[[list[Request]], object]


@dataclass(frozen=True)
class LoadPoint:
    """One offered load: what was answered, how fast (ms; None: a request was never answered, beyond any
    target), the mean batch and how late the load generator released requests."""

    offered_qps: float
    achieved_qps: float
    requests: int
    answered: int
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    mean_batch: float
    lag_p99_ms: float
    meets_target: bool

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _pct(values: np.ndarray, q: float) -> float | None:
    # nearest rank at or above (no interpolation: an unanswered request is infinitely late, not an average)
    value = float(np.percentile(values, q, method="higher")) if values.size else math.inf
    return None if math.isinf(value) else round(value, 3)


def summarise(result: ServeResult, offered_qps: float, target_ms: float) -> LoadPoint:
    """The ``LoadPoint`` of a run at ``offered_qps``; unanswered requests count as infinitely late."""
    latencies = np.array(
        [s.latency_ms for s in result.served] + [math.inf] * len(result.unfinished), dtype=np.float64
    )
    p99 = _pct(latencies, 99)
    span = max((s.end_s for s in result.served), default=0.0)
    lag = result.released.lag_p99_ms if result.released is not None else 0.0
    return LoadPoint(
        round(offered_qps, 4),
        round(len(result.served) / span, 4) if span > 0 else 0.0,
        result.requests,
        len(result.served),
        _pct(latencies, 50),
        _pct(latencies, 95),
        p99,
        round(float(np.mean([s.batch for s in result.served])), 3) if result.served else 0.0,
        round(lag, 3),
        p99 is not None and p99 <= target_ms and result.requests > 0,
    )


def run_seconds(rate_qps: float, seconds: float) -> float:
    """How long arrivals run at ``rate_qps``: ``seconds``, or long enough to expect ``SERVING.min_requests``."""
    return max(seconds, SERVING.min_requests / rate_qps)


def run_load(
    computes: Sequence[Compute],
    lengths: Sequence[int],
    batcher: BatcherSettings,
    rate_qps: float,
    seconds: float,
    target_ms: float,
    seed: int = 0,
) -> LoadPoint:
    """Serve Poisson arrivals at ``rate_qps`` for ``seconds`` (longer when fewer than ``SERVING.min_requests``
    would be expected) and summarise them; requests unanswered two targets (at least half a second) after the
    last arrival count as beyond the target."""
    requests = poisson_arrivals(rate_qps, run_seconds(rate_qps, seconds), lengths, seed)
    drain = max(0.5, 2.0 * target_ms / 1000.0)
    point = summarise(serve(requests, computes, batcher, drain), rate_qps, target_ms)
    if point.meets_target:  # a load that seems met but was not offered on schedule is no measurement
        check_generated(point.lag_p99_ms, rate_qps)
    return point


def sweep_rates(
    single_ms: float, instances: int, given: Sequence[float] = (), qps: float | None = None
) -> list[float]:
    """The offered loads of a sweep, ascending: ``given``, else multiples (``SERVING.rate_factors``) of the
    instances' batch-1 throughput; the gate's ``qps`` always among them."""
    base = instances * 1000.0 / max(single_ms, 1e-3)
    rates = sorted(set(given or [round(f * base, 3) for f in SERVING.rate_factors]))[: SERVING.max_rates]
    return sorted(set(rates) | ({qps} if qps is not None else set()))


@dataclass
class Sweep:
    """Latency against offered load for one candidate, its capacity at the target, and why the sweep ended."""

    target_ms: float
    points: list[LoadPoint] = field(default_factory=list)
    stopped: str = "every offered load measured"

    @property
    def capacity_qps(self) -> float | None:
        """The highest offered load whose p99 met the target with every lower load meeting it too (None: the
        lowest did not): a load that passes above one that failed is noise, not capacity."""
        capacity = None
        for point in sorted(self.points, key=lambda p: p.offered_qps):
            if not point.meets_target:
                break
            capacity = point.offered_qps
        return capacity

    def at(self, qps: float) -> LoadPoint | None:
        return next((p for p in self.points if math.isclose(p.offered_qps, qps, rel_tol=1e-6)), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "target_p99_ms": self.target_ms,
            "capacity_qps": self.capacity_qps,
            "points": [p.to_json() for p in self.points],
            "stopped": self.stopped,
        }


def sweep(
    computes: Sequence[Compute],
    lengths: Sequence[int],
    batcher: BatcherSettings,
    rates: Sequence[float],
    seconds: float,
    target_ms: float,
    budget_s: float,
    qps: float | None = None,
    seed: int = 0,
    refine_steps: int = SERVING.refine_steps,
) -> Sweep:
    """Run ``rates`` in ascending order (each for ``seconds``) until the budget is spent (a load starts only
    when its arrivals fit what is left) or a load at or beyond ``qps`` misses the target; then, within
    the same budget, look below the lowest rate when even it misses the target (halving down to
    ``SERVING.descend_halvings`` halvings) and bisect between the capacity and the first load above it that
    misses (``refine_steps`` times, geometric midpoints), so that a shared grid too coarse for one candidate
    still gives it a capacity."""
    result = Sweep(target_ms)
    began = time.perf_counter()
    runs = itertools.count()

    def fits(rate: float) -> bool:
        # a load starts only when its arrivals fit the budget left (its drain may overrun it by up to 2 targets)
        if result.points and time.perf_counter() - began + run_seconds(rate, seconds) > budget_s:
            result.stopped = f"budget of {budget_s:g} s spent before {rate:g} QPS"
            return False
        return True

    def measure(rate: float) -> LoadPoint:
        point = run_load(computes, lengths, batcher, rate, seconds, target_ms, seed + next(runs))
        result.points.append(point)
        return point

    for rate in sorted(rates):
        if not fits(rate):
            return result
        point = measure(rate)
        # past a load that misses the target no higher load can raise the capacity: the budget goes to the
        # loads below it (the gate's load, when given, is still read)
        if not point.meets_target and (qps is None or rate >= qps):
            overwhelmed = point.answered < point.requests or point.achieved_qps < 0.9 * rate
            result.stopped = (
                f"overloaded at {rate:g} QPS (p99 over the target, throughput below the offered load)"
                if overwhelmed
                else f"p99 over the target at {rate:g} QPS"
            )
            break
    if result.points and not _descend(result, fits, measure):
        return result
    _bisect(result, fits, measure, refine_steps)
    return result


def _descend(result: Sweep, fits: Callable[[float], bool], measure: Callable[[float], LoadPoint]) -> bool:
    """Halve the lowest offered load until one meets the target; False (and ``stopped`` says why) when none
    down to ``SERVING.descend_halvings`` halvings does, or the budget ran out first."""
    lowest = min(result.points, key=lambda p: p.offered_qps)
    if lowest.meets_target:
        return True
    rate = lowest.offered_qps
    for _ in range(SERVING.descend_halvings):
        rate = round(rate / 2.0, 4)
        if not fits(rate):
            return False
        if measure(rate).meets_target:
            return True
    result.stopped = (
        f"p99 over the {result.target_ms:g} ms target at every load down to {rate:g} QPS: this candidate "
        "cannot answer within the target even lightly loaded (raise the target, add instances or shorten requests)"
    )
    return False


def _bisect(
    result: Sweep, fits: Callable[[float], bool], measure: Callable[[float], LoadPoint], steps: int
) -> None:
    """Narrow the gap between the capacity and the first load above it that misses, at geometric midpoints,
    while the gap is wider than ``SERVING.resolution`` of the capacity."""
    for _ in range(steps):
        capacity = result.capacity_qps
        above = [p.offered_qps for p in result.points if capacity is not None and p.offered_qps > capacity]
        if capacity is None or not above or min(above) <= capacity * (1.0 + SERVING.resolution):
            return
        rate = round(math.sqrt(capacity * min(above)), 4)
        if not fits(rate):
            return
        measure(rate)

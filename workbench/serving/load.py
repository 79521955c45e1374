"""Open-loop load: Poisson arrivals of requests (seeded), released on schedule whatever the server does.

``poisson_arrivals`` draws the schedule: exponential gaps at the offered rate, each request one of the clips
(their real lengths) picked at random, or all of one fixed length. ``release`` hands each request to the
server at its arrival time from its own thread and records how far behind schedule each release was; a load
the machine cannot generate (an offered rate beyond ``max_offered_qps``, or releases late by more than
``max_lag_ms`` or half a mean gap at the 99th percentile) is a user error rather than a latency measurement.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from workbench.config import SERVING
from workbench.errors import WorkbenchError


@dataclass(frozen=True)
class Request:
    """One request: its number, when it arrives (seconds after the start), which clip and how many samples."""

    index: int
    arrival_s: float
    clip: int
    samples: int


def check_rate(rate_qps: float, limit_qps: float = SERVING.max_offered_qps) -> float:
    if not rate_qps > 0:
        raise WorkbenchError(f"an offered load must be above 0 requests per second, not {rate_qps!r}")
    if rate_qps > limit_qps:
        raise WorkbenchError(
            f"an offered load of {rate_qps:g} QPS is more than this load generator can release on schedule "
            f"(at most {limit_qps:g} QPS from one Python thread); lower serving.qps or serving.rates"
        )
    return rate_qps


def poisson_arrivals(
    rate_qps: float, duration_s: float, lengths: Sequence[int], seed: int = 0
) -> list[Request]:
    """Requests arriving over ``duration_s`` at ``rate_qps`` on average (exponential gaps, ``seed``), each one
    of the clips whose sample counts are ``lengths`` (drawn uniformly), in arrival order."""
    check_rate(rate_qps)
    if not lengths:
        raise WorkbenchError("the serving load needs at least one clip")
    rng = np.random.default_rng(seed)
    requests: list[Request] = []
    now = float(rng.exponential(1.0 / rate_qps))
    while now < duration_s:
        clip = int(rng.integers(len(lengths)))
        requests.append(Request(len(requests), now, clip, int(lengths[clip])))
        now += float(rng.exponential(1.0 / rate_qps))
    return requests


@dataclass(frozen=True)
class Released:
    """When each request was handed over (seconds after the start, by index) and how late against schedule."""

    at_s: list[float]
    lag_ms: list[float]

    @property
    def lag_p99_ms(self) -> float:
        return float(np.percentile(self.lag_ms, 99)) if self.lag_ms else 0.0


def release(requests: Sequence[Request], submit: Callable[[Request, float], None], start: float) -> Released:
    """Hand each request to ``submit(request, released_at)`` at ``start + arrival_s`` (``time.perf_counter``
    clock), in arrival order, without waiting for any answer (open loop)."""
    at = [0.0] * len(requests)
    lag = [0.0] * len(requests)
    for req in requests:
        due = start + req.arrival_s
        wait = due - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        now = time.perf_counter()
        at[req.index], lag[req.index] = now - start, 1000.0 * max(0.0, now - due)
        submit(req, now - start)
    return Released(at, lag)


def lag_limit_ms(rate_qps: float) -> float:
    """How late releases may be (p99) at ``rate_qps``: ``SERVING.max_lag_ms`` or half a mean gap, the larger."""
    return max(SERVING.max_lag_ms, 500.0 / rate_qps)


def check_generated(lag_p99_ms: float, rate_qps: float) -> None:
    """Refuse a run whose releases fell behind schedule: its latencies would not be those of the offered load."""
    limit = lag_limit_ms(rate_qps)
    if lag_p99_ms > limit:
        raise WorkbenchError(
            f"this machine could not generate {rate_qps:g} QPS: requests were released {lag_p99_ms:.1f} ms "
            f"behind schedule at the 99th percentile (limit {limit:g} ms); lower serving.qps or serving.rates, "
            "or run on a less loaded machine"
        )


def start_release(
    requests: Sequence[Request], submit: Callable[[Request, float], None], start: float
) -> tuple[threading.Thread, list[Released]]:
    """``release`` in its own thread; the list receives its ``Released`` when the thread ends."""
    out: list[Released] = []
    thread = threading.Thread(target=lambda: out.append(release(requests, submit, start)), daemon=True)
    thread.start()
    return thread, out

"""The serving benchmark's settings (``workbench.serving``): the gate file's ``[serving]`` table, checked before anything runs.

Example (TOML)::

    [serving]
    p99_ms = 200.0          # the latency target every request's p99 must meet
    qps = 20.0              # optional: the load the service must carry (omitted: maximise QPS under p99)
    request_s = 10.0        # optional: every request this long (omitted: the evaluation clips at their lengths)
    max_batch = 8           # dynamic batcher: largest batch
    max_queue_delay_ms = 5  # how long the oldest request waits for a batch to fill
    preferred_batch = [4, 8]
    instances = 1
    memory_limit_mb = 4000  # optional: the largest batch that fits is reported; max_batch must fit
    rates = [5, 10, 20]     # optional: offered loads (default: a sweep around the batch-1 throughput)
    seconds_per_rate = 4.0
    budget_s = 60.0         # per candidate
    seed = 0
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from workbench.config import SERVING
from workbench.inputs import shape
from workbench.inputs.problem import Where

FIX = "give a [serving] table like p99_ms = 200.0, qps = 20.0, max_batch = 8, max_queue_delay_ms = 5.0"


@dataclass(frozen=True)
class ServingConfig:
    """A latency target and the batcher, load and budget the serving benchmark runs with."""

    p99_ms: float
    qps: float | None = None  # None: maximise QPS under p99_ms
    request_s: float | None = None  # None: the evaluation set's clips at their real lengths
    max_batch: int = SERVING.max_batch
    max_queue_delay_ms: float = SERVING.max_queue_delay_ms
    preferred_batch: tuple[int, ...] = ()
    instances: int = SERVING.instances
    memory_limit_mb: float | None = None
    rates: tuple[float, ...] = ()  # empty: automatic sweep
    seconds_per_rate: float = SERVING.seconds_per_rate
    budget_s: float = SERVING.budget_s
    seed: int = SERVING.seed

    def __post_init__(self) -> None:
        check_serving(self.to_json(), Where("gates [serving]", FIX))

    def to_json(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    def summary(self) -> str:
        load = f"at {self.qps:g} QPS" if self.qps is not None else "(highest QPS)"
        length = f"{self.request_s:g} s requests" if self.request_s else "evaluation clips at their lengths"
        preferred = f", preferred {list(self.preferred_batch)}" if self.preferred_batch else ""
        return (
            f"p99 <= {self.p99_ms:g} ms {load}; {length}; dynamic batcher max batch {self.max_batch}, "
            f"max queue delay {self.max_queue_delay_ms:g} ms{preferred}, {self.instances} instance(s)"
        )


def _positive_or_none(value: Any, where: Where) -> float | None:
    return None if value is None else shape.finite_number(value, where, positive=True)


def _non_negative(value: Any, where: Where) -> float:
    number = shape.finite_number(value, where)
    if number < 0:
        raise where.fail(f"must be 0 or more, not {value!r}")
    return number


def _sizes(value: Any, where: Where) -> tuple[int, ...]:
    return tuple(
        shape.integer(v, where.index(i), minimum=1) for i, v in enumerate(shape.sequence(value, where))
    )


def _rates(value: Any, where: Where) -> tuple[float, ...]:
    items = shape.sequence(value, where)
    return tuple(shape.finite_number(v, where.index(i), positive=True) for i, v in enumerate(items))


_CHECKS = {
    "p99_ms": lambda v, w: shape.finite_number(v, w, positive=True),
    "qps": _positive_or_none,
    "request_s": _positive_or_none,
    "max_batch": lambda v, w: shape.integer(v, w, minimum=1),
    "max_queue_delay_ms": lambda v, w: _non_negative(v, w),
    "preferred_batch": _sizes,
    "instances": lambda v, w: shape.integer(v, w, minimum=1),
    "memory_limit_mb": _positive_or_none,
    "rates": _rates,
    "seconds_per_rate": lambda v, w: shape.finite_number(v, w, positive=True),
    "budget_s": lambda v, w: shape.finite_number(v, w, positive=True),
    "seed": lambda v, w: shape.integer(v, w, minimum=0),
}


def check_serving(values: dict[str, Any], where: Where) -> None:
    """Every key of a ``[serving]`` table has the right type and range; preferred sizes fit the max batch."""
    for key, check in _CHECKS.items():
        if key in values:
            check(values[key], where.key(key))
    fast = [r for r in [values.get("qps"), *(values.get("rates") or ())] if r and r > SERVING.max_offered_qps]
    if fast:
        key = "qps" if values.get("qps") in fast else "rates"
        raise where.key(key).fail(
            f"an offered load of {max(fast):g} QPS is more than this load generator can release on schedule "
            f"(at most {SERVING.max_offered_qps:g} QPS from one Python thread)"
        )
    too_big = [
        p for p in values.get("preferred_batch") or () if p > values.get("max_batch", SERVING.max_batch)
    ]
    if too_big:
        raise where.key("preferred_batch").fail(
            f"preferred batch sizes {too_big} exceed max_batch {values.get('max_batch', SERVING.max_batch)}"
        )


def serving_config(table: Any, where: Where) -> ServingConfig:
    """The ``[serving]`` table as a ``ServingConfig`` (unknown keys and missing ``p99_ms`` are errors)."""
    data = shape.mapping(table, where)
    shape.only_keys(data, list(_CHECKS), where)
    if "p99_ms" not in data:
        raise where.key("p99_ms").fail("missing: the serving benchmark needs its latency target")
    check_serving(data, where)
    values = dict(data)
    for key in ("preferred_batch", "rates"):
        if key in values:
            values[key] = tuple(values[key])
    return ServingConfig(**values)

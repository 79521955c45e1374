"""Gate files (``--gates``, JSON or TOML): a table of limits, each of the right type, checked before any evaluation.

WER limits are finite numbers > 0 (percentage points); ``max_latency_ms`` is one too or absent/null;
``latency_batch`` an integer >= 1; ``latency_percentile`` one of p50, p90, p99. Unknown keys are errors
(a typo would otherwise silently leave a gate at its default). The label-free gates sit in an ``unlabelled``
table (TOML ``[unlabelled]``, JSON ``"unlabelled": {...}``): ``max_disagreement`` and ``max_wer_bound``, finite
numbers > 0 in percentage points, judged on every ``--unlabelled-set`` (``workbench.jobs.label_free``), and
``shift_margin``, a finite number >= 0 in percentage points: the shift check's margin in place of the default.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from workbench.inputs import shape
from workbench.inputs.problem import Where
from workbench.inputs.read import decode_utf8, parse_json, read_bytes

PERCENTILES = ("p50", "p90", "p99")
FIX = (
    "give limits like max_wer_delta_points = 0.3, max_condition_wer_delta_points = 1.0, max_latency_ms = 50.0, "
    'latency_batch = 1, latency_percentile = "p90"'
)

UNLABELLED_GATES = ("max_disagreement", "max_wer_bound")
UNLABELLED_SETTINGS = ("shift_margin",)  # not a gate: the shift check's margin (percentage points, may be 0)


def _unlabelled_table(value: Any, where: Where) -> dict[str, Any]:
    table = shape.mapping(value, where)
    shape.only_keys(table, (*UNLABELLED_GATES, *UNLABELLED_SETTINGS), where)
    for key in UNLABELLED_GATES:
        if key in table:
            shape.finite_number(table[key], where.key(key), positive=True)
    if "shift_margin" in table:
        _margin_points(table["shift_margin"], where.key("shift_margin"))
    return table


def _margin_points(v: Any, w: Where) -> Any:
    if v is not None and shape.finite_number(v, w) < 0:
        raise w.fail(f"must be a finite number >= 0 (percentage points), found {v}")
    return v


def _optional_points(v: Any, w: Where) -> Any:
    return None if v is None else shape.finite_number(v, w, positive=True)


_CHECKS: dict[str, Callable[[Any, Where], Any]] = {
    "unlabelled": _unlabelled_table,
    "unlabelled_max_disagreement": _optional_points,
    "unlabelled_max_wer_bound": _optional_points,
    "unlabelled_shift_margin": _margin_points,
    "max_wer_delta_points": lambda v, w: shape.finite_number(v, w, positive=True),
    "max_condition_wer_delta_points": lambda v, w: shape.finite_number(v, w, positive=True),
    "max_latency_ms": _optional_points,
    "latency_batch": lambda v, w: shape.integer(v, w, minimum=1),
    "latency_percentile": lambda v, w: shape.choice(v, PERCENTILES, w),
}


def check_gate_values(values: dict[str, Any], where: Where) -> None:
    """Every known gate in ``values`` has the right type and range (raises ``BadInput`` naming the key)."""
    for key, check in _CHECKS.items():
        if key in values:
            check(values[key], where.key(key))


def read_gate_file(path: Path, known: Collection[str]) -> dict[str, Any]:
    """The gate file's table, every key known and every value checked; ``.toml`` is TOML, anything else JSON."""
    where = Where(f"gate file {path}", FIX)
    text = decode_utf8(read_bytes(path, where), where)
    if Path(path).suffix.lower() == ".toml":
        import tomllib

        try:
            data: Any = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise where.fail(f"not valid TOML ({exc})") from exc
    else:
        data = parse_json(text, where)
    table = shape.mapping(data, where)
    shape.only_keys(table, known, where)
    check_gate_values(table, where)
    return table

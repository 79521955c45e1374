"""Parsers for values a person types (CLI options, dashboard fields); bad input is a user error naming the field."""

from __future__ import annotations

from workbench.errors import WorkbenchError


def parse_positive_ints(value: str, flag: str) -> tuple[int, ...]:
    """``"1,8,32"`` -> ``(1, 8, 32)``; anything else is a user error naming ``flag``."""
    try:
        sizes = tuple(int(v) for v in value.split(",") if v.strip())
    except ValueError as exc:
        raise WorkbenchError(f"{flag} takes integers like 1,8,32, got {value!r}") from exc
    if not sizes or min(sizes) < 1:
        raise WorkbenchError(f"{flag} needs positive integers, got {value!r}")
    return sizes

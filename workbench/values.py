"""Parsers for values a person types (CLI options, dashboard fields); bad input is a user error naming the field."""

from __future__ import annotations

from collections.abc import Callable

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


def whole_number(flag: str, minimum: int) -> Callable[[str], int]:
    """An argparse ``type``: the text as an integer of at least ``minimum``; anything else is a user error naming
    ``flag`` (raised while the arguments are parsed, before any work)."""

    def parse(value: str) -> int:
        try:
            number = int(value)
        except ValueError as exc:
            raise WorkbenchError(f"{flag} takes a whole number of at least {minimum}, got {value!r}") from exc
        if number < minimum:
            raise WorkbenchError(f"{flag} must be at least {minimum}, got {number}")
        return number

    return parse

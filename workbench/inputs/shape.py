"""Typed checks on parsed data: each returns the value with its type narrowed or raises ``BadInput`` at ``where``.

Numbers are never booleans (JSON ``true`` is not 1) and never NaN or infinite; strings are never empty
unless asked for.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from typing import Any

from workbench.inputs.problem import Where


def describe(value: Any) -> str:
    """``'fast' (a string)`` / ``nan (a number)``: what was found, for error messages."""
    kinds = {
        bool: "true/false",
        str: "a string",
        int: "an integer",
        float: "a number",
        list: "a list",
        dict: "an object",
        type(None): "null",
    }
    shown = (
        repr(value)
        if not isinstance(value, (list, dict))
        else ("[...]" if isinstance(value, list) else "{...}")
    )
    return f"{shown[:60]} ({kinds.get(type(value), type(value).__name__)})"


def mapping(value: Any, where: Where) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise where.fail(f"must be an object/table, found {describe(value)}")
    return value


def sequence(value: Any, where: Where) -> list[Any]:
    if not isinstance(value, list):
        raise where.fail(f"must be a list, found {describe(value)}")
    return value


def only_keys(obj: Mapping[str, Any], known: Collection[str], where: Where) -> None:
    unknown = sorted(set(obj) - set(known))
    if unknown:
        raise where.fail(f"unknown keys {unknown}; known keys are {sorted(known)}")


def string(value: Any, where: Where, empty: bool = False) -> str:
    if not isinstance(value, str) or (not empty and not value.strip()):
        raise where.fail(f"must be a {'' if empty else 'non-empty '}string, found {describe(value)}")
    return value


def optional_string(value: Any, where: Where) -> str | None:
    return None if value is None else string(value, where)


def finite_number(value: Any, where: Where, positive: bool = False) -> float:
    """An int or float (not a bool), finite, and > 0 when ``positive``."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or (positive and value <= 0):
        raise where.fail(f"must be a finite number{' > 0' if positive else ''}, found {describe(value)}")
    return float(value)


def integer(value: Any, where: Where, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or (minimum is not None and value < minimum):
        need = f"an integer >= {minimum}" if minimum is not None else "an integer"
        raise where.fail(f"must be {need}, found {describe(value)}")
    return value


def choice(value: Any, options: Collection[str], where: Where) -> str:
    if not isinstance(value, str) or value not in options:
        raise where.fail(f"must be one of {', '.join(options)}, found {describe(value)}")
    return value


def hex_digest(value: Any, where: Where) -> str:
    """A SHA-256 hex digest (64 lowercase hex digits)."""
    if not isinstance(value, str) or len(value) != 64 or any(c not in "0123456789abcdef" for c in value):
        raise where.fail(f"must be a SHA-256 hex digest, found {describe(value)}")
    return value

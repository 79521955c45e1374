"""Calibration cache files (legacy TensorRT text) and their JSON provenance sidecars.

Text: a ``TRT-<version>-<algorithm>`` first line, then ``name: xxxxxxxx`` lines (8 hex digits, each
tensor once). Sidecar: an object with ``keys`` (an object) and ``content_hash`` (SHA-256 hex). A damaged
cache is never used: ``calibrate`` recalibrates over it, ``cache list`` marks it UNUSABLE and
``cache prune`` offers to delete it.
"""

from __future__ import annotations

from typing import Any

from workbench.inputs import shape
from workbench.inputs.problem import Where

HEX = frozenset("0123456789abcdefABCDEF")
FIX = "run python -m workbench calibrate again (it rewrites a damaged cache) or delete it with cache prune --yes"


def cache_lines(text: str, where: Where) -> tuple[str, dict[str, str]]:
    """(header, name -> 8 hex digits) of a cache's text."""
    lines = [(n, ln) for n, ln in enumerate(text.splitlines(), 1) if ln.strip()]
    if not lines or not lines[0][1].startswith("TRT-"):
        raise where.line(lines[0][0] if lines else 1).fail(
            "is not a TensorRT calibration cache (first line must start with 'TRT-')"
        )
    values: dict[str, str] = {}
    for number, line in lines[1:]:
        name, sep, value = line.rpartition(": ")
        value = value.strip()
        if not sep or not name or len(value) != 8 or not set(value) <= HEX:
            raise where.line(number).fail(f"is not 'name: 8 hex digits': {line[:80]!r}")
        if name in values:
            raise where.line(number).fail(f"names tensor {name!r} a second time")
        values[name] = value
    return lines[0][1], values


def check_sidecar(meta: Any, where: Where) -> dict[str, Any]:
    """The sidecar object with ``keys`` an object and ``content_hash`` a SHA-256 digest."""
    obj = shape.mapping(meta, where)
    shape.mapping(obj.get("keys"), where.key("keys"))
    shape.hex_digest(obj.get("content_hash"), where.key("content_hash"))
    return obj

"""A Ray run's record against the serial run's: equal but for its timing fields (the record's creation time and
the hash over it, seconds spent), at any depth. The tests and ``benchmarks/ray_scaling.py`` compare with it."""

from __future__ import annotations

from typing import Any

TIMING_FIELDS = frozenset({"created", "record_sha256", "seconds", "mean_ms_per_utterance"})


def without_timing(record: Any, fields: frozenset[str] = TIMING_FIELDS) -> Any:
    """``record`` with ``fields`` (default: the timing fields) left out of every mapping, at any depth."""
    if isinstance(record, dict):
        return {k: without_timing(v, fields) for k, v in record.items() if k not in fields}
    if isinstance(record, list):
        return [without_timing(v, fields) for v in record]
    return record

"""A sign-off record's serving section as tables: latency against offered load per candidate, and the summary
(load time, single request, peak memory, largest batch fitting, capacity)."""

from __future__ import annotations

from typing import Any

import pandas as pd

LOAD_COLUMNS = [
    "candidate",
    "offered QPS",
    "achieved QPS",
    "answered",
    "requests",
    "p50 ms",
    "p95 ms",
    "p99 ms",
]


def load_frame(record: dict[str, Any]) -> pd.DataFrame:
    """One row per (candidate, offered load); a p99 of None (requests left unanswered) stays empty."""
    rows = []
    for name, cand in ((record.get("serving") or {}).get("candidates") or {}).items():
        for p in (cand.get("sweep") or {}).get("points", []):
            rows.append(
                {
                    "candidate": name,
                    "offered QPS": p["offered_qps"],
                    "achieved QPS": p["achieved_qps"],
                    "answered": p["answered"],
                    "requests": p["requests"],
                    "p50 ms": p["p50_ms"],
                    "p95 ms": p["p95_ms"],
                    "p99 ms": p["p99_ms"],
                    "meets target": bool(p["meets_target"]),
                }
            )
    return pd.DataFrame(rows, columns=[*LOAD_COLUMNS, "meets target"])


def summary_frame(record: dict[str, Any]) -> pd.DataFrame:
    """One row per candidate: load time, single-request latency, peak memory, largest batch fitting, capacity."""
    rows = [
        {
            "candidate": name,
            "capacity QPS": cand.get("capacity_qps"),
            "one request ms": cand["single_request_ms"],
            "load s": cand["load_s"],
            "peak RSS MB": cand["peak_rss_mb"],
            "largest batch fitting": cand["largest_batch_fitting"],
            "sweep": (cand.get("sweep") or {}).get("stopped") or cand.get("note") or "",
        }
        for name, cand in ((record.get("serving") or {}).get("candidates") or {}).items()
    ]
    return pd.DataFrame(rows)

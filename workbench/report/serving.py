"""The report's serving section: per candidate load time, memory, capacity, and latency against offered load.

Reads the record's ``serving`` section (written by ``workbench.serving.measure.serving_record``); a record
without one gets no serving tables.
"""

from __future__ import annotations

from typing import Any

Table = tuple[str, list[str], list[list[str]]]


def _ms(value: float | None) -> str:
    return "unanswered" if value is None else f"{value:.1f}"


def serving_tables(record: dict[str, Any]) -> list[Table]:
    """A summary table (one row per candidate) and the latency-against-load table."""
    serving = record.get("serving")
    if not serving:
        return []
    settings = serving["settings"]
    load = serving.get("load_average")
    title = f"Serving on {serving['backend']}: {serving['summary']}; {serving['requests']}" + (
        f"; load average {', '.join(f'{v:g}' for v in load)}" if load else ""
    )
    summary = []
    curves = []
    for name, cand in serving["candidates"].items():
        capacity = cand.get("capacity_qps")
        summary.append(
            [
                name,
                f"{cand['load_s']:.2f}",
                f"{cand['single_request_ms']:.1f}",
                f"{cand['peak_rss_mb']:.0f}",
                str(cand["largest_batch_fitting"]) if cand["largest_batch_fitting"] is not None else "none",
                f"{capacity:g}" if capacity is not None else "none",
                (cand["sweep"] or {}).get("stopped") or cand.get("note") or "",
            ]
        )
        for p in (cand["sweep"] or {}).get("points", []):
            curves.append(
                [
                    name,
                    f"{p['offered_qps']:g}",
                    f"{p['achieved_qps']:.2f}",
                    f"{p['answered']}/{p['requests']}",
                    _ms(p["p50_ms"]),
                    _ms(p["p95_ms"]),
                    _ms(p["p99_ms"]),
                    f"{p['mean_batch']:.2f}",
                    "ok" if p["meets_target"] else f"FAIL > {settings['p99_ms']:g} ms",
                ]
            )
    memory = "peak RSS MB" + (
        f" (limit {settings['memory_limit_mb']:g})" if settings.get("memory_limit_mb") else ""
    )
    return [
        (
            title,
            [
                "candidate",
                "load s",
                "one request ms",
                memory,
                "largest batch fitting",
                "capacity QPS",
                "sweep",
            ],
            summary,
        ),
        (
            "Serving: latency against offered load",
            [
                "candidate",
                "offered QPS",
                "achieved QPS",
                "answered",
                "p50 ms",
                "p95 ms",
                "p99 ms",
                "mean batch",
                "p99",
            ],
            curves,
        ),
    ]

"""Report figures drawn with matplotlib (Agg) and returned as base64 PNG strings for embedding.

matplotlib is imported on the first figure, not with the module: verbs that draw nothing import the report package,
and matplotlib would cost a fraction of a second of their start."""

from __future__ import annotations

import base64
import io
from typing import Any


def _subplots(**kwargs: Any) -> tuple[Any, Any]:
    """``plt.subplots`` on the Agg backend (matplotlib imported here, once)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(**kwargs)


def _close(fig: Any) -> None:
    import matplotlib.pyplot as plt

    plt.close(fig)


def _png(fig) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    _close(fig)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _unit(record: dict[str, Any]) -> str:
    """``WER`` or ``CER`` (the record's error unit)."""
    return str(record.get("accuracy", {}).get("unit", "wer")).upper()


def pareto_front(points: list[tuple[str, float, float]]) -> list[str]:
    """Names not dominated in (latency, WER), both lower-is-better, ordered by latency."""
    front, best = [], float("inf")
    for name, _lat, wer in sorted(points, key=lambda p: (p[1], p[2])):
        if wer < best:
            front.append(name)
            best = wer
    return front


def speed_points(record: dict[str, Any]) -> list[tuple[str, float, float]]:
    """(candidate, mean p50 ms at batch 1 over buckets, overall WER %) for candidates with both."""
    out = []
    for name in record["candidates"]:
        lat = record["latency"].get(name)
        if not lat or not lat["points"]:
            continue
        batch = record["gates"].get("latency_batch", 1)
        p50 = [p["p50_ms"] for p in lat["points"] if p["batch"] == batch] or [
            p["p50_ms"] for p in lat["points"]
        ]
        wer = record["accuracy"]["candidates"][name]["overall"]["wer"]["estimate"] * 100
        out.append((name, sum(p50) / len(p50), wer))
    return out


def wer_vs_latency(record: dict[str, Any]) -> str | None:
    points = speed_points(record)
    if not points:
        return None
    passed = {v["candidate"]: v["passed"] for v in record["verdicts"]}
    front = pareto_front(points)
    fig, ax = _subplots(figsize=(6.4, 4.2))
    for name, lat, wer in points:
        ci = record["accuracy"]["candidates"][name]["overall"]["wer"]
        err = [[wer - ci["low"] * 100], [ci["high"] * 100 - wer]]
        ax.errorbar(
            [lat],
            [wer],
            yerr=err,
            fmt="o",
            capsize=4,
            color="tab:green" if passed.get(name) else "tab:red",
            markersize=8,
        )
        ax.annotate(name, (lat, wer), textcoords="offset points", xytext=(6, 6))
    fx = [p[1] for p in points if p[0] in front]
    fy = [p[2] for p in points if p[0] in front]
    order = sorted(range(len(fx)), key=lambda i: fx[i])
    ax.step(
        [fx[i] for i in order],
        [fy[i] for i in order],
        where="post",
        color="tab:blue",
        alpha=0.6,
        label="Pareto front",
    )
    ax.set_xlabel(f"latency p50, batch {record['gates'].get('latency_batch', 1)} (ms, mean over buckets)")
    ax.set_ylabel(f"{_unit(record)} (%) with 95% CI")
    ax.set_title(f"{_unit(record)} vs latency (green PASS, red FAIL)")
    ax.grid(alpha=0.3)
    ax.legend(loc="best")
    return _png(fig)


def condition_bars(record: dict[str, Any]) -> str | None:
    cands = record["candidates"]
    conditions = sorted(
        {c for n in cands for c in record["accuracy"]["candidates"][n]["groups"].get("condition", {})}
    )
    if not conditions:
        return None
    fig, ax = _subplots(figsize=(6.8, 4.0))
    width = 0.8 / max(len(cands), 1)
    for k, name in enumerate(cands):
        groups = record["accuracy"]["candidates"][name]["groups"]["condition"]
        xs, ys, lo, hi = [], [], [], []
        for i, cond in enumerate(conditions):
            if cond not in groups:
                continue
            w = groups[cond]["wer"]
            xs.append(i + (k - (len(cands) - 1) / 2) * width)
            ys.append(w["estimate"] * 100)
            lo.append(max(w["estimate"] - w["low"], 0) * 100)
            hi.append(max(w["high"] - w["estimate"], 0) * 100)
        ax.bar(xs, ys, width=width, yerr=[lo, hi], capsize=3, label=name)
    ax.set_xticks(range(len(conditions)), conditions)
    ax.set_ylabel(f"{_unit(record)} (%) with 95% CI")
    ax.set_title(f"{_unit(record)} per condition")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return _png(fig)


def sensitivity_layers(sensitivity: Any) -> list[tuple[str, float]]:
    """Accepts {"layers": [{"name", "score"}...]}, [{"name", "score"}...] or {name: score}."""
    if isinstance(sensitivity, dict) and "layers" in sensitivity:
        sensitivity = sensitivity["layers"]
    if isinstance(sensitivity, dict):
        return [(str(k), float(v)) for k, v in sensitivity.items() if isinstance(v, (int, float))]
    out = []
    for item in sensitivity or []:
        if isinstance(item, dict) and "name" in item:
            value = next((item[k] for k in ("score", "sensitivity", "error", "value") if k in item), None)
            if isinstance(value, (int, float)):
                out.append((str(item["name"]), float(value)))
    return out


def sensitivity_bars(sensitivity: Any, top: int = 25) -> str | None:
    layers = sorted(sensitivity_layers(sensitivity), key=lambda p: -p[1])[:top]
    if not layers:
        return None
    fig, ax = _subplots(figsize=(6.8, 0.28 * len(layers) + 1.2))
    ax.barh([n[-48:] for n, _ in layers][::-1], [v for _, v in layers][::-1], color="tab:orange")
    ax.set_xlabel("sensitivity (INT8 vs FP32, higher = more harmful)")
    ax.set_title(f"Per-layer sensitivity (top {len(layers)})")
    ax.tick_params(axis="y", labelsize=7)
    return _png(fig)


def serving_curves(record: dict[str, Any]) -> str | None:
    """p99 (solid) and p50 (dashed) latency against offered load per candidate, the target as a line; a load
    with unanswered requests is drawn at the top edge."""
    serving = record.get("serving")
    if not serving:
        return None
    target = serving["settings"]["p99_ms"]
    fig, ax = _subplots(figsize=(6.4, 4.2))
    drawn = False
    ceiling = 3.0 * target
    for name, cand in serving["candidates"].items():
        points = sorted((cand.get("sweep") or {}).get("points", []), key=lambda p: p["offered_qps"])
        if not points:
            continue
        drawn = True
        x = [p["offered_qps"] for p in points]
        p99 = [min(p["p99_ms"], ceiling) if p["p99_ms"] is not None else ceiling for p in points]
        p50 = [min(p["p50_ms"], ceiling) if p["p50_ms"] is not None else ceiling for p in points]
        (line,) = ax.plot(x, p99, marker="o", label=f"{name} p99")
        ax.plot(x, p50, linestyle="--", color=line.get_color(), alpha=0.6, label=f"{name} p50")
    if not drawn:
        _close(fig)
        return None
    ax.axhline(target, color="tab:red", linestyle=":", label=f"p99 target {target:g} ms")
    ax.set_ylim(0, ceiling * 1.05)
    ax.set_xlabel(f"offered load (requests per second, Poisson) on {serving['backend']}")
    ax.set_ylabel("latency (ms); top edge: beyond 3x target or unanswered")
    ax.set_title("Serving: latency against offered load")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    return _png(fig)

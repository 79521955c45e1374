"""The inference benchmark's output: result rows, the printed table and the speed-ups against FP32."""

from __future__ import annotations

import numpy as np


def rows_of(results: dict[tuple[str, str], dict]) -> list[dict]:
    rows = []
    for (model, variant), res in results.items():
        if "error" in res:
            rows.append({"model": model, "variant": variant, "error": res["error"]})
            continue
        device = {(d["batch"], d["bucket"]): d for d in res.get("device_resident", [])}
        for p in res["points"]:
            base = results.get((model, "fp32"), {})
            ref = next(
                (
                    q
                    for q in base.get("points", [])
                    if q["batch"] == p["batch"] and q["bucket"] == p["bucket"]
                ),
                None,
            )
            row = {
                "model": model,
                "variant": variant,
                "clip_s": p["clip_seconds"],
                "batch": p["batch"],
                "p50_ms": p["p50_ms"],
                "p99_ms": p["p99_ms"],
                "clips_per_s": p["clips_per_second"],
                "peak_rss_mb": p["peak_rss_mb"],
                "repeats": p["repeats"],
                "x_fp32": p["p50_ms"] / ref["p50_ms"] if ref else None,
            }
            if (p["batch"], p["bucket"]) in device:
                row.update(
                    {k: v for k, v in device[(p["batch"], p["bucket"])].items() if k.startswith("device")}
                )
                row["gpu_memory_mb"] = res.get("gpu_memory_mb")
            rows.append(row)
    return rows


def format_table(rows: list[dict]) -> str:
    gpu = any("device_p50_ms" in r for r in rows)
    head = (
        f"{'model':8} {'variant':10} {'clip':>5} {'batch':>5} {'p50 ms':>9} {'p99 ms':>9} {'clips/s':>8} "
        f"{'x fp32':>7} {'peak RSS MB':>11} {'reps':>4}"
    )
    if gpu:
        head += f" {'dev p50 ms':>10} {'dev p99 ms':>10} {'GPU MB':>7}"
    lines = [head, "-" * len(head)]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['model']:8} {r['variant']:10} error: {r['error']}")
            continue
        ratio = f"{r['x_fp32']:.2f}" if r["x_fp32"] is not None else "-"
        line = (
            f"{r['model']:8} {r['variant']:10} {r['clip_s']:>4g}s {r['batch']:>5} {r['p50_ms']:>9.1f} "
            f"{r['p99_ms']:>9.1f} {r['clips_per_s']:>8.2f} {ratio:>7} {r['peak_rss_mb']:>11.0f} {r['repeats']:>4}"
        )
        if gpu:
            mem = r.get("gpu_memory_mb")
            line += (
                f" {r.get('device_p50_ms', float('nan')):>10.2f} {r.get('device_p99_ms', float('nan')):>10.2f} "
                f"{(f'{mem:.0f}' if mem else '-'):>7}"
            )
        lines.append(line)
    return "\n".join(lines)


def speedups(rows: list[dict], variant: str = "int8-cpu") -> dict:
    """p50 ratio ``variant`` / fp32 per model and point, and its geometric mean per model."""
    out: dict = {}
    for model in sorted({r["model"] for r in rows}):
        ratios = {
            f"{r['clip_s']:g}s b{r['batch']}": r["x_fp32"]
            for r in rows
            if r["model"] == model and r["variant"] == variant and r.get("x_fp32")
        }
        if ratios:
            out[model] = {"points": ratios, "geomean": float(np.exp(np.mean(np.log(list(ratios.values())))))}
    return out

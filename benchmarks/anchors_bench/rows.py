"""A sign-off record and the tools' calibration runs -> the anchors table: one row per tool setting with WER
overall and per condition (95 % interval), the paired delta vs FP32, the verdict, latency (mean p50 at the gate's
batch size over the duration buckets, ONNX Runtime CPU), calibration wall time and peak RSS; a run that failed or
was skipped keeps its row with the reason. Pure functions of dicts: tested without running anything."""

from __future__ import annotations

from typing import Any

TOOLS = {
    "fp32": "baseline",
    "ort": "ONNX Runtime",
    "modelopt": "ModelOpt",
    "workbench": "workbench",
    "search": "workbench",
}


def points(value: dict[str, float] | None) -> dict[str, float] | None:
    """A fraction interval ({estimate, low, high}) in percent / points, rounded."""
    return None if value is None else {k: round(100 * value[k], 3) for k in ("estimate", "low", "high")}


def skipped_run(name: str, kind: str, setting: str, reason: str) -> dict[str, Any]:
    """The run record of a tool setting that could not run at all (e.g. ModelOpt did not install)."""
    return {"job": name, "kind": kind, "setting": setting, "skipped": reason}


def mean_p50(record: dict[str, Any], name: str) -> float | None:
    """Mean p50 ms at the gate's batch size over the duration buckets (what the sign-off calls fastest)."""
    batch = int(record["gates"].get("latency_batch", 1))
    pts = [p for p in (record.get("latency", {}).get(name) or {}).get("points", []) if p["batch"] == batch]
    return round(sum(p["p50_ms"] for p in pts) / len(pts), 2) if pts else None


def run_row(run: dict[str, Any]) -> dict[str, Any]:
    """The columns every table row has, whatever judged the run: the candidate, its tool and setting, the
    calibration's wall time and peak RSS."""
    return {
        "candidate": run["job"],
        "tool": TOOLS.get(run.get("kind", ""), run.get("kind")),
        "setting": run.get("setting", ""),
        "calibration_wall_s": run.get("wall_s"),
        "peak_rss_mb": run.get("peak_rss_mb"),
    }


def anchor_rows(record: dict[str, Any] | None, runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per run (in run order), joined to its candidate in the sign-off record when it was judged."""
    verdicts = {v["candidate"]: v for v in (record or {}).get("verdicts", [])}
    rows = []
    for run in runs:
        name = run["job"]
        row = run_row(run)
        judged = record is not None and name in record["accuracy"]["candidates"]
        if not judged:
            row["status"] = (
                "skipped: " + run["skipped"]
                if "skipped" in run
                else "failed: " + str(run.get("error") or "not judged (no ONNX written)")
            )
            rows.append(row)
            continue
        acc = record["accuracy"]["candidates"][name]
        row.update(
            status="judged",
            verdict="PASS" if verdicts[name]["passed"] else "FAIL",
            reason=verdicts[name]["summary"],
            wer=points(acc["overall"]["wer"]),
            delta=points(acc["overall"].get("delta")),
            per_condition={
                c: {"wer": points(g["wer"]), "delta": points(g.get("delta"))}
                for c, g in sorted(acc["groups"].get("condition", {}).items())
            },
            latency_ms=mean_p50(record, name),
        )
        for key in ("found", "versions"):
            if key in run:
                row[key] = run[key]
        rows.append(row)
    return rows


def _iv(value: dict[str, float] | None, sign: bool = False) -> str:
    if value is None:
        return "-"
    f = "+.2f" if sign else ".2f"
    return f"{value['estimate']:{f}} [{value['low']:{f}}, {value['high']:{f}}]"


def table_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The anchors table in Markdown: WER and delta with 95 % intervals, per-condition delta, latency,
    verdict, calibration wall and peak RSS; failed or skipped rows carry their reason."""
    conds = sorted({c for r in rows for c in r.get("per_condition", {})})
    head = (
        ["candidate", "tool", "WER % [95% CI]", "delta pts [95% CI]"]
        + [f"delta {c}" for c in conds]
        + ["ms (p50, b1)", "verdict", "calib s", "peak RSS MB"]
    )
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in rows:
        num = lambda v, f: "-" if v is None else format(v, f)  # noqa: E731
        cost = [num(r.get("calibration_wall_s"), ".1f"), num(r.get("peak_rss_mb"), ".0f")]
        if r["status"] != "judged":
            cells = [r["candidate"], r["tool"], r["status"][:160]] + [""] * (1 + len(conds) + 2) + cost
        else:
            cells = (
                [r["candidate"], r["tool"], _iv(r["wer"]), _iv(r["delta"], True)]
                + [
                    num((r["per_condition"].get(c, {}).get("delta") or {}).get("estimate"), "+.2f")
                    for c in conds
                ]
                + [num(r["latency_ms"], ".1f"), r["verdict"]]
                + cost
            )
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return lines

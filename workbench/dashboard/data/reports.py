"""Sign-off records under ``reports/<name>/report.json``: list, load (digest checked), input check,
and the trade-off table (WER overall and per condition vs latency, PASS/FAIL, Pareto front)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from workbench.dashboard.paths import ArtifactRoots, OutsideArtifacts, resolve
from workbench.errors import WorkbenchError
from workbench.report.plots import pareto_front
from workbench.report.record import load_record, verify_inputs
from workbench.report.render import HTML_NAME, MARKDOWN_NAME, RECORD_NAME

OVERALL = "overall"
SERVED_AREAS = ("engines", "models", "calib_sets", "reports")


def report_names(roots: ArtifactRoots) -> list[str]:
    """Folders under reports/ holding a report.json, newest first."""
    if not roots.reports.is_dir():
        return []
    found = [
        p
        for p in roots.reports.iterdir()
        if p.is_dir() and not p.name.startswith((".", "_")) and (p / RECORD_NAME).is_file()
    ]
    return [p.name for p in sorted(found, key=lambda p: (p / RECORD_NAME).stat().st_mtime, reverse=True)]


@dataclass
class ReportView:
    """A loaded, digest-checked record and the files beside it."""

    name: str
    folder: Path
    record: dict[str, Any]

    def file(self, name: str) -> Path | None:
        path = self.folder / name
        return path if path.is_file() else None

    @property
    def html(self) -> Path | None:
        return self.file(HTML_NAME)

    @property
    def markdown(self) -> Path | None:
        return self.file(MARKDOWN_NAME)

    @property
    def json(self) -> Path:
        return self.folder / RECORD_NAME


def load_report(name: str, roots: ArtifactRoots) -> ReportView:
    folder = resolve(name, "reports", roots)
    return ReportView(folder.name, folder, load_record(resolve(folder / RECORD_NAME, "reports", roots)))


def input_problems(view: ReportView) -> list[str]:
    """Input artifacts that are missing or changed since the record was written (hashes recomputed)."""
    return verify_inputs(view.record)


@dataclass(frozen=True)
class Download:
    """A file the record names, and whether the dashboard may serve it."""

    role: str
    path: str
    allowed: Path | None
    reason: str


def downloads(view: ReportView, roots: ArtifactRoots) -> list[Download]:
    """The record's input artifacts that are files (candidate ONNX, cache, …), each checked by the resolver."""
    out = []
    for entry in view.record.get("provenance", {}).get("artifacts", []):
        try:
            path = resolve(entry["path"], SERVED_AREAS, roots)
        except OutsideArtifacts as exc:
            out.append(Download(entry["role"], entry["path"], None, str(exc)))
            continue
        if path.is_file():
            out.append(Download(entry["role"], entry["path"], path, ""))
        else:
            out.append(Download(entry["role"], entry["path"], None, "a folder: open it on the Sets page"))
    for engine in _engines_of(view, roots):
        out.append(Download("TensorRT engine", str(engine), engine, ""))
    return out


def _engines_of(view: ReportView, roots: ArtifactRoots) -> list[Path]:
    """Engines built (``build`` verb) from one of the record's candidate ONNX files, found by their sidecars."""
    import json

    hashes = {
        a["sha256"]
        for a in view.record.get("provenance", {}).get("artifacts", [])
        if a.get("role", "").startswith("candidate")
    }
    found: list[Path] = []
    if not roots.engines.is_dir():
        return found
    for engine in sorted(roots.engines.rglob("*.engine")):
        try:
            meta = json.loads(engine.with_suffix(".json").read_text())  # the build verb's sidecar
        except (OSError, ValueError):
            continue
        if isinstance(meta, dict) and meta.get("onnx_sha256") in hashes:
            try:
                found.append(resolve(engine, "engines", roots))
            except WorkbenchError:
                continue
    return found


def conditions(record: dict[str, Any]) -> list[str]:
    return sorted(
        {
            c
            for n in record["candidates"]
            for c in record["accuracy"]["candidates"][n]["groups"].get("condition", {})
        }
    )


def tradeoff_frame(record: dict[str, Any], group: str = OVERALL) -> pd.DataFrame:
    """One row per candidate: WER (overall or one condition) with CI, delta, latency, verdict, front."""
    gates = record["gates"]
    batch = int(gates.get("latency_batch", 1))
    pct = gates.get("latency_percentile", "p90")
    verdicts = {v["candidate"]: v for v in record["verdicts"]}
    rows = []
    for name in record["candidates"]:
        acc = record["accuracy"]["candidates"][name]
        score = acc["overall"] if group == OVERALL else acc["groups"].get("condition", {}).get(group)
        if score is None:
            continue
        points = (record["latency"].get(name) or {}).get("points", [])
        at_batch = [p for p in points if p["batch"] == batch] or points
        mean_p50 = sum(p["p50_ms"] for p in at_batch) / len(at_batch) if at_batch else None
        worst = max((p[f"{pct}_ms"] for p in points if p["batch"] == batch), default=None)
        delta = score.get("delta")
        rows.append(
            {
                "candidate": name,
                "WER %": score["wer"]["estimate"] * 100,
                "WER low %": score["wer"]["low"] * 100,
                "WER high %": score["wer"]["high"] * 100,
                "delta pts": 0.0 if delta is None else delta["estimate"] * 100,
                "delta low pts": 0.0 if delta is None else delta["low"] * 100,
                "delta upper pts": None if delta is None else delta["high"] * 100,
                "latency ms": mean_p50,
                f"{pct} worst ms": worst,
                "verdict": "PASS" if verdicts[name]["passed"] else "FAIL",
                "reason": verdicts[name]["summary"],
                "baseline": name == record["baseline"],
            }
        )
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    frame["pareto"] = on_pareto_front(frame)
    frame["recommended"] = frame["candidate"] == record.get("recommendation")
    return frame


def on_pareto_front(frame: pd.DataFrame) -> pd.Series:
    """Per row of a trade-off table: on the (``latency ms``, ``WER %``) Pareto front? Rows without latency are not."""
    timed = frame.dropna(subset=["latency ms"])
    front = set(pareto_front(list(zip(timed["candidate"], timed["latency ms"], timed["WER %"]))))
    return frame["candidate"].isin(front)


def gate_lines(record: dict[str, Any], group: str = OVERALL) -> dict[str, float | None]:
    """Where the gates sit on the trade-off axes: WER = baseline WER + allowed delta; latency limit."""
    gates = record["gates"]
    base = record["accuracy"]["candidates"][record["baseline"]]
    score = base["overall"] if group == OVERALL else base["groups"].get("condition", {}).get(group)
    allowed = gates["max_wer_delta_points"] if group == OVERALL else gates["max_condition_wer_delta_points"]
    return {
        "wer": None if score is None else score["wer"]["estimate"] * 100 + allowed,
        "allowed_delta": allowed,
        "latency": gates.get("max_latency_ms"),
    }


def candidate_onnx(record: dict[str, Any], candidate: str, roots: ArtifactRoots) -> Path:
    """The candidate's ONNX file named in the record's provenance, through the resolver."""
    for entry in record.get("provenance", {}).get("artifacts", []):
        if entry.get("role") == f"candidate {candidate}":
            return resolve(entry["path"], ("engines", "models", "reports"), roots)
    raise WorkbenchError(f"the record names no ONNX file for candidate {candidate!r}")

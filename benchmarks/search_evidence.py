"""The demo's search and sign-off, read back from a finished demo workspace: what each evaluation cost.

Reads the search record (``engines/<model>/compare/search-*.json``) and the sign-off record
(``reports/demo-signoff/report.json``) of a workspace where ``python -m workbench --workspace DIR demo`` ran,
and, with ``--demo-log``, the step times the demo printed. Writes one JSON with, per search candidate, its k,
INT8 share of MACs and of nodes, the dev utterances it used, every look and why it stopped, its delta and
judged upper end; the found plan; the sign-off's rows (WER delta with interval, verdict) with each candidate's
MACs share and the batch-1 check; and the demo's step times.

    python -m workbench --workspace /tmp/demo demo 2>&1 | tee /tmp/demo.log
    python benchmarks/search_evidence.py --workspace /tmp/demo --demo-log /tmp/demo.log
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "search_evidence.json"


def newest(paths: list[Path]) -> Path:
    if not paths:
        raise SystemExit(
            "error: no search record under the workspace's engines/*/compare/; run the demo first"
        )
    return max(paths, key=lambda p: p.stat().st_mtime)


def step_times(log: Path | None) -> dict[str, float]:
    if log is None or not log.is_file():
        return {}
    found = re.findall(r"=== (\S+) done in ([0-9.]+) s", log.read_text(encoding="utf-8", errors="replace"))
    return {name: float(seconds) for name, seconds in found}


def search_summary(search: dict[str, Any]) -> dict[str, Any]:
    rows = []
    for c in search["candidates"]:
        delta = (c.get("delta") or {}).get("overall") or {}
        rows.append(
            {
                "step": c["step"],
                "phase": c["phase"],
                "k": c["k"],
                "int8_macs_share": c.get("int8_macs_share"),
                "int8_node_share": c["int8_share"],
                "passed": c["passed"],
                "dev_utterances": c["latency"]["utterances"],
                "stopped": (c.get("evidence") or {}).get("stopped"),
                "looks": (c.get("evidence") or {}).get("looks"),
                "delta_points": None if not delta else delta["estimate"] * 100,
                "delta_high_points": None if not delta else delta["high"] * 100,
                "judged_high_points": (c.get("judged_delta_high") or {}).get("overall"),
            }
        )
    return {
        "dev_set": search["dev_set"],
        "objective": search.get("objective"),
        "macs": search.get("macs"),
        "sequential": search.get("sequential"),
        "batching": search.get("batching"),
        "budget": {k: search["budget"].get(k) for k in ("judged_against", "confidence", "margin")},
        "evaluations": rows,
        "found": None
        if not search.get("found")
        else {
            k: search["found"].get(k)
            for k in ("name", "int8_macs_share", "int8_share", "k", "step", "fp16_groups")
        },
    }


def signoff_summary(record: dict[str, Any]) -> dict[str, Any]:
    acc = record["accuracy"]["candidates"]
    compute = (record.get("compute") or {}).get("candidates", {})
    rows = []
    for verdict in record["verdicts"]:
        name = verdict["candidate"]
        delta = acc[name]["overall"].get("delta")
        rows.append(
            {
                "candidate": name,
                "wer": acc[name]["overall"]["wer"]["estimate"] * 100,
                "delta_points": None
                if delta is None
                else [delta[k] * 100 for k in ("estimate", "low", "high")],
                "per_condition_delta_high_points": {
                    cond: None if g.get("delta") is None else g["delta"]["high"] * 100
                    for cond, g in acc[name]["groups"].get("condition", {}).items()
                },
                "int8_macs_share": (compute.get(name) or {}).get("int8_macs_share"),
                "int8_nodes": (compute.get(name) or {}).get("int8_nodes"),
                "passed": verdict["passed"],
                "summary": verdict["summary"],
            }
        )
    return {
        "recommendation": record.get("recommendation"),
        "rows": rows,
        "batching": (record.get("backend") or {}).get("batching"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspace", type=Path, required=True)
    parser.add_argument("--demo-log", type=Path, help="the demo's printed output (for the step times)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    search_path = newest(list(args.workspace.glob("engines/*/compare/search-*.json")))
    report = args.workspace / "reports" / "demo-signoff" / "report.json"
    search = json.loads(search_path.read_text(encoding="utf-8"))
    out: dict[str, Any] = {
        "benchmark": "search_evidence",
        "command": "python benchmarks/search_evidence.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "search_record": str(search_path),
        "search": search_summary(search),
        "signoff": signoff_summary(json.loads(report.read_text(encoding="utf-8")))
        if report.is_file()
        else None,
        "demo_step_seconds": step_times(args.demo_log),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    tmp.replace(args.out)
    s = out["search"]
    print(
        f"{'step':>4} {'phase':>15} {'k':>3} {'MACs%':>6} {'nodes%':>6} {'utts':>5} {'delta':>6} {'judged':>6}  stopped"
    )
    for r in s["evaluations"]:
        print(
            f"{r['step']:>4} {r['phase']:>15} {r['k'] if r['k'] is not None else '-':>3} "
            f"{(r['int8_macs_share'] or 0) * 100:>6.1f} {r['int8_node_share'] * 100:>6.1f} {r['dev_utterances']:>5} "
            f"{r['delta_points'] if r['delta_points'] is None else round(r['delta_points'], 2):>6} "
            f"{r['judged_high_points'] if r['judged_high_points'] is None else round(r['judged_high_points'], 2):>6}  "
            f"{r['stopped']}"
        )
    if s["found"]:
        f = s["found"]
        print(
            f"found {f['name']}: {f['int8_macs_share'] * 100:.1f}% of MACs, {f['int8_share'] * 100:.1f}% of nodes INT8"
        )
    if out["signoff"]:
        for r in out["signoff"]["rows"]:
            print(
                f"sign-off {r['candidate']}: delta {r['delta_points']}, MACs {r['int8_macs_share']}: {r['summary']}"
            )
    print(f"step times: {out['demo_step_seconds']}; wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Dev against sign-off: does the search's dev estimate of the plan it finds hold on the evaluation set?

The search judges several plans on one dev set and keeps the passing one with the most INT8; the sign-off then
judges that plan on the evaluation set (other speakers and texts). For each (search record, sign-off report)
pair given, this prints and writes the overall WER delta of INT8 everywhere (the search's first candidate) and of
the found plan on both sets. INT8 everywhere is judged first and never selected, so it shows how far the two sets
differ by themselves; a found plan that reads lower on dev than on the evaluation set run after run shows the
selection.

    python benchmarks/search_selection.py --pair NAME=SEARCH_JSON,REPORT_JSON [--pair ...] --out OUT.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results" / "search_selection.json"


def _points(delta: dict[str, Any] | None) -> float | None:
    return None if delta is None else round(delta["estimate"] * 100, 3)


def dev_side(search: dict[str, Any]) -> dict[str, Any]:
    """INT8 everywhere's and the found plan's dev deltas (points) and how many dev utterances judged each."""

    def utterances(candidate: dict[str, Any]) -> int | None:
        looks = (candidate.get("evidence") or {}).get("looks") or []
        return looks[-1]["utterances"] if looks else None

    candidates = search["candidates"]
    first = candidates[0]
    found = search.get("found")
    picked = [c for c in candidates if found and c["name"] == found["name"]] or [
        c for c in candidates if found and c["passed"] and c["int8_macs_share"] == found["int8_macs_share"]
    ]
    plan = picked[-1] if picked else None
    return {
        "int8_everywhere": {"delta": _points(first["delta"]["overall"]), "utterances": utterances(first)},
        "found": None
        if plan is None
        else {
            "delta": _points(plan["delta"]["overall"]),
            "utterances": utterances(plan),
            "int8_macs_share": plan["int8_macs_share"],
        },
    }


def signoff_side(report: dict[str, Any]) -> dict[str, Any]:
    """INT8 everywhere's and the mixed plan's sign-off deltas (points) and verdicts (the first candidate named
    int8… and mixed… of a TensorRT-target report)."""
    accuracy = report["accuracy"]["candidates"]
    verdicts = {v["candidate"]: v["passed"] for v in report["verdicts"]}
    out: dict[str, Any] = {}
    for name, overall in ((n, c["overall"]) for n, c in accuracy.items()):
        role = "found" if name.startswith("mixed") else "int8_everywhere" if name.startswith("int8") else None
        if role and role not in out:  # the first of each (a CPU-target report lists int8-dynamic after)
            out[role] = {"delta": _points(overall["delta"]), "passed": verdicts.get(name)}
    out["utterances"] = report["accuracy"]["candidates"][next(iter(accuracy))]["overall"].get("utterances")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pair", action="append", required=True, help="NAME=SEARCH_JSON,REPORT_JSON")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    rows = []
    for pair in args.pair:
        name, _, paths = pair.partition("=")
        search_path, _, report_path = paths.partition(",")
        if not (name and search_path and report_path):
            parser.error(f"--pair {pair!r}: give NAME=SEARCH_JSON,REPORT_JSON")
        search = json.loads(Path(search_path).read_text())
        report = json.loads(Path(report_path).read_text())
        rows.append({"run": name, "dev": dev_side(search), "signoff": signoff_side(report)})
    print(f"{'run':34s} {'INT8 everywhere dev / eval':>28s} {'found plan dev / eval':>34s}")
    for row in rows:
        dev, signed = row["dev"], row["signoff"]
        found = dev["found"] or {}
        print(
            f"{row['run']:34s} {dev['int8_everywhere']['delta']:+7.2f} ({dev['int8_everywhere']['utterances']})"
            f" / {signed['int8_everywhere']['delta']:+.2f}"
            f"     {found.get('int8_macs_share', 0) * 100:5.1f} %: {found.get('delta', float('nan')):+.2f}"
            f" ({found.get('utterances')}) / {signed.get('found', {}).get('delta', float('nan')):+.2f}"
        )
    record = {
        "benchmark": "dev against sign-off deltas of INT8 everywhere and of the found plan",
        "command": "python benchmarks/search_selection.py "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "unit": "WER points",
        "rows": rows,
    }
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

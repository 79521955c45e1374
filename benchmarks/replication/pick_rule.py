"""The winning selection rule of a search replication result (``benchmarks/search_replication.py``'s JSON).

A rule qualifies when its found plans pass the sign-off in at least 80 % of the draws while keeping on average at
least 65 % of the multiply-accumulates in INT8 (a draw without a plan counts 0); among the qualifying rules the one
with the highest mean INT8 share wins (then the higher pass rate). Prints one row per rule (pass rate with its
95 % Wilson interval, mean INT8 share, mean predicted pass chance against the observed rate, draws, mean dev
utterances the search transcribed per draw: its cost) and the winner,
or that no rule qualifies. An unreadable file: one ``error:`` line, exit status 1.

    python benchmarks/replication/pick_rule.py [benchmarks/results/search_replication.json]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

TARGET_PASS_RATE = 0.8
TARGET_INT8_SHARE = 0.65
DEFAULT = Path(__file__).resolve().parents[1] / "results" / "search_replication.json"


def wilson(passes: int, draws: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a pass rate (95 % by default): with 8 draws a rate is known to about +-0.3."""
    if draws == 0:
        return (0.0, 1.0)
    p = passes / draws
    centre = (p + z * z / (2 * draws)) / (1 + z * z / draws)
    half = z * math.sqrt(p * (1 - p) / draws + z * z / (4 * draws * draws)) / (1 + z * z / draws)
    return (round(max(0.0, centre - half), 3), round(min(1.0, centre + half), 3))


def qualifies(
    row: dict[str, Any], pass_rate: float = TARGET_PASS_RATE, share: float = TARGET_INT8_SHARE
) -> bool:
    return row["pass_rate"] >= pass_rate and row["mean_int8_macs_share"] >= share


def pick(
    summary: dict[str, dict[str, Any]], pass_rate: float = TARGET_PASS_RATE, share: float = TARGET_INT8_SHARE
) -> str | None:
    """The rule that wins by the target (None when none qualifies)."""
    ok = [
        (r["mean_int8_macs_share"], r["pass_rate"], rule)
        for rule, r in summary.items()
        if qualifies(r, pass_rate, share)
    ]
    return max(ok)[2] if ok else None


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f} %"


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:,.0f}"


def table(result: dict[str, Any]) -> str:
    """The per-rule table and the verdict, as text."""
    summary = result["summary"]
    lines = [
        f"{'rule':<9} {'draws':>5} {'passes':>6} {'pass rate [95 % CI]':>24} {'mean INT8 MACs':>14} "
        f"{'predicted':>9} {'meets target':>12} {'dev utts/search':>15}"
    ]
    for rule, r in summary.items():
        low, high = wilson(r["passes"], r["draws"])
        lines.append(
            f"{rule:<9} {r['draws']:>5} {r['passes']:>6} {_pct(r['pass_rate']):>8} [{_pct(low)}, {_pct(high)}] "
            f"{_pct(r['mean_int8_macs_share']):>14} {_pct(r.get('mean_predicted_pass_chance')):>9} "
            f"{'yes' if qualifies(r) else 'no':>12} {_num(r.get('mean_dev_utterances_transcribed')):>15}"
        )
    winner = pick(summary)
    target = f"pass rate >= {TARGET_PASS_RATE:.0%} with mean INT8 share of MACs >= {TARGET_INT8_SHARE:.0%}"
    lines.append(
        f"winner: {winner} ({target}; the highest share among those)" if winner else f"no rule meets {target}"
    )
    if not result.get("complete", False):
        lines.append(f"the result is not complete: {len(result.get('draws', []))} draws recorded")
    errors = [d for d in result.get("draws", []) if "error" in d]
    if errors:
        lines.append(
            f"{len(errors)} draw(s) failed: " + "; ".join(f"draw {d['draw']}: {d['error']}" for d in errors)
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("result", type=Path, nargs="?", default=DEFAULT)
    args = parser.parse_args(argv)
    try:
        result = json.loads(args.result.read_text())
        result["summary"]
    except (OSError, ValueError, KeyError) as exc:
        print(f"error: {args.result}: not a search replication result ({exc})", file=sys.stderr)
        return 1
    print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())

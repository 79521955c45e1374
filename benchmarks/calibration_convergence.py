"""Convergence readings of the demo model's calibration: what ``calibrate`` says about sets of different sizes and
conditions, under the convergence rule in INT8 steps (``workbench/calibration/convergence.py``).

Sets (drawn, seeded, from the calibration pool ``--calib-set``: the demo's ``demo-calib``, 100 clips per condition,
``python -m workbench demo`` or ``python -m workbench data build --name demo``), the same draws as the calibration
coverage study (``calibration_coverage.pools``/``balanced``): balanced sets of ``--sizes`` clips (the conditions in
turn) and, for each condition, a set of that condition only (``--single`` clips). Each set is calibrated in one pass
with the demo's method (percentile 99.99; ``--method`` for another) by the code ``calibrate`` runs
(``collect_statistics`` with the convergence checkpoint, ``ranges_from_statistics``, ``convergence.measure``).
Recorded per set: the verdict, the moving tensors, the largest growth and shrink in INT8 steps (and which
tensor), each tensor's change in steps, and how many tensors a 1 % relative tolerance would call moving.

Writes ``benchmarks/results/calibration_convergence.json`` (machine, load average, set hashes, command) and prints
a table. The readings do not depend on load; times do.

    python benchmarks/calibration_convergence.py --calib-set demo-calib
    python benchmarks/calibration_convergence.py --calib-set demo-calib --sizes 8 --single 6 --out /tmp/conv.json  # smoke
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from calibration_coverage import CONDITIONS, balanced, pools  # noqa: E402  (the coverage study's draws)
from calibration_methods import cpu_seconds, parse_method  # noqa: E402

RESULTS = HERE / "results" / "calibration_convergence.json"
OLD_TOLERANCE = 0.01  # a 1 % relative tolerance (about one INT8 step either way), for comparison


def reading(found, clips: list, seconds: float) -> dict[str, Any]:
    """One set's convergence reading."""
    grew = max(found.changes, key=lambda c: c.steps)
    shrank = min(found.changes, key=lambda c: c.steps)
    return {
        "clips": len(clips),
        "conditions": {c: sum(u.condition == c for u in clips) for c in CONDITIONS},
        "last_clips": found.last_clips,
        "verdict": found.verdict(),
        "converged": found.converged,
        "moving": [
            {"tensor": c.tensor, "steps": round(c.steps, 2), "driver": c.driver} for c in found.moving
        ],
        "largest_growth": {"tensor": grew.tensor, "steps": round(grew.steps, 2)},
        "largest_shrink": {"tensor": shrank.tensor, "steps": round(shrank.steps, 2)},
        "moving_by_former_1pct_rule": sum(abs(c.change) > OLD_TOLERANCE for c in found.changes),
        "tensors": len(found.changes),
        "calibrate_wall_s": round(seconds, 1),
        "steps_by_tensor": {c.tensor: round(c.steps, 3) for c in found.changes},  # to judge another rule
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--calib-set", default="demo-calib", help="the pool (name under calib_sets/ or a path)"
    )
    parser.add_argument("--sizes", default="16,64,300", help="balanced set sizes (default %(default)s)")
    parser.add_argument(
        "--single", type=int, default=100, help="clips in each one-condition set (default 100)"
    )
    parser.add_argument(
        "--method", default=None, help="e.g. entropy or percentile:99.9 (default: the demo's)"
    )
    parser.add_argument("--work", type=Path, default=Path("/tmp/calibration-convergence"), help="FP32 export")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    from workbench.artifacts import write_json_atomic
    from workbench.calibration import convergence
    from workbench.calibration.methods import MethodSpec
    from workbench.calibration.runner import collect_statistics, ranges_from_statistics
    from workbench.config import CONVERGENCE
    from workbench.evaluate.machine import machine_info, package_versions
    from workbench.jobs.calibrate import export_or_reuse
    from workbench.model.description import describe_model
    from workbench.project.demo import DEMO_METHOD, DEMO_PERCENTILE
    from workbench.resources import demo_model_dir
    from workbench.speech.store import load_set

    started, cpu0, load0 = time.perf_counter(), cpu_seconds(), os.getloadavg()
    calib = load_set(args.calib_set)
    by = pools(calib)
    specs = {f"balanced-{n}": balanced(by, n) for n in (int(s) for s in args.sizes.split(",") if s.strip())}
    for cond in CONDITIONS:
        if len(by[cond]) < args.single:
            raise SystemExit(f"the pool has {len(by[cond])} {cond} clips, fewer than --single {args.single}")
        specs[f"{cond}-only-{args.single}"] = by[cond][: args.single]
    spec = parse_method(args.method)[1] if args.method else MethodSpec(DEMO_METHOD, DEMO_PERCENTILE)
    description = describe_model(demo_model_dir())
    fp32 = export_or_reuse(description, args.work)
    rows: dict[str, dict[str, Any]] = {}
    record: dict[str, Any] = {}
    for name, utts in specs.items():
        t0 = time.perf_counter()
        stats = collect_statistics(
            fp32,
            (calib.audio(u) for u in utts),
            len(utts),
            bins=spec.bins,
            checkpoint=convergence.checkpoint_for(len(utts)),
            prepare=description.prepare,
        )
        amax = ranges_from_statistics(stats, spec)
        found = convergence.measure(stats, amax, spec, [u.condition for u in utts])
        if found is None:
            raise SystemExit(f"{name}: too few clips for a convergence reading")
        rows[name] = reading(found, utts, time.perf_counter() - t0)
        print(f"{name:<18} {len(utts):>4} clips  {found.verdict()}", flush=True)
        record = {
            "benchmark": "calibration convergence readings (demo model, balanced and one-condition sets)",
            "command": "python benchmarks/calibration_convergence.py "
            + " ".join(argv if argv is not None else sys.argv[1:]),
            "rule": {
                "grow_steps": CONVERGENCE.grow_steps,
                "shrink_steps": CONVERGENCE.shrink_steps,
                "last_fraction": CONVERGENCE.last_fraction,
            },
            "method": spec.params(),
            "model_hash": description.model_hash,
            "pool": {
                "name": calib.name,
                "content_hash": calib.content_hash,
                "utterances": len(calib.utterances),
            },
            "sets": rows,
            "complete": len(rows) == len(specs),
            "total_wall_s": round(time.perf_counter() - started, 1),
            "total_cpu_s": round(cpu_seconds() - cpu0, 1),
            "machine": {
                **machine_info(),
                "loadavg_at_start": [round(x, 2) for x in load0],
                "loadavg_at_end": [round(x, 2) for x in os.getloadavg()],
            },
            "packages": package_versions(),
        }
        write_json_atomic(args.out, record)
    print(f"\n{'set':<18} {'clips':>5} {'growth':>7} {'shrink':>7} {'moving':>6} {'(1 % rule)':>10}  verdict")
    for name, row in rows.items():
        print(
            f"{name:<18} {row['clips']:>5} {row['largest_growth']['steps']:>+7.1f} {row['largest_shrink']['steps']:>+7.1f} "
            f"{len(row['moving']):>6} {row['moving_by_former_1pct_rule']:>10}  {row['verdict']}"
        )
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

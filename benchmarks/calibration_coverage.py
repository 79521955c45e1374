"""What the calibration data must cover: the demo model calibrated on sets of different conditions and sizes.

Sets (all drawn, seeded, from the calibration pool ``--calib-set``: the demo's ``demo-calib``, 100 clips
per condition made by the workbench's set builder from synthetic speech, ``python -m workbench demo``):

- equal-size sets (``--equal`` clips each): quiet-only, noisy-only, accented-only, balanced;
- balanced sets of 16 / 32 / 64 / 128 / 300 clips (300: the whole pool, the demo's own calibration).

Balanced = the pool's conditions in turn (quiet, noisy, accented, ...), each condition's clips in a
seeded order. Each set is calibrated in one pass with the demo's method (percentile 99.99,
``workbench/project/demo.py``; ``--method`` for another) by the same code ``calibrate`` runs (``collect_statistics`` with the convergence
checkpoint, ``ranges_from_statistics``, ``convergence.measure``), so every row also records the set's
own convergence verdict. Two plans are scored on ``--eval-set`` (``demo-eval``) against FP32 with the
sign-off's paired speaker-block bootstrap (``search.evaluator.DevEvaluator``): INT8 everywhere, and the
mixed plan with the FP16 groups of the demo's searched plan held FIXED across sets (``DEMO_FP16_GROUPS``,
found by the demo's search on percentile-99.99 ranges from the balanced 300; not re-searched per set).
Each set's ranges are compared with the balanced-300 set's: median / 90th percentile / max relative
amax change over the tensors, and the tensor that moved most.

Prints a table and writes ``benchmarks/results/calibration_coverage.json`` (machine, load average, set
hashes, command). Times are of a shared machine.

    nice python benchmarks/calibration_coverage.py --calib-set demo-calib --eval-set demo-eval
    python benchmarks/calibration_coverage.py --equal 6 --sizes 8 --eval-per-condition 4 --reference balanced-8 --out /tmp/cov.json  # smoke
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from calibration_methods import interval, parse_method  # noqa: E402  (one copy of each)
from common import cpu_seconds, dev_evaluator, load_averages  # noqa: E402

RESULTS = HERE / "results" / "calibration_coverage.json"
CONDITIONS = ("quiet", "noisy", "accented")
# The FP16 groups of the demo's searched plan (python -m workbench demo: search on percentile-99.99 ranges
# from demo-calib, dev set demo-calib; plan.mixed-percentile-861f60ec758d-dev-861f60ec758d.json): the whole
# conv feature encoder and the attention-score MatMuls of layers 2 and 5. Held fixed across sets.
DEMO_FP16_GROUPS = tuple(
    [f"feature_extractor.conv_layers.{k}" for k in range(7)]
    + ["encoder.layers.2.attention.scores", "encoder.layers.5.attention.scores"]
)


def pools(calib) -> dict[str, list]:
    """The pool's utterances per condition, each in a seeded order."""
    by: dict[str, list] = {c: [] for c in CONDITIONS}
    for utt in calib.utterances:
        if utt.condition in by:
            by[utt.condition].append(utt)
    for k, cond in enumerate(CONDITIONS):
        random.Random(1000 + k).shuffle(by[cond])
    return by


def balanced(by: dict[str, list], size: int) -> list:
    """``size`` utterances taking the conditions in turn (their seeded orders), interleaved."""
    out, taken = [], {c: 0 for c in CONDITIONS}
    while len(out) < size:
        progressed = False
        for cond in CONDITIONS:
            if len(out) < size and taken[cond] < len(by[cond]):
                out.append(by[cond][taken[cond]])
                taken[cond] += 1
                progressed = True
        if not progressed:
            raise SystemExit(f"the pool has fewer than {size} clips")
    return out


def set_specs(by: dict[str, list], equal: int, sizes: list[int]) -> dict[str, list]:
    specs: dict[str, list] = {}
    for cond in CONDITIONS:
        if len(by[cond]) < equal:
            raise SystemExit(f"the pool has {len(by[cond])} {cond} clips, fewer than --equal {equal}")
        specs[f"{cond}-only-{equal}"] = by[cond][:equal]
    specs[f"balanced-{equal}"] = balanced(by, equal)
    for size in sizes:
        specs.setdefault(f"balanced-{size}", balanced(by, size))
    return specs


def drift(amax: dict[str, float], reference: dict[str, float]) -> dict[str, Any]:
    """Relative amax change of every tensor against the reference set's ranges."""
    names = sorted(reference)
    rel = np.array([abs(amax[n] - reference[n]) / reference[n] if reference[n] else 0.0 for n in names])
    worst = int(np.argmax(rel))
    return {
        "median": round(float(np.median(rel)), 5),
        "p90": round(float(np.quantile(rel, 0.9)), 5),
        "max": round(float(rel[worst]), 5),
        "max_tensor": names[worst],
        "max_tensor_amax": [round(amax[names[worst]], 6), round(reference[names[worst]], 6)],
    }


def order_of(specs: dict[str, list], reference: str) -> list[str]:
    return [reference] + [n for n in specs if n != reference]


def record_of(args, argv, rows, evaluator, started, cpu0, load0, extra) -> dict[str, Any]:
    """The result record as it stands (written after every set, so a stopped run keeps what it measured)."""
    from workbench.evaluate.machine import machine_info, package_versions

    base = evaluator.baseline
    return {
        "benchmark": "calibration coverage (demo model: condition-only, balanced and size-series calibration sets)",
        "command": "python benchmarks/calibration_coverage.py "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        **extra,
        "fp32": {
            "wer": interval(base.overall.wer),
            "per_condition": {c: interval(g.wer) for c, g in sorted(base.per_condition.items())},
        },
        "sets": rows,
        "complete": False,
        "total_wall_s": round(time.perf_counter() - started, 1),
        "total_cpu_s": round(cpu_seconds() - cpu0, 1),
        "machine": {
            **machine_info(),
            "loadavg_at_start": load0,
            "loadavg_at_end": load_averages(),
        },
        "packages": package_versions(),
        "note": "WER in percent, deltas in points vs FP32 (paired speaker-block bootstrap, 95 %); amax drift: "
        "|amax - amax of the reference set| / amax of the reference set over the tensors; shared "
        "machine: times are indicative only",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--calib-set", default="demo-calib", help="the pool (name under calib_sets/ or a path)"
    )
    parser.add_argument("--eval-set", default="demo-eval")
    parser.add_argument(
        "--equal", type=int, default=96, help="clips in each equal-size set (default %(default)s)"
    )
    parser.add_argument(
        "--sizes", default="16,32,64,128,300", help="balanced set sizes (default %(default)s)"
    )
    parser.add_argument(
        "--method",
        default=None,
        help="calibration method, e.g. entropy or percentile:99.9 (default: the demo's, percentile 99.99)",
    )
    parser.add_argument(
        "--reference", default="balanced-300", help="the set every other set's ranges are compared with"
    )
    parser.add_argument(
        "--eval-per-condition",
        type=int,
        default=None,
        help="score only the first N evaluation clips of each condition (default: all)",
    )
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument(
        "--work", type=Path, default=Path("/tmp/calibration-coverage"), help="FP32 ONNX export goes here"
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    import onnx

    from workbench.artifacts import write_json_atomic
    from workbench.calibration import convergence
    from workbench.calibration.methods import MethodSpec
    from workbench.calibration.runner import collect_statistics, ranges_from_statistics
    from workbench.compare.groups import node_groups, plan_for
    from workbench.compare.sensitivity import VariantRunner
    from workbench.evaluate.gates import GateConfig
    from workbench.jobs.calibrate import export_or_reuse
    from workbench.model.description import describe_model
    from workbench.project.demo import DEMO_METHOD, DEMO_PERCENTILE
    from workbench.quantize.plan import PrecisionPlan
    from workbench.resources import demo_model_dir
    from workbench.speech.select import all_clips, clips_per_condition
    from workbench.speech.store import load_set

    started, cpu0, load0 = time.perf_counter(), cpu_seconds(), load_averages()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    calib, evalset = load_set(args.calib_set), load_set(args.eval_set)
    specs = set_specs(pools(calib), args.equal, sizes)
    if args.reference not in specs:
        parser.error(f"--reference {args.reference} is not one of the sets: {', '.join(specs)}")
    spec = parse_method(args.method)[1] if args.method else MethodSpec(DEMO_METHOD, DEMO_PERCENTILE)
    demo = demo_model_dir()
    description = describe_model(demo)
    mhash = description.model_hash
    fp32 = export_or_reuse(description, args.work)
    model = onnx.load(str(fp32))
    groups = node_groups(model, "group")
    missing = set(DEMO_FP16_GROUPS) - {g.name for g in groups}
    if missing:
        raise SystemExit(f"the demo model has no groups {sorted(missing)}")
    mixed = plan_for("mixed-demo-fp16-groups", groups, "fp16", "int8", set(DEMO_FP16_GROUPS))
    plans = {"int8": PrecisionPlan("int8-everywhere", "int8"), "mixed": mixed}
    eval_clips = (
        clips_per_condition(evalset, args.eval_per_condition)
        if args.eval_per_condition
        else all_clips(evalset)
    )
    gates = GateConfig()
    extra = {
        "model": str(demo),
        "model_hash": mhash,
        "method": spec.params(),
        "mixed_plan": {
            "fp16_groups": list(DEMO_FP16_GROUPS),
            "fp16_nodes": len(mixed.overrides),
            "note": "the demo's searched plan's FP16 groups, held fixed across sets (not re-searched)",
        },
        "pool": {"name": calib.name, "content_hash": calib.content_hash, "utterances": len(calib.utterances)},
        "eval_set": {
            "name": evalset.name,
            "content_hash": evalset.content_hash,
            "utterances": len(eval_clips),
            "per_condition": args.eval_per_condition or "all",
        },
        "reference_set": args.reference,
        "budget": gates.to_json(),
        "resamples": args.resamples,
        "planned_sets": order_of(specs, args.reference),
    }
    evaluator = None
    rows: dict[str, dict[str, Any]] = {}
    ranges: dict[str, dict[str, float]] = {}
    for name in order_of(specs, args.reference):  # the reference first: drift as each set finishes
        utts = specs[name]
        t0, c0 = time.perf_counter(), cpu_seconds()
        stats = collect_statistics(
            fp32,
            (calib.audio(u) for u in utts),
            len(utts),
            bins=spec.bins,
            checkpoint=convergence.checkpoint_for(len(utts)),
        )
        amax = ranges_from_statistics(stats, spec)
        found = convergence.measure(stats, amax, spec, [u.condition for u in utts])
        ranges[name] = amax
        row: dict[str, Any] = {
            "clips": len(utts),
            "conditions": {c: sum(u.condition == c for u in utts) for c in CONDITIONS},
            "seconds_of_audio": round(sum(float(u.duration_s) for u in utts), 1),
            "calibrate_wall_s": round(time.perf_counter() - t0, 1),
            "calibrate_cpu_s": round(cpu_seconds() - c0, 1),
            "convergence": found.verdict() if found else "not recorded",
            "convergence_moving": len(found.moving) if found else None,
        }
        variants = VariantRunner(model, amax, args.threads)
        if evaluator is None:  # FP32 transcripts once
            evaluator = dev_evaluator(variants, eval_clips, gates, args.resamples, description)
        evaluator.variants = variants
        for key, plan in plans.items():
            ev = evaluator.evaluate(plan)
            row[key] = {
                "wer": interval(ev.overall.wer),
                "delta": interval(ev.overall.delta),
                "passed": ev.passed,
                "per_condition": {
                    c: {"wer": interval(g.wer), "delta": interval(g.delta)}
                    for c, g in sorted(ev.per_condition.items())
                },
            }
        row["amax_drift_vs_reference"] = drift(amax, ranges[args.reference])
        rows[name] = row
        write_json_atomic(args.out, record_of(args, argv, rows, evaluator, started, cpu0, load0, extra))
        print(
            f"{name:<18} {len(utts):>4} clips  int8 {row['int8']['delta']['estimate']:+.2f}  "
            f"mixed {row['mixed']['delta']['estimate']:+.2f}  {row['convergence']}",
            flush=True,
        )
    record = record_of(args, argv, rows, evaluator, started, cpu0, load0, extra)
    base = evaluator.baseline
    print(
        f"\nFP32 on {evalset.name}: WER {100 * base.overall.wer.estimate:.2f} %; deltas in points [95 % CI]; "
        f"amax drift vs {args.reference}: median / max"
    )
    head = f"{'set':<18} {'clips':>5} {'plan':<6} {'overall':>22}" + "".join(f" {c:>22}" for c in CONDITIONS)
    print(head + f" {'drift med/max %':>16}  convergence")
    for name, row in rows.items():
        d = row["amax_drift_vs_reference"]
        for key in plans:
            r = row[key]
            cells = [r["delta"]] + [r["per_condition"].get(c, {}).get("delta") for c in CONDITIONS]
            text = "".join(f" {_ci(c):>22}" for c in cells)
            tail = (
                f" {100 * d['median']:>7.2f}/{100 * d['max']:<7.2f}  {row['convergence']}"
                if key == "int8"
                else ""
            )
            print(
                f"{name if key == 'int8' else '':<18} {row['clips'] if key == 'int8' else '':>5} {key:<6}{text}{tail}"
            )
    record["complete"] = True
    write_json_atomic(args.out, record)
    print(
        f"wrote {args.out} ({record['total_wall_s']} s wall, {record['total_cpu_s']} s CPU, load average "
        f"{record['machine']['loadavg_at_end']})"
    )
    return 0


def _ci(iv: dict[str, float] | None) -> str:
    return "-" if iv is None else f"{iv['estimate']:+.2f} [{iv['low']:+.2f},{iv['high']:+.2f}]"


if __name__ == "__main__":
    raise SystemExit(main())

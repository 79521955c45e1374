"""CPU deployment with ONNX Runtime: the sign-off's winner against FP32 on this machine's CPU (offline).

Runs the sign-off job for the deployment target ``ort-cpu`` (``signoff --target ort-cpu``): from the model
(``--model``: the shipped demo model, or a random-weight Wav2Vec2 of a size from
``workbench/model/synthetic.py``, e.g. ``base``) and the calibration set it builds FP32, FP16 and INT8
(percentile 99.99, as the demo), plus the mixed plan of a finished search on the same export and cache
under ``--engines`` (the demo's ``engines/`` has one), and judges what a CPU deployment runs:
FP32, the ONNX Runtime CPU flavour of every INT8 / mixed candidate and ONNX Runtime's dynamic INT8
quantization of FP32, with WER (paired bootstrap intervals), latency interleaved at ``--batch-sizes``
and the gates; the verdict rule picks the winner from the latency measured here.

Prints a table and writes ``benchmarks/results/cpu_target-<model>-<weight path>.json``: per candidate its
WER delta to FP32 with the interval, its verdict and its latency ratio to FP32 at every batch size with the
bootstrap interval over the paired rounds; the winner; dynamic quantization's row beside ours (same clips,
same gates); the integer-GEMM path ORT takes on this CPU (U8U8 where U8S8 saturates, x86 without VNNI;
U8S8 with VNNI) and the target: the winner at most ``TARGET_RATIO`` FP32 at batch 1 on a VNNI CPU, within
the gates. Latency ratios are only valid on an idle machine: the load average before and after is
recorded beside the cores other processes kept busy during the run (``other_processes_cores``; the load
average also counts this run's own threads), and ``idle`` says whether those stayed below ``IDLE_LOAD`` per core.

    python benchmarks/cpu_target.py --calib-set demo-calib --eval-set demo-eval --engines engines  # demo
    python benchmarks/cpu_target.py --calib-set demo-calib --eval-set demo-eval --engines engines \
        --bias-correction --clip-search  # the demo's own candidates (its calibration recovery, searched plan)
    python benchmarks/cpu_target.py --model base --calib-set demo-calib --eval-set demo-eval
    python benchmarks/cpu_target.py --model tiny --build-sets 2 --repeats 3 --out /tmp/x.json  # smoke test

A random-weight model transcribes noise: its WER says nothing about recognition quality, and its gates
compare noise with noise; it is there for the latency at the base model's size.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from workbench.model.synthetic import SIZES  # noqa: E402

TARGET_RATIO = 0.70  # the winner's latency at batch 1 on a VNNI CPU, as a multiple of FP32's
# cores per core that other processes may use during the run: above it, latency ratios are not trusted
IDLE_LOAD = 0.25
DEMO_METHOD = "percentile"  # the demo's calibration, percentile 99.99 (MethodSpec's default percentile)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="demo", choices=("demo", *SIZES))
    parser.add_argument("--calib-set", help="calibration set: name under --sets-root or a path")
    parser.add_argument("--eval-set", help="evaluation set: name under --sets-root or a path")
    parser.add_argument(
        "--build-sets",
        type=int,
        metavar="PER_CONDITION",
        help="build synthetic calibration and evaluation sets of this many utterances per condition in --work",
    )
    parser.add_argument(
        "--sets-root", type=Path, help="where set names are looked up (default: the workspace's)"
    )
    parser.add_argument("--work", type=Path, default=Path("/tmp/workbench-cpu-target"))
    parser.add_argument(
        "--engines",
        type=Path,
        help="where the variants go (default: WORK/engines); the demo workspace's engines/ brings the mixed plan "
        "of its finished search",
    )
    parser.add_argument(
        "--weights",
        default="auto",
        choices=("auto", "u8", "s8"),
        help="int8 weights of the CPU flavours: auto (what this CPU computes exactly), u8 (the U8U8 path a CPU "
        "without VNNI takes) or s8",
    )
    parser.add_argument("--batch-sizes", default="1,8")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--limit", type=int, help="score only the first N evaluation utterances")
    parser.add_argument(
        "--overflow-clips",
        type=int,
        help="the overflow check's outputs on N calibration clips (default: every clip; signoff --overflow-clips)",
    )
    parser.add_argument("--threads", type=int, help="ONNX Runtime intra-op threads (default: ORT's)")
    parser.add_argument(
        "--cache",
        type=Path,
        help="calibration cache to build INT8 and the CPU flavours from (default: the one made for --calib-set)",
    )
    parser.add_argument(
        "--bias-correction",
        action="store_true",
        help="bias-correct the INT8 weights, as the demo does (config.DEMO_RECOVERY); with --clip-search and "
        "--engines of a demo workspace this brings the demo's searched plan",
    )
    parser.add_argument(
        "--clip-search",
        action="store_true",
        help="choose the conv inputs' clipping by the model's output, as the demo does (config.DEMO_RECOVERY)",
    )
    parser.add_argument("--out", type=Path, help="results JSON (default: benchmarks/results/cpu_target-...)")
    args = parser.parse_args(argv)
    if args.build_sets is None and not (args.calib_set and args.eval_set):
        parser.error("give --calib-set and --eval-set, or --build-sets PER_CONDITION")
    return args


def weight_path(requested: str = "auto") -> dict[str, str]:
    """The integer GEMM path ONNX Runtime takes here for the workbench's CPU flavour."""
    from workbench.backends.cpu_int8 import int8_weight_type, u8s8_exact

    exact, why = u8s8_exact()
    weights, reason = int8_weight_type(requested)
    return {
        "path": "U8S8" if weights == "s8" else "U8U8",
        "vnni": "yes" if exact and "vnni" in why else "no",
        "weights": weights,
        "why": reason,
    }


def ratios_at(record: dict[str, Any], batch: int) -> dict[str, dict[str, float]]:
    """Every candidate's latency ratio to the baseline at ``batch`` with its interval (the verdict's method)."""
    from workbench.evaluate.latency import LatencyPoint, LatencyResult
    from workbench.evaluate.verdict import latency_ratios

    results = {
        name: LatencyResult(
            name,
            lat["backend"],
            lat["machine"],
            [LatencyPoint(**p) for p in lat["points"]],
            lat["peak_rss_mb"],
            lat["rss_before_mb"],
        )
        for name, lat in record["latency"].items()
    }
    return {
        n: {"estimate": r.estimate, "low": r.low, "high": r.high, "batch": r.batch, "rounds": r.rounds}
        for n, r in latency_ratios(results, record["baseline"], batch).items()
    }


def rows_of(record: dict[str, Any], batches: tuple[int, ...]) -> list[dict[str, Any]]:
    """One row per candidate: how it was made, WER and its delta with intervals, verdict, ratios per batch."""
    made = {c["name"]: c for c in record["backend"]["candidates"]["candidates"]}
    verdicts = {v["candidate"]: v for v in record["verdicts"]}
    per_batch = {b: ratios_at(record, b) for b in batches}
    rows = []
    for name in record["candidates"]:
        overall = record["accuracy"]["candidates"][name]["overall"]
        rows.append(
            {
                "candidate": name,
                "how": made[name]["how"],
                "wer": overall["wer"],
                "delta": overall["delta"],
                "passed": verdicts[name]["passed"],
                "verdict": verdicts[name]["summary"],
                "ratio": {str(b): per_batch[b].get(name) for b in batches},
            }
        )
    return rows


def judge_target(winner: dict[str, Any] | None, path: dict[str, str], idle: bool) -> str:
    """The target (winner <= TARGET_RATIO x FP32 at batch 1 within the gates) on a VNNI CPU; elsewhere reported."""
    if winner is None:
        return "no winner (no candidate passes, or latency was not measured)"
    ratio = winner["ratio"].get("1")
    if ratio is None:
        return "batch 1 was not timed"
    if not idle:
        return "not judged: the machine was not idle"
    if path["path"] != "U8S8":
        return f"not judged here: this CPU takes the U8U8 path (no VNNI); the winner is x{ratio['estimate']:.3f} FP32"
    met = ratio["high"] <= TARGET_RATIO
    return (
        f"{'met' if met else 'MISSED'}: x{ratio['estimate']:.3f} [{ratio['low']:.3f}, {ratio['high']:.3f}] "
        f"(target <= {TARGET_RATIO} on the upper end)"
    )


def _ci(iv: dict | None, scale: float = 100.0) -> str:
    if not iv:
        return "n/a"
    return f"{iv['estimate'] * scale:+.2f} [{iv['low'] * scale:+.2f}, {iv['high'] * scale:+.2f}]"


def _ratio(r: dict | None) -> str:
    return f"x{r['estimate']:.3f} [{r['low']:.3f}, {r['high']:.3f}]" if r else "n/a"


def table(rows: list[dict[str, Any]], batches: tuple[int, ...], winner: str | None) -> str:
    head = ["candidate", "WER %", "delta pts [95% CI]", "verdict"] + [
        f"latency / FP32, batch {b}" for b in batches
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        name = f"**{r['candidate']}** (winner)" if r["candidate"] == winner else r["candidate"]
        cells = [
            name,
            f"{r['wer']['estimate'] * 100:.2f}",
            _ci(r["delta"]),
            "PASS" if r["passed"] else "FAIL",
        ] + [_ratio(r["ratio"][str(b)]) for b in batches]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def sets(args: argparse.Namespace) -> tuple[str, str, Path | None]:
    """(calibration set, evaluation set, the root their names resolve under)."""
    if args.build_sets is None:
        return args.calib_set, args.eval_set, args.sets_root
    from dataclasses import replace

    from workbench.config import SetBuildConfig
    from workbench.jobs import sets as sets_job

    root = args.work / "calib_sets"
    config = replace(
        SetBuildConfig(),
        name="cpubench",
        calib_per_condition=args.build_sets,
        eval_per_condition=args.build_sets,
    )
    built = sets_job.run(sets_job.SetsInputs(config, root=root)).built
    return str(built.calib.path), str(built.eval.path), root


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from workbench.console import show_progress

    show_progress("   ")
    args = parse(argv)
    from common import MachineCpu
    from gpu_signoff import model_folder

    from workbench.calibration.recovery import RecoveryOptions
    from workbench.evaluate.latency import LatencyConfig
    from workbench.evaluate.machine import machine_info
    from workbench.jobs import signoff
    from workbench.values import parse_positive_ints

    started = time.time()
    batches = parse_positive_ints(args.batch_sizes, "--batch-sizes")
    model_dir, weights_line = model_folder(args.model, args.work)
    calib, evaluation, root = sets(args)
    path = weight_path(args.weights)
    print(f"model: {weights_line}\ninteger GEMMs here: {path['path']} ({path['why']})", flush=True)
    load_before = os.getloadavg()
    before = MachineCpu.now(include_self=True)
    extra = {"calib_root": root} if root is not None else {}
    result = signoff.run(
        signoff.SignoffInputs(
            eval_set=evaluation,
            out_dir=args.work / "reports" / f"cpu-target-{args.model}",
            model=model_dir,
            calib_set=calib,
            method=DEMO_METHOD,
            latency=LatencyConfig(batches, warmup=args.warmup, repeats=args.repeats),
            threads=args.threads,
            target="ort-cpu",
            ort_cpu_weights=args.weights,
            engines=args.engines or args.work / "engines",
            limit=args.limit,
            overflow_clips=args.overflow_clips,
            outside_profile="score",
            cache=args.cache,
            recovery=(
                RecoveryOptions(bias_correction=args.bias_correction, clip_search=args.clip_search)
                if args.bias_correction or args.clip_search
                else None
            ),
            **extra,
        ),
    )
    load_after = os.getloadavg()
    other_cores = round(MachineCpu.now(include_self=True).foreign_cores(before), 3)
    record = result.record
    rows = rows_of(record, batches)
    winner_name = record["recommendation"]
    winner = next((r for r in rows if r["candidate"] == winner_name), None)
    cores = os.cpu_count() or 1
    idle = other_cores <= IDLE_LOAD * cores
    out = {
        "benchmark": "cpu_target",
        "model": args.model,
        "weights": weights_line,
        "model_hash": record["model"]["model_hash"],
        "command": "python benchmarks/cpu_target.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "integer_gemm": path,
        "machine": machine_info(),
        "load_before": load_before,
        "load_after": load_after,
        "other_processes_cores": other_cores,
        "idle": idle,
        "batch_sizes": list(batches),
        "repeats": args.repeats,
        "utterances": len(record["accuracy"]["candidates"][record["baseline"]]["utterances"]),
        "gates": record["gates"],
        "decision": record["decision"],
        "winner": winner,
        "dynamic": next((r for r in rows if r["candidate"] == "int8-dynamic"), None),
        "rows": rows,
        "left_out": record["backend"]["candidates"]["left_out"],
        "target": judge_target(winner, path, idle),
        "report": str(result.paths["markdown"]),
        "wall_s": round(time.time() - started, 1),
    }
    dest = args.out or HERE / "results" / f"cpu_target-{args.model}-{path['path'].lower()}.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(out, indent=1, default=str))
    print()
    print(table(rows, batches, winner_name))
    print(f"\nverdict: {record['decision']['line']}")
    print(f"target (<= {TARGET_RATIO}x FP32 at batch 1 on a VNNI CPU): {out['target']}")
    print(
        f"load {load_before[0]:.2f} -> {load_after[0]:.2f} on {cores} cores; other processes used {other_cores:.2f} "
        f"cores ({'idle' if idle else 'NOT idle'})"
    )
    print(f"wrote {dest}")
    return out


if __name__ == "__main__":
    main()

"""Calibration-method study on the demo model: which range method loses the least WER in INT8?

For each method (entropy, max, percentile 99.99 and 99.9, mse) the command, in one process:

- calibrates the demo model on the calibration set (``workbench.jobs.calibrate``,
  one artifact root per method under ``--root`` so caches never collide, timed);
- evaluates INT8-everywhere on the evaluation set: WER overall and per condition with the paired
  bootstrap delta vs FP32 and the default budget's verdict (``workbench.search.evaluator``; the FP32
  transcripts are made once and shared by every method);
- measures INT8-everywhere logit damage (KL(FP32 || INT8) per frame, greedy-token disagreement) on the
  same 2 clips per condition of the calibration set that the sensitivity ranking uses;
- records the ranges (amax) each method gives the inputs of the last layer's attention-score MatMuls
  (QK^T and A.V, activation x activation) next to the max method's;
- optionally (``--attention-study``) two more INT8 plans per method, same evaluation and damage: the
  attention-score MatMuls of every layer kept in FP16 (the rest INT8), and INT8 everywhere with the
  Softmax outputs (the A.V MatMuls' probability input) given the data-independent amax 1.0;
- optionally (``--search``) runs the demo's mixed-precision search for that method
  (``workbench.jobs.search.run_search`` with ``refine=0``, dev set = calibration set, intervals
  widened to the evaluation set's size) and records the found plan's INT8 share and evaluations.

Prints a table and writes ``benchmarks/results/calibration_methods.json`` with the machine, the
model/set hashes and the command. Wall and CPU times are of a shared machine: compare within a run.

    python benchmarks/calibration_methods.py                       # every method, no search
    python benchmarks/calibration_methods.py --search all          # plus the search per method
    python benchmarks/calibration_methods.py --methods entropy,mse --search mse
    python benchmarks/calibration_methods.py --attention-study --out benchmarks/results/calibration_attention.json
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import cpu_seconds, dev_evaluator, load_averages  # noqa: E402

RESULTS = HERE / "results" / "calibration_methods.json"
DEFAULT_METHODS = "entropy,max,percentile:99.99,percentile:99.9,mse"


def parse_method(text: str):
    """``name`` or ``percentile:P`` -> (label, MethodSpec)."""
    from workbench.calibration.methods import MethodSpec

    name, _, value = text.partition(":")
    spec = MethodSpec(name, float(value)) if value else MethodSpec(name)
    label = f"{name}-{spec.percentile:g}" if name == "percentile" else name
    return label, spec


def interval(iv) -> dict[str, float] | None:
    """A WER (or WER delta) interval in percent (points), from the fractions the evaluator gives."""
    return None if iv is None else {k: round(100 * getattr(iv, k), 3) for k in ("estimate", "low", "high")}


def attention_amax(model, amax: dict[str, float], layer: str) -> dict[str, float]:
    """amax of the inputs of the ``layer`` attention-score MatMuls (QK^T and A.V), by input tensor."""
    from workbench.compare.groups import node_groups

    group = next((g for g in node_groups(model, "group") if g.name == f"{layer}.attention.scores"), None)
    if group is None:
        return {}
    nodes = {n.name: n for n in model.graph.node}
    return {f"{n}:{i}": amax[t] for n in group.nodes for i, t in enumerate(nodes[n].input) if t in amax}


def softmax_outputs(model) -> list[str]:
    return [o for n in model.graph.node if n.op_type == "Softmax" for o in n.output]


def evaluate_plan(evaluator, variants, plan, reference, damage_clips) -> dict[str, Any]:
    """WER of ``plan`` on the evaluation set (paired delta vs FP32, verdict) and its logit damage."""
    from workbench.compare.sensitivity import damage_of

    t0, c0 = time.perf_counter(), cpu_seconds()
    evaluator.variants = variants  # the FP32 transcripts stay; this plan is built with these ranges
    ev = evaluator.evaluate(plan)
    dmg = damage_of(reference, variants.logits(plan, damage_clips), damage_clips)
    return {
        "plan": plan.name,
        "utterances": ev.utterances,
        "passed": ev.passed,
        "reasons": ev.reasons,
        "wer": interval(ev.overall.wer),
        "delta": interval(ev.overall.delta),
        "per_condition": {
            c: {"wer": interval(g.wer), "delta": interval(g.delta)}
            for c, g in sorted(ev.per_condition.items())
        },
        "kl": dmg.overall.kl,
        "token_disagreement": dmg.overall.token_disagreement,
        "wall_s": round(time.perf_counter() - t0, 1),
        "cpu_s": round(cpu_seconds() - c0, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--methods",
        default=DEFAULT_METHODS,
        help="comma-separated: entropy, max, mse, percentile:P (default: %(default)s)",
    )
    parser.add_argument(
        "--search",
        default="none",
        help="methods (labels, e.g. entropy,percentile-99.9) to run the mixed search for; all|none",
    )
    parser.add_argument(
        "--attention-study",
        action="store_true",
        help="also evaluate INT8 with the attention-score MatMuls in FP16, and with softmax amax 1.0",
    )
    parser.add_argument("--calib-set", default="demo-calib")
    parser.add_argument("--eval-set", default="demo-eval")
    parser.add_argument(
        "--root",
        type=Path,
        default=Path("/tmp/calibration-methods/engines"),
        help="artifact root (one folder per method below it)",
    )
    parser.add_argument("--attention-layer", default="encoder.layers.5")
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    import onnx

    from workbench.artifacts import write_json_atomic
    from workbench.compare.groups import node_groups, plan_for
    from workbench.compare.sensitivity import VariantRunner
    from workbench.console import show_progress
    from workbench.evaluate.gates import GateConfig
    from workbench.evaluate.machine import machine_info, package_versions
    from workbench.jobs import calibrate
    from workbench.jobs.prepare import prepare
    from workbench.jobs.search import SearchSettings, run_search
    from workbench.model.folders import model_hash
    from workbench.quantize.plan import FP32, PrecisionPlan, quantizable_nodes
    from workbench.resources import demo_model_dir
    from workbench.speech.select import all_clips, clips_per_condition
    from workbench.speech.store import load_set

    methods = [parse_method(m.strip()) for m in args.methods.split(",") if m.strip()]
    labels = [label for label, _ in methods]
    search = set(labels if args.search == "all" else [] if args.search == "none" else args.search.split(","))
    unknown = search - set(labels)
    if unknown:
        parser.error(f"--search names methods not in --methods: {', '.join(sorted(unknown))}")
    calib, evalset = load_set(args.calib_set), load_set(args.eval_set)
    gates = GateConfig()
    started_all, cpu_all = time.perf_counter(), cpu_seconds()

    eval_clips = all_clips(evalset)
    damage_clips = clips_per_condition(calib, 2)  # the sensitivity ranking's clips
    evaluator = reference = model = None
    rows: list[dict[str, Any]] = []
    for label, spec in methods:
        print(f"== {label}", flush=True)
        t0, c0 = time.perf_counter(), cpu_seconds()
        result = calibrate.run(
            calibrate.CalibrateInputs(demo_model_dir(), str(calib.path), spec, engines=args.root / label)
        )
        row: dict[str, Any] = {
            "method": label,
            "spec": spec.params(),
            "cache": str(result.cache),
            "reused_cache": result.reused_cache,
            "calibrate_wall_s": round(time.perf_counter() - t0, 1),
            "calibrate_cpu_s": round(cpu_seconds() - c0, 1),
        }
        prepared = prepare(demo_model_dir(), str(calib.path), root=args.root / label, cache_path=result.cache)
        amax = prepared.cache.amax()
        if model is None:
            model = onnx.load(str(prepared.fp32_onnx))
        variants = VariantRunner(model, amax, args.threads)
        if evaluator is None:  # FP32 transcripts and logits once; the FP32 graph is the same for every method
            evaluator = dev_evaluator(variants, eval_clips, gates, args.resamples, prepared.description)
            reference = variants.logits(FP32, damage_clips)
        everywhere = evaluate_plan(
            evaluator, variants, PrecisionPlan(f"int8-{label}", "int8"), reference, damage_clips
        )
        row["int8_everywhere_damage"] = {
            "clips": len(damage_clips),
            "kl": everywhere.pop("kl"),
            "token_disagreement": everywhere.pop("token_disagreement"),
        }
        everywhere.pop("plan")
        row["eval"] = {"set": evalset.name, **everywhere}
        row["attention_amax"] = attention_amax(model, amax, args.attention_layer)
        if args.attention_study:
            groups = node_groups(model, "group")
            scores = {g.name for g in groups if g.name.endswith(".attention.scores")}
            fixed = {t: 1.0 for t in softmax_outputs(model) if t in amax}
            row["attention_study"] = {
                "attention_scores_fp16": {
                    "groups": sorted(scores),
                    **evaluate_plan(
                        evaluator,
                        variants,
                        plan_for(f"int8-{label}-scores-fp16", groups, "fp16", "int8", scores),
                        reference,
                        damage_clips,
                    ),
                },
                "softmax_amax_1": {
                    "tensors": len(fixed),
                    "replaced_amax": {t: amax[t] for t in fixed},
                    **evaluate_plan(
                        evaluator,
                        VariantRunner(model, {**amax, **fixed}, args.threads),
                        PrecisionPlan(f"int8-{label}-softmax-1", "int8"),
                        reference,
                        damage_clips,
                    ),
                },
            }
            for key, r in row["attention_study"].items():
                print(
                    f"   {key}: WER {r['wer']['estimate']:.2f} % delta {r['delta']['estimate']:+.2f} "
                    f"[{r['delta']['low']:+.2f}, {r['delta']['high']:+.2f}] {'PASS' if r['passed'] else 'FAIL'}; "
                    f"KL {r['kl']:.4f}",
                    flush=True,
                )
        if label in search:
            t0, c0 = time.perf_counter(), cpu_seconds()
            show_progress("   ")  # the search's progress lines, indented under the benchmark's own
            found = run_search(
                prepared,
                SearchSettings(
                    calib,
                    gates,
                    refine=0,
                    resamples=args.resamples,
                    signoff_set=evalset,
                    threads=args.threads,
                    progress=False,
                ),
            ).data
            best = found["found"]
            row["search"] = {
                "dev_set": calib.name,
                "refine": 0,
                "interval_widening": found["budget"]["interval_widening"],
                "evaluations": found["evaluations"],
                "one_at_a_time_evaluations": found["one_at_a_time_evaluations"],
                "int8_share": best["int8_share"] if best else None,
                "k_fp16_groups": best["k"] if best else None,
                "groups": len(found["groups"]),
                "ranking_top5": found["ranking"][:5],
                "candidates": [
                    {
                        "k": c["k"],
                        "int8_share": c["int8_share"],
                        "passed": c["passed"],
                        "judged_delta_high": c["judged_delta_high"],
                        "delta_points": (
                            {k: round(100 * c["delta"]["overall"][k], 3) for k in ("estimate", "low", "high")}
                            if c["delta"]
                            else None
                        ),
                    }
                    for c in found["candidates"]
                ],
                "wall_s": round(time.perf_counter() - t0, 1),
                "cpu_s": round(cpu_seconds() - c0, 1),
            }
        rows.append(row)
        e, d = row["eval"], row["int8_everywhere_damage"]
        print(
            f"   eval {e['set']}: WER {e['wer']['estimate']:.2f} % delta {e['delta']['estimate']:+.2f} "
            f"[{e['delta']['low']:+.2f}, {e['delta']['high']:+.2f}] {'PASS' if e['passed'] else 'FAIL'}; "
            f"KL {d['kl']:.4f}, tokens changed {100 * d['token_disagreement']:.1f} %",
            flush=True,
        )

    base = evaluator.baseline
    record = {
        "benchmark": "calibration methods (demo model, INT8 everywhere + mixed search)",
        "command": "python benchmarks/calibration_methods.py "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "model": str(demo_model_dir()),
        "model_hash": model_hash(demo_model_dir()),
        "calib_set": {
            "name": calib.name,
            "content_hash": calib.content_hash,
            "utterances": len(calib.utterances),
        },
        "eval_set": {
            "name": evalset.name,
            "content_hash": evalset.content_hash,
            "utterances": len(eval_clips),
        },
        "budget": gates.to_json(),
        "resamples": args.resamples,
        "quantizable_nodes": len(quantizable_nodes(model)),
        "fp32": {
            "wer": interval(base.overall.wer),
            "per_condition": {c: interval(g.wer) for c, g in sorted(base.per_condition.items())},
        },
        "methods": rows,
        "total_wall_s": round(time.perf_counter() - started_all, 1),
        "total_cpu_s": round(cpu_seconds() - cpu_all, 1),
        "machine": {**machine_info(), "loadavg_at_end": load_averages()},
        "packages": package_versions(),
        "note": "WER in percent, deltas in points vs FP32 (judged_delta_high: as the search records it) (paired speaker-block bootstrap, 95 %); shared machine: "
        "wall and CPU times are indicative only",
    }
    print(f"\nFP32 on {evalset.name}: WER {100 * base.overall.wer.estimate:.2f} %")
    print(
        f"{'method':<18} {'WER %':>6} {'delta':>6} {'95% CI':>16} {'verdict':>7} {'KL':>7} {'tok %':>6} "
        f"{'search INT8 %':>13} {'evals':>5} {'cal cpu s':>9}"
    )
    for r in rows:
        e, d, s = r["eval"], r["int8_everywhere_damage"], r.get("search")
        share = (
            f"{100 * s['int8_share']:.1f}" if s and s["int8_share"] is not None else ("none" if s else "-")
        )
        print(
            f"{r['method']:<18} {e['wer']['estimate']:>6.2f} {e['delta']['estimate']:>+6.2f} "
            f"[{e['delta']['low']:+.2f}, {e['delta']['high']:+.2f}] {'PASS' if e['passed'] else 'FAIL':>7} "
            f"{d['kl']:>7.4f} {100 * d['token_disagreement']:>6.1f} {share:>13} "
            f"{s['evaluations'] if s else '-':>5} {r['calibrate_cpu_s']:>9.1f}"
        )
    write_json_atomic(args.out, record)
    print(f"wrote {args.out} ({record['total_wall_s']} s wall, {record['total_cpu_s']} s CPU)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

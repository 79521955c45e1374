"""Does "passes on the dev set" predict "passes the sign-off"? The demo's search plans on every set, side by side.

After a demo run (``python -m workbench --workspace W demo``) this evaluates the search's candidate plans
(keep the k most sensitive groups in FP16, the rest INT8; the k values the search tried, or ``--k``) on
each set of the workspace: the search's dev set, the calibration set and the sign-off set. Each
evaluation is the search's own (``workbench.search.evaluator.DevEvaluator``: greedy CTC, paired
speaker-block bootstrap vs FP32) with the sign-off's resamples (2000, seed 0), no widening and no
margin, so the numbers on the sign-off set are the ones the sign-off report shows. It is an analysis
after the fact: the search itself never reads the sign-off set's audio.

Prints a table (WER delta and upper end of the 95 % interval per set, worst per-condition upper end
against its gate) and writes ``benchmarks/results/search_agreement.json`` with the machine, the load
average, the set hashes and the command. Several minutes on a 2-core machine (300 utterances per set
and plan).

    python benchmarks/search_agreement.py --workspace /tmp/demo
    python benchmarks/search_agreement.py --workspace /tmp/demo --k 0,8,16,34 --sets demo-dev,demo-eval
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import load_averages  # noqa: E402

RESULTS = HERE / "results" / "search_agreement.json"


def newest_search(workspace: Path) -> Path:
    found = sorted((workspace / "engines").glob("*/compare/search-*.json"), key=lambda p: p.stat().st_mtime)
    if not found:
        sys.exit(
            f"error: no search record under {workspace / 'engines'}; run python -m workbench --workspace "
            f"{workspace} demo first"
        )
    return found[-1]


def row_of(evaluation: Any) -> dict[str, Any]:
    """WER delta (points) with its interval, overall and per condition."""

    def points(interval: Any) -> dict[str, float]:
        return {
            "estimate": interval.estimate * 100,
            "low": interval.low * 100,
            "high": interval.high * 100,
            "blocks": interval.blocks,
        }

    return {
        "overall": points(evaluation.overall.delta),
        "per_condition": {c: points(g.delta) for c, g in sorted(evaluation.per_condition.items())},
        "passed_gates": evaluation.passed,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspace", type=Path, required=True, help="a workspace the demo ran in")
    parser.add_argument("--search", type=Path, help="search record (default: the newest under the workspace)")
    parser.add_argument("--k", help="comma-separated k values (default: those the search evaluated)")
    parser.add_argument(
        "--sets",
        help="comma-separated set names under WORKSPACE/calib_sets (default: the dev "
        "set, the calibration set and demo-eval)",
    )
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    import onnx

    from workbench.compare.groups import node_groups, plan_for
    from workbench.compare.sensitivity import VariantRunner
    from workbench.evaluate.gates import GateConfig
    from workbench.jobs.prepare import AnalysisInputs
    from workbench.quantize.plan import quantizable_nodes
    from workbench.search.evaluator import DevEvaluator
    from workbench.speech.select import all_clips
    from workbench.speech.store import load_set

    search_path = args.search or newest_search(args.workspace)
    search = json.loads(search_path.read_text())
    sets_root = args.workspace / "calib_sets"
    calib_name = next(
        p.name
        for p in sets_root.iterdir()
        if (p / "card.json").exists()
        and json.loads((p / "card.json").read_text())["content_hash"]
        == search["provenance"]["calibration_set"]
    )
    names = (
        args.sets.split(",")
        if args.sets
        else list(dict.fromkeys([search["dev_set"]["name"], calib_name, "demo-eval"]))
    )
    ks = (
        [int(k) for k in args.k.split(",")]
        if args.k
        else sorted({c["k"] for c in search["candidates"] if c["k"] is not None})
    )
    engines = search_path.parent.parent
    cache = next(engines.glob(f"calib-{search['provenance']['calibration_set'][:12]}-*.cache"))
    prepared = AnalysisInputs(
        calib_set=str(sets_root / calib_name),
        method=cache.stem.rsplit("-", 1)[-1],
        cache=cache,
        engines=args.workspace / "engines",
        calib_root=sets_root,
        progress=False,
    ).prepare()
    model = onnx.load(str(prepared.fp32_onnx))
    groups = node_groups(model, "group")
    nodes = quantizable_nodes(model)
    ranking = search["ranking"]
    variants = VariantRunner(
        model, prepared.cache.amax(), None, prepare=prepared.description.prepare, guard=prepared.guard
    )
    gates = GateConfig()
    load0, started = load_averages(), time.perf_counter()
    results: dict[str, Any] = {"sets": {}, "plans": []}
    evaluators = {}
    for name in names:
        speech_set = load_set(sets_root / name)
        results["sets"][name] = {
            "content_hash": speech_set.content_hash,
            "utterances": len(speech_set.utterances),
            "speakers": len({u.speaker for u in speech_set.utterances}),
        }
        evaluators[name] = DevEvaluator(
            variants,
            all_clips(speech_set),
            gates,
            resamples=args.resamples,
            seed=0,
            progress=False,
            model=prepared.description,
        )
    header = f"{'k':>3} {'INT8 %':>6} " + " ".join(f"{n + ' delta [upper]':>26}" for n in names)
    print(header)
    for k in ks:
        plan = plan_for(f"k{k}", groups, "fp16", "int8", set(ranking[:k]))
        per_set = {name: row_of(ev.evaluate(plan)) for name, ev in evaluators.items()}
        share = plan.with_guard(prepared.guard).int8_share(nodes)
        results["plans"].append({"k": k, "int8_share": share, "fp16_groups": ranking[:k], "by_set": per_set})
        cells = []
        for name in names:
            o = per_set[name]["overall"]
            worst = max(v["high"] for v in per_set[name]["per_condition"].values())
            cells.append(
                f"{o['estimate']:+.2f} [{o['high']:+.2f}] c{worst:+.2f}{'' if per_set[name]['passed_gates'] else '*'}"
            )
        print(f"{k:>3} {share * 100:6.1f} " + " ".join(f"{c:>26}" for c in cells), flush=True)
    print(
        "* fails the default gates (overall upper <= 0.3, every condition <= 1.0); c = worst condition upper"
    )
    results.update(
        {
            "format": "workbench-bench-search-agreement/1",
            "search_record": str(search_path),
            "resamples": args.resamples,
            "gates": gates.to_json(),
            "wall_s": round(time.perf_counter() - started, 1),
            "command": "python " + " ".join([sys.argv[0], *(argv if argv is not None else sys.argv[1:])]),
            "machine": {
                "cpus": os.cpu_count(),
                "platform": platform.platform(),
                "loadavg_at_start": load0,
                "loadavg_at_end": load_averages(),
            },
        }
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(results, indent=2) + "\n")
    tmp.replace(args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Full-size benchmark: Wav2Vec2-large (lv60 config, random weights) on clips up to 35 s, step by step.

The model is a look-alike of facebook/wav2vec2-large-960h-lv60-self: its published config, preprocessor
and tokenizer files with random weights (317 M parameters; nothing is downloaded). The speech sets are
spoken by the local TTS voices (WordNet sentences joined into clips of the requested lengths, the longest
35 s). Each step runs in its own child process, so its wall time and peak RSS (``wait4``'s ``ru_maxrss``)
are its own:

- ``model``: write the look-alike folder (``save_pretrained``), count parameters;
- ``sets``: the calibration and evaluation sets;
- ``calibrate``: ``python -m workbench calibrate`` (export, parity, one calibration pass, cache, INT8 Q/DQ);
- ``ort-fp32``: the yardstick, a plain ONNX Runtime FP32 pass (batch 1) over the same clips (calibration and
  evaluation sets) with the exported model;
- ``compare``: the sensitivity ranking restricted to one layer group (``rank_groups`` over one clip per
  condition: the FP32 reference, the all-FP32 and INT8-everywhere variants, then the group's variant);
- ``search``: the mixed-precision search's evaluator with two full evaluations on the calibration set (the
  search's default dev set): INT8 everywhere, and INT8 with the compared group kept in FP16 (plus the FP32
  transcripts every search makes once);
- ``signoff``: ``python -m workbench signoff`` on the FP32 and INT8 candidates without ``--model`` (the model
  is read from the candidates), latency at batch 1.

Prints a table and writes ``benchmarks/results/large_model.json`` with every step's wall time and peak RSS,
their ratios to the ``ort-fp32`` pass, the load average before and after each step and the machine. The
question it answers: does the workbench handle a full-size model and long clips on 2 cores / 24 GB, and at
what multiple of a plain FP32 pass?

    nice python benchmarks/large_model.py                                   # the full configuration
    nice python benchmarks/large_model.py --calib-seconds 6,35 --eval-seconds 35   # fewer clips
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "large_model.json"
CHECKPOINT = "facebook/wav2vec2-large-960h-lv60-self"
STEPS = ("model", "sets", "calibrate", "ort-fp32", "compare", "search", "signoff")


def seconds_list(text: str) -> list[float]:
    values = [float(v) for v in text.split(",") if v.strip()]
    if not values or min(values) <= 0 or max(values) > 35.0:
        raise argparse.ArgumentTypeError(f"give durations in (0, 35] seconds, comma separated, not {text!r}")
    return values


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--work",
        type=Path,
        default=Path("/tmp/workbench-large-model"),
        help="folder for the model, sets and artifacts (about 6 GB)",
    )
    parser.add_argument("--calib-seconds", type=seconds_list, default=seconds_list("6,12,20,35"))
    parser.add_argument("--eval-seconds", type=seconds_list, default=seconds_list("9,18,35"))
    parser.add_argument("--method", default="entropy", help="calibration method")
    parser.add_argument("--steps", default=",".join(STEPS), help="steps to run (comma separated)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--shrink",
        action="store_true",
        help="the look-alike shrunk to test size (a smoke test of this script, not the benchmark)",
    )
    parser.add_argument("--step", help=argparse.SUPPRESS)  # run one step (the child process)
    return parser.parse_args(argv)


# ---------------------------------------------------------------- the steps (each in a child process)


def paths(work: Path) -> dict[str, Path]:
    return {
        "model": work / "model",
        "calib": work / "sets" / "large-calib",
        "eval": work / "sets" / "large-eval",
        "engines": work / "engines",
        "report": work / "report",
        "state": work / "state.json",
    }


def state(work: Path, **update: Any) -> dict[str, Any]:
    """Facts the steps hand to each other (parameter count, file names), in ``state.json``."""
    path = paths(work)["state"]
    data = json.loads(path.read_text()) if path.is_file() else {}
    if update:
        data.update(update)
        path.write_text(json.dumps(data, indent=1))
    return data


def step_model(args: argparse.Namespace) -> None:
    import math

    from workbench.model.folders import weight_shapes
    from workbench.model.synthetic import save_lookalike

    folder = save_lookalike(paths(args.work)["model"], CHECKPOINT, shrink=args.shrink, seed=0)
    params = sum(math.prod(shape) for shape in weight_shapes(folder).values())
    state(args.work, parameters=params)
    print(f"{CHECKPOINT} look-alike: {params / 1e6:.1f} M parameters")


def long_clips(durations: list[float], split: str, seed: int) -> list[Any]:
    """Clips of about the given durations: WordNet sentences of ``split`` spoken by one voice each, joined."""
    import numpy as np

    from workbench.config import CONDITIONS
    from workbench.speech.records import Clip, Utterance
    from workbench.speech.text import sentence_pool
    from workbench.speech.tts import available_voices, synthesize

    voices = available_voices()
    if not voices:
        raise SystemExit("no TTS engine installed (./setup.sh installs espeak-ng)")
    sentences = list(sentence_pool()[split])
    rng = np.random.default_rng(seed)
    clips = []
    for i, target in enumerate(durations):
        voice = voices[int(rng.integers(len(voices)))]
        parts, texts, total = [], [], 0.0
        while total < target - 1.0:
            text = sentences[int(rng.integers(len(sentences)))]
            audio = synthesize(voice, text)
            if total + len(audio) / 16000 > target:
                if parts:
                    break
                audio = audio[: int(target * 16000)]
            parts += [audio, np.zeros(int(0.3 * 16000), np.float32)]
            texts.append(text)
            total += len(audio) / 16000 + 0.3
        audio = np.concatenate(parts)[: int(target * 16000)]
        condition = CONDITIONS[i % len(CONDITIONS)]
        utt = Utterance(
            id=f"{split}-{i:02d}",
            text=" ".join(texts),
            speaker=voice.speaker,
            voice=voice.base_id,
            accent=voice.accent,
            condition=condition,
            duration_s=round(len(audio) / 16000, 4),
            source="synthetic-long",
            bucket="long" if target >= 4 else "short",
        )
        clips.append(Clip(utt, audio.astype(np.float32)))
    return clips


def step_sets(args: argparse.Namespace) -> None:
    from workbench.speech.store import write_set

    p = paths(args.work)
    made = {}
    for key, split, durations, seed in (
        ("calib", "calib", args.calib_seconds, 0),
        ("eval", "eval", args.eval_seconds, 1),
    ):
        clips = long_clips(durations, split, seed)
        write_set(
            p[key], clips, {"how": "benchmarks/large_model.py: TTS sentences joined", "seed": seed}, [], {}
        )
        made[key] = [c.utterance.duration_s for c in clips]
        print(f"{p[key].name}: {made[key]} s")
    state(args.work, clip_seconds=made)


def cli(argv: list[str]) -> None:
    from workbench.cli import main

    code = main(argv)
    if code:
        raise SystemExit(code)


def step_calibrate(args: argparse.Namespace) -> None:
    p = paths(args.work)
    cli(
        [
            "calibrate",
            "--model",
            str(p["model"]),
            "--calib-set",
            str(p["calib"]),
            "--method",
            args.method,
            "--engines",
            str(p["engines"]),
        ]
    )


def fp32_onnx(work: Path) -> Path:
    found = sorted(paths(work)["engines"].glob("*/model.fp32.onnx"))
    if not found:
        raise SystemExit("no FP32 export yet: run the calibrate step first")
    return found[0]


def step_ort_fp32(args: argparse.Namespace) -> None:
    import onnxruntime as ort

    from workbench.backends.onnxruntime import session_options
    from workbench.model.description import description_of_onnx
    from workbench.speech.store import load_set

    p = paths(args.work)
    path = fp32_onnx(args.work)
    model = description_of_onnx(path)
    session = ort.InferenceSession(str(path), session_options(), providers=["CPUExecutionProvider"])
    seconds = 0.0
    for key in ("calib", "eval"):
        for _, audio in load_set(p[key]).iter_audio():
            session.run(["logits"], {"input_values": model.prepare(audio)[None]})
            seconds += len(audio) / 16000
    print(f"FP32 pass over {seconds:.1f} s of audio")


def _prepared(args: argparse.Namespace):
    from workbench.jobs.prepare import prepare

    p = paths(args.work)
    cache = sorted(p["engines"].glob(f"*/calib-*-{args.method}.cache"))
    if not cache:
        raise SystemExit("no calibration cache yet: run the calibrate step first")
    return prepare(p["model"], str(p["calib"]), args.method, root=p["engines"], cache_path=cache[0])


def last_ffn(groups: list[Any]) -> Any:
    """The group the compare step ranks and the search keeps in FP16: the last layer's feed-forward block."""
    return [g for g in groups if g.name.endswith(".feed_forward")][-1]


def step_compare(args: argparse.Namespace) -> None:
    import onnx

    from workbench.compare.groups import node_groups
    from workbench.compare.sensitivity import VariantRunner, rank_groups
    from workbench.speech.select import clips_per_condition

    prepared = _prepared(args)
    graph = onnx.load(str(prepared.fp32_onnx))
    group = [last_ffn(node_groups(graph))]
    ranked = rank_groups(
        VariantRunner(graph, prepared.cache.amax(), prepare=prepared.description.prepare),
        group,
        clips_per_condition(prepared.calib_set, 1),
        progress=False,
    )
    row = ranked.results[0]
    state(
        args.work,
        compare={
            "group": row.group.name,
            "nodes": len(row.group.nodes),
            "kl": row.damage.overall.kl,
            "int8_everywhere_kl": ranked.int8_everywhere.overall.kl,
            "clips": len(ranked.clips),
        },
    )
    print(
        f"{row.group.name}: KL {row.damage.overall.kl:.4g}; "
        f"INT8 everywhere KL {ranked.int8_everywhere.overall.kl:.4g}"
    )


def step_search(args: argparse.Namespace) -> None:
    import onnx

    from workbench.compare.groups import node_groups, plan_for
    from workbench.compare.sensitivity import VariantRunner
    from workbench.evaluate.gates import GateConfig
    from workbench.quantize.plan import PrecisionPlan
    from workbench.search.evaluator import DevEvaluator
    from workbench.speech.select import all_clips

    prepared = _prepared(args)
    graph = onnx.load(str(prepared.fp32_onnx))
    groups = node_groups(graph)
    variants = VariantRunner(graph, prepared.cache.amax(), prepare=prepared.description.prepare)
    evaluator = DevEvaluator(
        variants,
        all_clips(prepared.calib_set),
        GateConfig(),
        resamples=1000,
        progress=False,
        model=prepared.description,
    )
    results = {}
    kept = last_ffn(groups).name
    plans = (
        PrecisionPlan("int8-everywhere", "int8"),
        plan_for("int8-last-ffn-fp16", groups, "fp16", "int8", {kept}),
    )
    for plan in plans:
        evaluation = evaluator.evaluate(plan)
        results[plan.name] = {
            "wer": evaluation.overall.wer.estimate,
            "delta": evaluation.overall.delta.estimate,
            "passed": evaluation.passed,
        }
    state(
        args.work,
        search={
            "evaluations": evaluator.count,
            "plans": results,
            "baseline_wer": evaluator.baseline.overall.wer.estimate,
        },
    )
    print(f"{evaluator.count} evaluations: {results}")


def step_signoff(args: argparse.Namespace) -> None:
    p = paths(args.work)
    fp32 = fp32_onnx(args.work)
    int8 = sorted(fp32.parent.glob(f"model.int8-{args.method}-*.onnx"))[0]
    cli(
        [
            "signoff",
            "--candidate",
            f"fp32={fp32}",
            "--candidate",
            f"int8={int8}",
            "--eval-set",
            str(p["eval"]),
            "--batch-sizes",
            "1",
            "--warmup",
            "1",
            "--repeats",
            "3",
            "--resamples",
            "1000",
            "--out",
            str(p["report"]),
            "--replace",  # a rerun of the step replaces its report
        ]
    )


STEP_FUNCTIONS = {
    "model": step_model,
    "sets": step_sets,
    "calibrate": step_calibrate,
    "ort-fp32": step_ort_fp32,
    "compare": step_compare,
    "search": step_search,
    "signoff": step_signoff,
}


# ---------------------------------------------------------------- the parent: one child per step, measured


def loadavg() -> list[float]:
    return [float(v) for v in Path("/proc/loadavg").read_text().split()[:3]]


def run_step(name: str, argv: list[str]) -> dict[str, Any]:
    """Run one step in a child process; its wall time, peak RSS and the load average around it."""
    before = loadavg()
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), *argv, "--step", name])
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    return {
        "step": name,
        "exit": code,
        "wall_s": round(wall, 1),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
        "loadavg_before": before,
        "loadavg_after": loadavg(),
    }


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse(argv)
    if args.step:
        STEP_FUNCTIONS[args.step](args)
        return 0
    steps = [s.strip() for s in args.steps.split(",") if s.strip()]
    unknown = set(steps) - set(STEPS)
    if unknown:
        raise SystemExit(f"unknown steps {sorted(unknown)}; choose from {', '.join(STEPS)}")
    args.work.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in steps:
        print(f"== {name}", flush=True)
        row = run_step(name, argv)
        rows.append(row)
        print(
            f"   {row['wall_s']:.0f} s wall, peak RSS {row['peak_rss_mb']:.0f} MB, exit {row['exit']}, load "
            f"{row['loadavg_before'][0]:.1f} -> {row['loadavg_after'][0]:.1f}",
            flush=True,
        )
        write_results(args, rows, steps, table=False)  # after every step: a run stopped later keeps these
        if row["exit"] != 0:
            break
    write_results(args, rows, steps)
    return 0 if all(r["exit"] == 0 for r in rows) else 1


def write_results(
    args: argparse.Namespace, rows: list[dict[str, Any]], planned: list[str], table: bool = True
) -> None:
    """The results JSON of the steps run so far (``complete`` once every planned step succeeded); the table."""
    from workbench.artifacts import write_json_atomic
    from workbench.evaluate.machine import machine_info, package_versions

    base = next((r for r in rows if r["step"] == "ort-fp32" and r["exit"] == 0), None)
    if base is None and args.out.is_file():  # a partial rerun: keep the yardstick measured before
        base = next(
            (r for r in json.loads(args.out.read_text()).get("steps", []) if r["step"] == "ort-fp32"), None
        )
    for row in rows:
        if base is not None:
            row["wall_vs_ort_fp32"] = round(row["wall_s"] / base["wall_s"], 2)
            row["cpu_vs_ort_fp32"] = round(row["cpu_s"] / base["cpu_s"], 2)
            row["peak_rss_vs_ort_fp32"] = round(row["peak_rss_mb"] / base["peak_rss_mb"], 2)
    facts = state(args.work)
    if table:
        print(
            f"\n{'step':<10} {'wall s':>8} {'x FP32':>7} {'CPU s':>8} {'x FP32':>7} {'peak RSS MB':>12} "
            f"{'x FP32':>7} {'load 1m':>12}"
        )
        for r in rows:
            print(
                f"{r['step']:<10} {r['wall_s']:>8.0f} {r.get('wall_vs_ort_fp32', float('nan')):>7.2f} "
                f"{r['cpu_s']:>8.0f} {r.get('cpu_vs_ort_fp32', float('nan')):>7.2f} "
                f"{r['peak_rss_mb']:>12.0f} {r.get('peak_rss_vs_ort_fp32', float('nan')):>7.2f} "
                f"{r['loadavg_before'][0]:>5.1f}->{r['loadavg_after'][0]:<5.1f}"
            )
    write_json_atomic(
        args.out,
        {
            "benchmark": "large_model",
            "checkpoint": CHECKPOINT,
            "parameters": facts.get("parameters"),
            "weights": "random (look-alike: published config, preprocessor and tokenizer files)",
            "calib_seconds": args.calib_seconds,
            "eval_seconds": args.eval_seconds,
            "method": args.method,
            "clip_seconds": facts.get("clip_seconds"),
            "shrunk": args.shrink,
            "complete": [r["step"] for r in rows if r["exit"] == 0] == planned,
            "planned_steps": planned,
            "steps": rows,
            "compare": facts.get("compare"),
            "search": facts.get("search"),
            "command": "python benchmarks/large_model.py " + " ".join(sys.argv[1:]),
            "note": "wall times are under the load shown (a shared 2-core machine); peak RSS is per step process",
            "machine": machine_info(),
            "packages": package_versions(),
        },
    )
    if table:
        print(f"wrote {args.out}")


if __name__ == "__main__":
    sys.exit(main())

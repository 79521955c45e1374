"""Anchors: what ONNX Runtime and NVIDIA ModelOpt give next to the workbench on the same model, judged alike.

On the demo model (embedded; ``--model demo``, the default) or the random-weight Wav2Vec2-base (``--model base``:
hidden 768, 12 layers, ``workbench.model.synthetic``, seed 0) and the demo's synthetic sets (``demo-calib`` /
``demo-eval``, built once into ``--work``), every tool calibrates on the same clips of ``demo-calib``, each in its
own process (its wall time and peak RSS are its own; ``anchors_bench/tools.py`` says how the clips are fed):

- ONNX Runtime ``quantize_static``: QDQ, per-channel, symmetric INT8, MinMax / Entropy / Percentile, every
  other option at its default; clips fed at their own lengths one per batch, and where a method fails on
  that (the error is recorded) again with every clip cropped to the shortest one;
- NVIDIA ModelOpt ONNX PTQ ``quantize(quantize_mode="int8")`` with its defaults (entropy; the rest of the graph
  FP16) and with ``high_precision_dtype="fp32"`` (the rest kept FP32), installed into its own venv
  (``--venv``, made here: ``anchors_bench/venv.py``) and run by that venv's python; its ``calibration_data``
  is one [clips, samples] array, so the clips are cropped to the shortest one; skipped with the reason where
  it cannot install or run;
- the workbench: ``calibrate`` (INT8 everywhere) per method (``--methods``: entropy, max, percentile 99.99 and
  99.9, mse), and ``search`` (the mixed INT8/FP16 plan) for the methods in ``--search`` (demo model only).

Demo model: one workbench sign-off judges FP32 and every quantized model on ``demo-eval``: WER overall and per
condition with paired bootstrap intervals vs FP32, the gates, latency on ONNX Runtime's CPU backend. Writes
``benchmarks/results/anchors.json`` and the sign-off report under ``<work>/reports/anchors-demo/`` with an
``anchors.json`` beside it, which the dashboard's Trade-off page reads to mark the anchor points
(``streamlit run app.py`` with the workspace ``--work``).

Base model: random weights recognise nothing (WER 100 % for every model), so each quantized model is judged by
its agreement with the FP32 model's own output on a few eval clips (``anchors_bench/agreement.py``: argmax
tokens, greedy transcripts, logit error); 5 calibration and 4 eval clips per condition unless told; its jobs
and models live under ``<work>/base``; writes ``benchmarks/results/anchors_base.json``.

Both print a table and record the load average before and after.

    nice python benchmarks/anchors.py --work /tmp/anchors            # everything (venv install included)
    nice python benchmarks/anchors.py --work /tmp/anchors --model base
    python benchmarks/anchors.py --work /tmp/anchors --no-modelopt --methods percentile:99.99 --search none
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from anchors_bench.agreement import WHY, agreement_rows, agreement_table, judge  # noqa: E402
from anchors_bench.rows import anchor_rows, skipped_run, table_lines  # noqa: E402
from anchors_bench.tools import FEEDS, ORT_METHODS  # noqa: E402
from childproc import run_json_child  # noqa: E402
from common import load_averages  # noqa: E402

RESULTS = HERE / "results" / "anchors.json"
RESULTS_BASE = HERE / "results" / "anchors_base.json"
BASE_CLIPS = (5, 4)  # base model: calibration / eval clips per condition (3 conditions): 15 / 12 clips
REPORT_NAME = "anchors-demo"
MODELOPT_SETTINGS = {
    "modelopt-default": ("defaults (entropy, rest of the graph FP16)", {}),
    "modelopt-fp32-rest": (
        "defaults + high_precision_dtype='fp32' (rest of the graph FP32)",
        {"high_precision_dtype": "fp32"},
    ),
}
FEED_NOTES = {
    "natural": "every calibration clip at its own length, one clip per batch ([1, samples])",
    "cropped": "every calibration clip cropped to the set's shortest clip, then normalised ([1, L] per batch; "
    "ModelOpt: one [clips, L] array as calibration_data)",
}


def build_sets(work: Path) -> tuple[Any, Any]:
    """demo-calib / demo-eval under ``<work>/calib_sets`` (the demo's default build), made once, loaded after."""
    from workbench.config import SetBuildConfig
    from workbench.errors import WorkbenchError
    from workbench.jobs import sets
    from workbench.speech.store import load_set

    root = work / "calib_sets"
    try:
        return load_set("demo-calib", root=root), load_set("demo-eval", root=root)
    except WorkbenchError:
        built = sets.run(sets.SetsInputs(SetBuildConfig(), root=root)).built
        return built.calib, built.eval


def subset(speech_set, per_condition: int | None, root: Path):
    """``speech_set`` itself, or ``<name>-<n>pc``: its first ``per_condition`` utterances of every condition,
    stored once under ``root`` (a smaller set for a loaded machine; every tool still sees the same clips)."""
    from workbench.errors import WorkbenchError
    from workbench.speech.select import clips_per_condition
    from workbench.speech.store import load_set, write_set

    if not per_condition:
        return speech_set
    name = f"{speech_set.name}-{per_condition}pc"
    try:
        return load_set(name, root=root)
    except WorkbenchError:
        made = {
            "how": f"the first {per_condition} utterances per condition of {speech_set.name}",
            "from": speech_set.content_hash,
        }
        return write_set(root / name, clips_per_condition(speech_set, per_condition), made, [], {})


def write_feeds(calib, folder: Path) -> dict[str, Any]:
    """natural.npz (every clip normalised, own length) and cropped.npy (cropped to the shortest, normalised)."""
    from workbench.model.features import normalise_audio

    folder.mkdir(parents=True, exist_ok=True)
    clips = [np.asarray(a, dtype=np.float32) for _, a in calib.iter_audio()]
    shortest = min(len(c) for c in clips)
    if not (folder / "natural.npz").exists():
        np.savez(folder / "natural.tmp.npz", **{f"c{i:05d}": normalise_audio(c) for i, c in enumerate(clips)})
        os.replace(folder / "natural.tmp.npz", folder / "natural.npz")
    if not (folder / "cropped.npy").exists():
        np.save(folder / "cropped.tmp.npy", np.stack([normalise_audio(c[:shortest]) for c in clips]))
        os.replace(folder / "cropped.tmp.npy", folder / "cropped.npy")
    seconds = [len(c) / 16_000 for c in clips]
    return {
        "clips": len(clips),
        "shortest_s": round(min(seconds), 3),
        "longest_s": round(max(seconds), 3),
        "total_s": round(sum(seconds), 1),
        "cropped_to_s": round(shortest / 16_000, 3),
    }


def run_job(spec: dict[str, Any], work: Path, args, python: str = sys.executable) -> dict[str, Any]:
    """One child process for ``spec``; its result (or error) with its kind and setting."""
    path = work / "specs" / f"{spec['name']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(spec, indent=1))
    print(f"-- {spec['name']}: {spec['setting']}", flush=True)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    }
    out = run_json_child(
        [python, str(Path(__file__).resolve()), "--child", str(path)],
        spec["name"],
        args.timeout,
        args.memory_cap_gb,
        env=env,
    )
    out.update(kind=spec["kind"], setting=spec["setting"])
    print(
        f"   {'error: ' + out['error'] if 'error' in out else 'done in {:.1f} s, peak RSS {:.0f} MB'.format(out['wall_s'], out['peak_rss_mb'])}",
        flush=True,
    )
    return out


def fresh_root(root: Path, fp32: Path) -> Path:
    """``root`` holding only a copy of the FP32 export (no cache, no analyses): the calibration is timed fresh."""
    target = root / fp32.parent.name
    if root.exists():
        shutil.rmtree(root)
    target.mkdir(parents=True)
    shutil.copyfile(fp32, target / fp32.name)
    return root


def workbench_runs(args, work: Path, calib, evalset, fp32: Path) -> list[dict[str, Any]]:
    from calibration_methods import parse_method

    runs = []
    methods = [parse_method(m.strip()) for m in args.methods.split(",") if m.strip()]
    search = {s.strip() for s in args.search.split(",") if s.strip() and s.strip() != "none"}
    for label, spec in methods:
        root = fresh_root(work / "wb" / label, fp32)
        common = {
            "model": str(args.model_dir),
            "calib_set": str(calib.path),
            "engines": str(root),
            "calib_root": str(args.sets_root),
        }
        done = run_job(
            {
                "name": f"wb-{label}",
                "kind": "workbench",
                "setting": f"calibrate {label}, INT8 everywhere",
                "method": spec.name,
                "percentile": spec.percentile if spec.name == "percentile" else None,
                "onnx": str(work / "models" / f"wb-{label}.onnx"),
                **common,
            },
            work,
            args,
        )
        runs.append(done)
        if label in search and "error" not in done:
            runs.append(
                run_job(
                    {
                        "name": f"wb-mixed-{label}",
                        "kind": "search",
                        "setting": f"search on {label} ranges (dev set {calib.name}, bisect, no refinement, "
                        "the default margin)",
                        "method": spec.name,
                        "cache": done["cache"],
                        "eval_set": str(evalset.path),
                        "resamples": args.resamples,
                        "onnx": str(work / "models" / f"wb-mixed-{label}.onnx"),
                        **common,
                    },
                    work,
                    args,
                )
            )
    return runs


def ort_runs(args, work: Path, fp32: Path) -> list[dict[str, Any]]:
    runs = []
    for method in [m.strip() for m in args.ort_methods.split(",") if m.strip()]:
        for feed in FEEDS:
            name = f"ort-{method.lower()}" + ("" if feed == "natural" else f"-{feed}")
            done = run_job(
                {
                    "name": name,
                    "kind": "ort",
                    "setting": f"quantize_static {method}, {feed} clips",
                    "method": method,
                    "feed": feed,
                    "fp32": str(fp32),
                    "data": str(args.data),
                    "onnx": str(work / "models" / f"{name}.onnx"),
                },
                work,
                args,
            )
            runs.append(done)
            if "error" not in done or not args.retry_cropped:
                break  # the cropped feed only where clips at their own lengths failed
    return runs


def modelopt_runs(args, work: Path, fp32: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from anchors_bench.venv import REQUIREMENT, ensure_venv

    if not args.modelopt:
        return [skipped_run(n, "modelopt", s, "--no-modelopt") for n, (s, _) in MODELOPT_SETTINGS.items()], {}
    print(f"-- ModelOpt venv {args.venv}: {REQUIREMENT} ...", flush=True)
    venv = ensure_venv(args.venv, pip_args=tuple(args.pip_arg or ()))
    info = {
        "venv": str(args.venv),
        "requirement": REQUIREMENT,
        "versions": venv.versions,
        "install_s": venv.installed_s,
        "reason": venv.reason,
    }
    if venv.python is None:
        print(f"   skipped: {venv.reason}", flush=True)
        return [skipped_run(n, "modelopt", s, venv.reason) for n, (s, _) in MODELOPT_SETTINGS.items()], info
    runs = [
        run_job(
            {
                "name": name,
                "kind": "modelopt",
                "setting": setting,
                "options": options,
                "fp32": str(fp32),
                "data": str(args.data),
                "onnx": str(work / "models" / f"{name}.onnx"),
            },
            work,
            args,
            python=str(venv.python),
        )
        for name, (setting, options) in MODELOPT_SETTINGS.items()
    ]
    return runs, info


def made_models(runs: list[dict[str, Any]]) -> list[tuple[str, Path]]:
    """(name, ONNX) of every run that wrote its quantized model."""
    return [
        (r["job"], Path(r["onnx"]))
        for r in runs
        if "error" not in r and "skipped" not in r and r.get("onnx") and Path(r["onnx"]).is_file()
    ]


def signoff(args, work: Path, calib, evalset, fp32: Path, runs: list[dict[str, Any]]):
    from workbench.console import show_progress
    from workbench.evaluate.latency import LatencyConfig
    from workbench.jobs import signoff as job

    batches = tuple(int(b) for b in args.latency_batches.split(","))
    inputs = job.SignoffInputs(
        eval_set=str(evalset.path),
        out_dir=work / "reports" / REPORT_NAME,
        candidates=[("fp32", fp32), *made_models(runs)],
        model=args.model_dir,
        calib_set=str(calib.path),
        engines=work / "engines",
        calib_root=args.sets_root,
        resamples=args.resamples,
        latency=LatencyConfig(batches, warmup=2, repeats=args.latency_repeats),
        profile_min_s=args.profile.min_s if args.profile else None,
        profile_max_s=args.profile.max_s if args.profile else None,
    )
    show_progress("   ")  # the sign-off's progress lines, indented under the benchmark's own
    return job.run(inputs)


def judge_demo(args, work: Path, calib, evalset, fp32: Path, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The workbench's sign-off of FP32 and every model on the eval set -> rows, table, the sidecar the dashboard
    reads; the result fields this judging adds."""
    from workbench.artifacts import write_json_atomic
    from workbench.dashboard.data.anchors import ANCHORS_NAME, anchors_sidecar

    result = signoff(args, work, calib, evalset, fp32, runs)
    record = result.record
    rows = anchor_rows(record, [{"job": "fp32", "kind": "fp32", "setting": "FP32 export"}, *runs])
    tools = {r["candidate"]: r["tool"] for r in rows if r["status"] == "judged"}
    write_json_atomic(
        result.paths["record"].parent / ANCHORS_NAME,
        anchors_sidecar(tools, {r["candidate"]: r["setting"] for r in rows}, "benchmarks/anchors.py"),
    )
    print(f"recommendation: {record['recommendation']}")
    return {
        "judged_by": "the workbench's sign-off on the eval set",
        "gates": record["gates"],
        "recommendation": record["recommendation"],
        "report": str(result.paths["record"].parent),
        "rows": rows,
        "table": table_lines(rows),
        "note": "WER in percent, deltas in points vs FP32 (paired speaker-block bootstrap, 95 %); latency: mean "
        "p50 ms over the duration buckets at batch 1, ONNX Runtime CPU, 2 shared cores; calibration wall "
        "and peak RSS per tool process. Measured on a machine shared with other jobs: see the load.",
    }


def judge_base(args, evalset, fp32: Path, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Random weights: every model against the FP32 model's own output on the eval clips (``agreement.py``)."""
    from workbench.model.description import describe_model

    clips = [audio for _, audio in evalset.iter_audio()]
    judged = judge(
        fp32,
        dict(made_models(runs)),
        clips,
        describe_model(args.model_dir),
        log=lambda m: print(m, flush=True),
    )
    rows = agreement_rows(judged, [{"job": "fp32", "kind": "fp32", "setting": "FP32 export"}, *runs])
    return {
        "judged_by": WHY,
        "rows": rows,
        "table": agreement_table(rows),
        "note": "token / transcript agreement in percent of frames / clips equal to FP32's (argmax tokens, greedy "
        "CTC transcripts); logit differences in logit units against FP32's logits; ms per clip: ONNX "
        "Runtime CPU batch 1 on 2 shared cores (indicative); calibration wall and peak RSS per tool "
        "process. Measured on a machine shared with other jobs: see the load.",
    }


def model_folder(args, work: Path) -> Path:
    """The demo model, or the random base-size model (``workbench.model.synthetic``, seed 0) saved once in the
    Hugging Face layout under ``<work>/model``."""
    from workbench.model.synthetic import save_random_wav2vec2
    from workbench.resources import demo_model_dir

    if args.model == "demo":
        return demo_model_dir()
    folder = work / "model"
    if not (folder / "config.json").is_file():
        partial = work / "model.partial"
        shutil.rmtree(partial, ignore_errors=True)
        save_random_wav2vec2(partial, args.model, seed=0)
        os.replace(partial, folder)
    return folder


def main(argv: list[str] | None = None) -> int:
    from calibration_methods import DEFAULT_METHODS

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--work", type=Path, default=Path("/tmp/anchors"), help="sets, models, venv, report")
    parser.add_argument(
        "--model",
        choices=("demo", "base"),
        default="demo",
        help="demo: the embedded model, judged by the sign-off; base: the random-weight "
        "Wav2Vec2-base, judged by agreement with its FP32 output (work under <work>/base)",
    )
    parser.add_argument(
        "--methods", default=DEFAULT_METHODS, help="the workbench's methods (default: %(default)s)"
    )
    parser.add_argument(
        "--search",
        default=None,
        help="method labels to run the mixed search for (comma-separated, or none; default: "
        "percentile-99.99 for the demo model, none for base: its WER says nothing)",
    )
    parser.add_argument(
        "--calib-per-condition",
        type=int,
        default=None,
        help=f"calibrate on the first N clips per condition of demo-calib (default: all; base: "
        f"{BASE_CLIPS[0]})",
    )
    parser.add_argument(
        "--eval-per-condition",
        type=int,
        default=None,
        help=f"judge on the first N clips per condition of demo-eval (default: all; base: {BASE_CLIPS[1]})",
    )
    parser.add_argument("--ort-methods", default=",".join(ORT_METHODS))
    parser.add_argument(
        "--no-retry-cropped",
        dest="retry_cropped",
        action="store_false",
        help="do not rerun a failed ONNX Runtime method on cropped clips",
    )
    parser.add_argument("--no-modelopt", dest="modelopt", action="store_false")
    parser.add_argument(
        "--venv", type=Path, default=None, help="ModelOpt's venv (default: <work>/modelopt-venv)"
    )
    parser.add_argument(
        "--pip-arg", action="append", help="extra argument for ModelOpt's pip install (repeatable)"
    )
    parser.add_argument("--latency-batches", default="1")
    parser.add_argument("--latency-repeats", type=int, default=10)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--timeout", type=float, default=1800.0, help="per calibration job, seconds")
    parser.add_argument(
        "--memory-cap-gb", type=float, default=10.0, help="address-space cap per job (0: none)"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help=f"result JSON (default: {RESULTS.name}, base: {RESULTS_BASE.name} in benchmarks/results)",
    )
    parser.add_argument(
        "--judge-only",
        action="store_true",
        help="skip the calibrations: judge the models of the last run in --work (its runs.json)",
    )
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        from anchors_bench.tools import child

        child(args.child)
        return 0
    base = args.model != "demo"
    if base:
        if args.search not in (None, "none"):
            parser.error(
                "--search needs real weights (the search is judged by WER); with --model base leave it out"
            )
        args.calib_per_condition = args.calib_per_condition or BASE_CLIPS[0]
        args.eval_per_condition = args.eval_per_condition or BASE_CLIPS[1]
    args.search = args.search or ("none" if base else "percentile-99.99")
    args.out = args.out or (RESULTS_BASE if base else RESULTS)

    from workbench.artifacts import write_json_atomic
    from workbench.evaluate.machine import machine_info, package_versions
    from workbench.jobs.calibrate import export_or_reuse
    from workbench.model.description import describe_model
    from workbench.model.folders import model_hash
    from workbench.speech.profiles import deployment_profile

    root = args.work.resolve()
    work = root / "base" if base else root  # the base model's jobs, models and runs apart from the demo's
    args.venv = (args.venv or root / "modelopt-venv").resolve()
    load_before, started = load_averages(), time.perf_counter()
    args.sets_root = root / "calib_sets"
    calib, evalset = build_sets(root)
    args.profile = deployment_profile(calib.card, [u.duration_s for u in calib.utterances])[
        0
    ]  # the whole set's
    calib = subset(calib, args.calib_per_condition, args.sets_root)
    evalset = subset(evalset, args.eval_per_condition, args.sets_root)
    args.data = work / "data" / calib.name
    feeds = write_feeds(calib, args.data)
    (work / "models").mkdir(parents=True, exist_ok=True)
    args.model_dir = model_folder(args, work)
    fp32 = export_or_reuse(describe_model(args.model_dir), work / "engines")
    command = "python benchmarks/anchors.py " + " ".join(argv if argv is not None else sys.argv[1:])
    runs_file = work / "runs.json"
    if args.judge_only:  # the calibrations of an earlier run (its models under <work>/models), judged again
        saved = json.loads(runs_file.read_text())
        runs, modelopt, calibrated_by = saved["runs"], saved["modelopt"], saved.get("command")
    else:
        runs = workbench_runs(args, work, calib, evalset, fp32) + ort_runs(args, work, fp32)
        more, modelopt = modelopt_runs(args, work, fp32)
        runs += more
        calibrated_by = command
        write_json_atomic(runs_file, {"runs": runs, "modelopt": modelopt, "command": command})
    print(f"-- judging every model written, on {evalset.name}", flush=True)
    judged = (
        judge_base(args, evalset, fp32, runs) if base else judge_demo(args, work, calib, evalset, fp32, runs)
    )
    load_after = load_averages()
    print("\n" + "\n".join(judged["table"]))
    print(f"\nload average before {load_before}, after {load_after} (shared machine: times are indicative)")
    subject = "the random-weight Wav2Vec2-base (hidden 768, 12 layers)" if base else "the demo model"
    out = {
        "benchmark": f"anchors: ONNX Runtime and ModelOpt vs the workbench on {subject}",
        "command": command,
        "calibration_command": calibrated_by,
        "model": str(args.model_dir),
        "model_hash": model_hash(args.model_dir),
        "calib_set": {"name": calib.name, "content_hash": calib.content_hash, **feeds},
        "eval_set": {
            "name": evalset.name,
            "content_hash": evalset.content_hash,
            "utterances": len(evalset.utterances),
        },
        "feeds": FEED_NOTES,
        "modelopt": modelopt,
        **judged,
        "runs": runs,
        "load_average_before": load_before,
        "load_average_after": load_after,
        "total_wall_s": round(time.perf_counter() - started, 1),
        "machine": machine_info(),
        "packages": package_versions(),
    }
    write_json_atomic(args.out, out)
    print(f"wrote {args.out}" + (f" and {judged['report']}" if "report" in judged else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Serving capacity per candidate: p50/p95/p99 latency against offered load, and the highest load meeting a p99 target.

For each model (``--models``: ``demo``, the shipped demo model; ``base``, a Wav2Vec2-base-size model with random
weights, nothing downloaded) the FP32 ONNX export and, on ONNX Runtime CPU, ONNX Runtime's dynamic INT8 of it, on
ONNX Runtime CUDA its FP16 variant (every node FP16, no overflow guard) (``--candidate NAME=PATH`` replaces them with ONNX files of your own, e.g. an FP16 or mixed candidate for
``ort-cuda``) are served through the sign-off's serving benchmark (``workbench.serving``): Poisson arrivals of
fixed-length requests (``--request-s``, default 10 s; clips of ``--eval-set`` cropped or repeated, else
speech-like synthetic audio) in front of the dynamic batcher (``--max-batch``, ``--max-queue-delay-ms``,
``--instances``), over the same offered loads for every candidate (``--rates``, default multiples of the fastest
candidate's batch-1 throughput). The sweep runs ``--repeats`` times with different seeds (fresh sessions each
time: the load time is measured every time); capacity is reported as the median with the lowest and highest
repeat. With ``--eval-set`` every candidate also transcribes the set (batch 1) and reports its WER delta to FP32.

    python benchmarks/serving.py --backend ort-cpu --models demo --p99-ms 200 --repeats 3
    python benchmarks/serving.py --backend ort-cuda --models demo,base --p99-ms 200 --max-batch 32 --repeats 3

Prints a table and writes ``benchmarks/results/serving_<backend>.json`` (``--out`` to change) with the host's CPU
model and instruction-set flags, the load average before and after and the cores other processes used: capacity
is only meaningful on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from common import MachineCpu, load_averages  # noqa: E402

MODELS = ("demo", "base")
BACKENDS = ("ort-cpu", "ort-cuda")
# instruction-set flags that decide ONNX Runtime's CPU kernels (FP32 GEMMs, INT8 U8S8 / VNNI paths)
CPU_FLAGS = ("avx", "avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni", "amx_int8", "amx_bf16")


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=BACKENDS, default="ort-cpu")
    parser.add_argument("--models", default="demo", help="comma separated: demo, base")
    parser.add_argument("--candidate", action="append", default=[], help="NAME=PATH.onnx (the first is FP32)")
    parser.add_argument(
        "--eval-set", help="a stored speech set: request audio, and the WER delta per candidate"
    )
    parser.add_argument("--root", type=Path, default=Path("calib_sets"), help="where set names are looked up")
    parser.add_argument("--limit", type=int, help="only the first N utterances of --eval-set")
    parser.add_argument(
        "--request-s", type=float, default=10.0, help="seconds of audio per request (0: clip lengths)"
    )
    parser.add_argument("--p99-ms", type=float, default=200.0)
    parser.add_argument("--max-batch", type=int, default=8)
    parser.add_argument("--max-queue-delay-ms", type=float, default=5.0)
    parser.add_argument("--preferred-batch", default="", help="comma separated preferred batch sizes")
    parser.add_argument("--instances", type=int, default=1)
    parser.add_argument("--rates", default="", help="comma separated offered loads (QPS); default: automatic")
    parser.add_argument("--seconds-per-rate", type=float, default=10.0)
    parser.add_argument("--budget-s", type=float, default=120.0, help="per candidate and repeat")
    parser.add_argument("--memory-limit-mb", type=float)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, help="ONNX Runtime intra-op threads")
    parser.add_argument("--work", type=Path, default=Path("/tmp/workbench-serving"), help="exports go here")
    parser.add_argument(
        "--out", type=Path, help="results JSON (default benchmarks/results/serving_<backend>.json)"
    )
    args = parser.parse_args(argv)
    args.models = [m for m in args.models.split(",") if m]
    unknown = [m for m in args.models if m not in MODELS]
    if unknown:
        parser.error(f"--models: unknown {unknown}; choose from {', '.join(MODELS)}")
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    return args


def cpu_flags() -> list[str]:
    """The instruction-set flags of ``CPU_FLAGS`` this host has (Linux ``/proc/cpuinfo``; [] elsewhere)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return []
    line = next((row for row in text.splitlines() if row.startswith("flags")), "")
    have = set(line.split(":", 1)[-1].split())
    return [f for f in CPU_FLAGS if f in have]


def candidates_of(args: argparse.Namespace, name: str) -> tuple[list[tuple[str, Path]], Any]:
    """(name, ONNX) per candidate of model ``name`` and its description."""
    from batched_eval import export

    from workbench.model.description import description_of_onnx

    if args.candidate:
        pairs = [(n, Path(p)) for n, p in (c.split("=", 1) for c in args.candidate)]
        return pairs, description_of_onnx(pairs[0][1])
    onnx_path, description = export(name, args.work)
    pairs = [("fp32", onnx_path)]
    if args.backend == "ort-cuda":  # FP16 everywhere (no overflow guard: its WER delta says whether it holds)
        from workbench.quantize.plan import FP16
        from workbench.quantize.qdq import build_variant

        fp16 = args.work / f"{name}.fp16.onnx"
        if not fp16.is_file():
            build_variant(onnx_path, {}, FP16, fp16, with_plan=True)
        pairs.append(("fp16", fp16))
    if args.backend == "ort-cpu":
        from workbench.quantize.dynamic import build_dynamic

        dynamic = args.work / f"{name}.int8-dynamic.onnx"
        if not dynamic.is_file():
            build_dynamic(onnx_path, dynamic, "s8", "benchmark")
        pairs.append(("int8-dynamic", dynamic))
    return pairs, description


def clips_of(args: argparse.Namespace) -> tuple[list[Any], list[str] | None, dict[str, Any] | None]:
    """Request audio, the references (with --eval-set) and the set's identity."""
    import numpy as np

    if args.eval_set:
        from workbench.speech.store import load_set

        speech_set = load_set(args.eval_set, root=args.root)
        utts = speech_set.utterances[: args.limit] if args.limit else speech_set.utterances
        info = {"name": speech_set.name, "content_hash": speech_set.content_hash, "utterances": len(utts)}
        return [speech_set.audio(u) for u in utts], [u.text for u in utts], info
    rng = np.random.default_rng(0)
    t = np.arange(16000 * 3) / 16000
    clips = []
    for k in range(8):  # speech-like: a voiced harmonic tone with a syllable envelope and a little noise
        f0 = 110 + 15 * k + 20 * np.sin(2 * np.pi * 0.8 * t)
        voiced = sum(0.6**h * np.sin((h + 1) * 2 * np.pi * np.cumsum(f0) / 16000) for h in range(6))
        envelope = 0.5 + 0.5 * np.sin(2 * np.pi * 3.5 * t + k) ** 2
        clips.append((0.3 * voiced * envelope + 0.02 * rng.standard_normal(t.size)).astype(np.float32))
    return clips, None, None


def wer_deltas(args, pairs, description, clips, references) -> dict[str, dict[str, float]]:
    """Each candidate's WER and its delta to the first (batch 1, the set's references)."""
    from batched_eval import error_rate

    from workbench.backends.factory import RunnerFactory
    from workbench.evaluate.transcribe import transcribe

    factory = RunnerFactory(args.backend, args.threads)
    rates = {
        n: error_rate(transcribe(factory.runner(p, n), clips, description, n).texts, references, description)
        for n, p in pairs
    }
    base = rates[pairs[0][0]]
    return {n: {"wer": r, "delta_points": 100.0 * (r - base)} for n, r in rates.items()}


def measure(
    args: argparse.Namespace, name: str, clips: list[Any], references: list[str] | None
) -> dict[str, Any]:
    from workbench.backends.factory import RunnerFactory
    from workbench.evaluate.batching import BatchPolicy
    from workbench.inputs.serving import ServingConfig
    from workbench.serving.measure import RequestSet, measure_serving

    pairs, description = candidates_of(args, name)
    config = ServingConfig(
        p99_ms=args.p99_ms,
        request_s=args.request_s or None,
        max_batch=args.max_batch,
        max_queue_delay_ms=args.max_queue_delay_ms,
        preferred_batch=tuple(int(b) for b in args.preferred_batch.split(",") if b.strip()),
        instances=args.instances,
        memory_limit_mb=args.memory_limit_mb,
        rates=tuple(float(r) for r in args.rates.split(",") if r.strip()),
        seconds_per_rate=args.seconds_per_rate,
        budget_s=args.budget_s,
    )
    requests = RequestSet.of(clips, description.prepare, config.request_s)
    factory = RunnerFactory(args.backend, args.threads)
    repeats = []
    for repeat in range(args.repeats):
        seeded = replace(config, seed=1000 * repeat)
        results = measure_serving(
            [(n, partial(factory.runner, p, n)) for n, p in pairs],
            lambda runner: BatchPolicy.for_runner(runner, description, config.max_batch),
            requests,
            seeded,
            print,
        )
        repeats.append({n: r.to_json() for n, r in results.items()})
    summary = {}
    for n, _ in pairs:
        caps = [r[n]["capacity_qps"] or 0.0 for r in repeats]
        summary[n] = {
            "capacity_qps_median": statistics.median(caps),
            "capacity_qps_min": min(caps),
            "capacity_qps_max": max(caps),
            "single_request_ms_median": statistics.median(r[n]["single_request_ms"] for r in repeats),
            "load_s_median": statistics.median(r[n]["load_s"] for r in repeats),
            "peak_rss_mb_max": max(r[n]["peak_rss_mb"] for r in repeats),
            "largest_batch_fitting": min((r[n]["largest_batch_fitting"] or 0) for r in repeats),
        }
    accuracy = wer_deltas(args, pairs, description, clips, references) if references is not None else None
    best = max(s["capacity_qps_median"] for s in summary.values())
    tied = [n for n, s in summary.items() if s["capacity_qps_median"] == best]
    return {
        "model": name,
        "description": description.summary(),
        "candidates": {n: str(p) for n, p in pairs},
        "settings": config.to_json(),
        "requests": requests.description,
        "summary": summary,
        "winner_by_capacity": tied[0] if len(tied) == 1 else None,  # None: a tie on the median
        "highest_capacity": tied,
        "accuracy": accuracy,
        "repeats": repeats,
    }


def serving_record(
    args: argparse.Namespace,
    argv: list[str] | None,
    eval_set: Any,
    load_before: Any,
    before: MachineCpu,
    results: list[dict[str, Any]],
    complete: bool,
) -> dict[str, Any]:
    """The results JSON of the models measured so far (``complete``: every model asked for is in it)."""
    from workbench.backends.devices import device_of
    from workbench.evaluate.machine import machine_info, package_versions

    return {
        "benchmark": "serving",
        "command": "python benchmarks/serving.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "complete": complete,
        "backend": args.backend,
        "device": device_of(args.backend),
        "eval_set": eval_set,
        "cpu_flags": cpu_flags(),
        "load_average_before": load_before,
        "load_average_after": load_averages(),
        "other_processes_cores": round(MachineCpu.now(include_self=True).foreign_cores(before), 3),
        "machine": machine_info(),
        "packages": package_versions(),
        "python": platform.python_version(),
        "pid": os.getpid(),
        "results": results,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    from workbench.artifacts import strict_json, write_text_atomic
    from workbench.backends.factory import check_backend

    check_backend(args.backend)
    args.work.mkdir(parents=True, exist_ok=True)
    clips, references, eval_set = clips_of(args)
    load_before = load_averages()
    before = MachineCpu.now(include_self=True)
    models = ["candidates"] if args.candidate else args.models
    path = args.out or HERE / "results" / f"serving_{args.backend.replace('-', '_')}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    results: list[dict[str, Any]] = []
    for name in models:  # the record is rewritten after each model: a run stopped by a time limit keeps them
        results.append(measure(args, name, clips, references))
        out = serving_record(args, argv, eval_set, load_before, before, results, len(results) == len(models))
        write_text_atomic(path, strict_json(out, indent=2, default=str) + "\n")
    others = out["other_processes_cores"]
    print(
        f"{'model':<10} {'candidate':<14} {'1 req ms':>8} {'load s':>6} {'peak MB':>7} "
        f"{'capacity QPS median [min, max]':>32} {'dWER pts':>8}"
    )
    for result in results:
        for n, s in result["summary"].items():
            delta = (result["accuracy"] or {}).get(n, {}).get("delta_points")
            cap = f"{s['capacity_qps_median']:g} [{s['capacity_qps_min']:g}, {s['capacity_qps_max']:g}]"
            print(
                f"{result['model']:<10} {n:<14} {s['single_request_ms_median']:>8.1f} {s['load_s_median']:>6.2f} "
                f"{s['peak_rss_mb_max']:>7.0f} {cap:>32} "
                + (f"{delta:>+8.2f}" if delta is not None else f"{'n/a':>8}")
            )
        tied = result["highest_capacity"]
        print(
            f"{result['model']}: at p99 <= {args.p99_ms:g} ms "
            + (
                f"winner by capacity: {tied[0]}"
                if len(tied) == 1
                else f"equal median capacity: {', '.join(tied)}"
            )
        )
    print(
        f"cpu flags {' '.join(out['cpu_flags']) or 'unknown'}; load average before {load_before}, after "
        f"{out['load_average_after']}; other processes used {others:.2f} cores; wrote {path}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

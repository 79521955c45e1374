"""Inference benchmark: latency p50/p99, clips/s and peak memory of every precision variant, CPU or CUDA.

Models: the demo model (``workbench/demo_model``, package data) and a Wav2Vec2-base-sized model with random weights
(``workbench.model.synthetic``). Clips of 4 s and 10 s, batch sizes 1, 8, 32. Each (model, variant) is
timed in its own subprocess by ``workbench.evaluate.latency.measure_latency`` through the workbench's
``OnnxRuntimeRunner`` (so peak memory is that variant's alone); points run in ascending size.

Variants (``workbench.quantize.build_variant`` with a ``PrecisionPlan``; ranges from the real calibration,
``workbench.calibration.runner.calibrate_ranges``, entropy, on ``--calib-clips`` clips):

- CPU (ONNX Runtime CPU EP): ``fp32``, ``fp16`` (the whole graph in FP16 but the FP16 guard's FP32 nodes),
  ``int8`` (INT8 everywhere, the TensorRT-bound Q/DQ graph as written: FP16 between the islands),
  ``int8-cpu`` (the same INT8 arithmetic with FP32 between the islands through
  ``workbench.quantize.ort_cpu.cpu_flavour``), ``mixed`` and ``mixed-cpu`` (a mixed plan: ``--mixed-plan``,
  e.g. the mixed-precision search's found plan, else the fixed plan of ``fixed_mixed_plan``).
  Named only: ``int8-cpu-u8`` and ``int8-cpu-s8``, the flavour with uint8 or int8 weights forced (``int8-cpu``
  takes what this CPU computes exactly); ``int8-cpu-s8`` runs ORT's U8S8 kernels as they are (wrong on an x86
  CPU without VNNI), to measure what uint8 weights cost.
  The demo model's variants are also checked for accuracy on ``--accuracy-clips`` clips of the evaluation set.
- CUDA (onnxruntime-gpu, CUDA EP): ``fp32``, ``fp16`` (as above), ``fp16-unguarded`` (the same without the
  guard's FP32 nodes: what the guard costs), ``fp16-casts`` (the earlier FP16 plan: FP16 MatMul/Conv with a
  Cast pair each, everything else FP32), ``fp16-ort`` (onnxruntime's float16 converter, IO kept FP32),
  ``int8`` and ``mixed`` (FP16 between the Q/DQ islands; ONNX Runtime's CUDA EP runs Q/DQ as separate
  kernels and the MatMuls in FP16, so this is the graph's cost there, not TensorRT's INT8 speed). Besides
  the runner's end-to-end time (numpy in and out, host<->device copies included) each point is also timed
  device-resident (IO binding, input on the GPU), which is what the PyTorch eager figures of
  ``benchmarks/gpu_torch.py`` measure; every variant's logits on the timing clips are compared with FP32's
  on the same provider (token agreement, max |diff|, inf/NaN).

The FP16 guard's FP32 nodes come from float statistics of the calibration clips
(``workbench.quantize.float_stats`` / ``guard``); they are recorded per model (``models.<m>.fp16_guard``).

TensorRT INT8 latency is not measured: the H200 machine has no TensorRT, and the TensorRT-RTX runtime that
installs here refuses compute capability 9.0 (see docs/design.md).

    python benchmarks/inference.py                                  # CPU, full grid -> results/inference_cpu.json
    python benchmarks/inference.py --backend cuda --out X.json      # on the GPU machine
    python benchmarks/inference.py --models tiny --seconds 1 --batch 1,2 --out /tmp/x.json   # smoke run

This script parses the options and writes the record; the parts are in ``benchmarks/inference_bench/``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from inference_bench.accuracy import accuracy_check, logit_check  # noqa: E402
from inference_bench.child import child, time_variant  # noqa: E402
from inference_bench.interleaved import interleaved  # noqa: E402
from inference_bench.prep import CPU_VARIANTS, CUDA_VARIANTS, WEIGHT_VARIANTS, clip_source, prepare_model  # noqa: E402
from inference_bench.report import format_table, rows_of, speedups  # noqa: E402

from workbench.artifacts import write_json_atomic  # noqa: E402
from workbench.errors import WorkbenchError  # noqa: E402

PROVIDERS = {"cpu": ("CPUExecutionProvider",), "cuda": ("CUDAExecutionProvider", "CPUExecutionProvider")}
RESULTS = {
    "cpu": HERE / "results" / "inference_cpu.json",
    "cuda": HERE / "results" / "inference_gpu_h200_ort.json",
}
TENSORRT_NOTE = (
    "TensorRT INT8 latency is not measured: the lent H200 machine has no TensorRT, and the "
    "TensorRT-RTX runtime (the only TensorRT that installs from the package index here) refuses "
    "compute capability 9.0, so no engine can be executed on the H200 (docs/design.md)."
)


def providers_of(args: argparse.Namespace) -> list[str]:
    return list(PROVIDERS["cpu" if args.cpu_dry_run else args.backend])


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    def ints(text: str) -> list[int]:
        return [int(t) for t in text.split(",") if t]

    def floats(text: str) -> list[float]:
        return [float(t) for t in text.split(",") if t]

    def points(text: str) -> list[tuple[int, float]]:
        return [(int(t.split("x")[0]), float(t.split("x")[1])) for t in text.split(",") if t]

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--models", default="demo,base", help="demo, base, tiny (comma-separated)")
    parser.add_argument("--variants", default=None, help="default: all the backend can run")
    parser.add_argument("--seconds", type=floats, default=[4.0, 10.0])
    parser.add_argument("--batch", type=ints, default=[1, 8, 32])
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument(
        "--point-budget-s",
        type=float,
        default=12.0,
        help="fewer repeats (not fewer than --min-repeats) where a point would take longer",
    )
    parser.add_argument("--min-repeats", type=int, default=3)
    parser.add_argument(
        "--threads", type=int, default=None, help="ONNX Runtime intra-op threads (default: its own)"
    )
    parser.add_argument(
        "--calib-set", default="demo-calib", help="speech set for calibration clips, if it exists"
    )
    parser.add_argument("--calib-clips", type=int, default=4)
    parser.add_argument(
        "--eval-set", default="demo-eval", help="speech set for the accuracy check, if it exists"
    )
    parser.add_argument("--accuracy-clips", type=int, default=24, help="0: no accuracy check")
    parser.add_argument(
        "--interleave-variants",
        default="fp32,int8,int8-cpu",
        help="variants re-timed interleaved in one process, for robust ratios",
    )
    parser.add_argument(
        "--interleave-points",
        type=points,
        default=[(1, 10.0), (8, 4.0), (32, 4.0)],
        help="BATCHxSECONDS,... (default 1x10,8x4,32x4)",
    )
    parser.add_argument("--interleave-rounds", type=int, default=5, help="0: no interleaved run")
    parser.add_argument(
        "--mixed-plan", type=Path, default=None, help="PrecisionPlan JSON (e.g. a found plan)"
    )
    parser.add_argument(
        "--work", type=Path, default=None, help="folder for the variants (default: temporary)"
    )
    parser.add_argument("--timeout", type=float, default=1200.0, help="per (model, variant) timing process")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--cpu-dry-run",
        action="store_true",
        help="with --backend cuda: run the CUDA variants and code path on the CPU EP (a rehearsal)",
    )
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    defaults = CPU_VARIANTS if args.backend == "cpu" else CUDA_VARIANTS
    known = defaults + WEIGHT_VARIANTS if args.backend == "cpu" else defaults
    args.variant_list = args.variants.split(",") if args.variants else list(defaults)
    bad = [v for v in args.variant_list if v not in known]
    if bad:
        parser.error(
            f"variants {bad} do not run on the {args.backend} backend; choose from {', '.join(known)}"
        )
    args.model_list = args.models.split(",")
    args.interleave_variants = [v for v in args.interleave_variants.split(",") if v in args.variant_list]
    if any(m not in ("demo", "base", "tiny") for m in args.model_list):
        parser.error("--models takes demo, base and tiny")
    args.out = args.out or RESULTS[args.backend]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        child(args.child)
        return 0
    from workbench.evaluate.machine import machine_info, package_versions

    if "fp32" in args.variant_list:  # the baseline runs first so that every ratio has one
        args.variant_list.remove("fp32")
        args.variant_list.insert(0, "fp32")
    started = time.perf_counter()
    work = args.work or Path(tempfile.mkdtemp(prefix="inference-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    machine = machine_info()
    calib, calib_info = clip_source(args.calib_set, args.calib_clips)
    timing_clips, timing_info = clip_source(args.calib_set, 8, seed=1)
    clips_path = work / "timing-clips.npy"
    longest = max(len(c) for c in timing_clips)
    np.save(clips_path, np.stack([np.pad(c, (0, longest - len(c)), mode="wrap") for c in timing_clips]))
    results: dict[tuple[str, str], dict] = {}
    models: dict[str, dict] = {}
    accuracy: dict = {}
    interleaved_runs: dict = {}
    for model in args.model_list:
        print(f"[{model}] export, calibration, variants ...", flush=True)
        variants, info = prepare_model(
            model,
            args.variant_list,
            work,
            calib,
            args.mixed_plan,
            float_precision="fp16" if args.backend == "cuda" else "fp32",
        )
        info["variants"] = {
            v.name: {k: val for k, val in asdict(v).items() if k not in ("model", "name", "path")}
            for v in variants
        }
        models[model] = info
        for variant in variants:
            print(f"[{model}] timing {variant.name} ...", flush=True)
            results[(model, variant.name)] = time_variant(
                variant, args, providers_of(args), clips_path, machine, work
            )
        chosen = [v for v in variants if v.name in args.interleave_variants]
        if args.interleave_rounds and len(chosen) > 1:
            print(
                f"[{model}] interleaved {', '.join(v.name for v in chosen)} at {args.interleave_points} ...",
                flush=True,
            )
            interleaved_runs[model] = interleaved(
                chosen,
                list(np.load(clips_path)),
                args.interleave_points,
                args.interleave_rounds,
                providers_of(args),
                args.threads,
            )
        if args.backend == "cuda":
            print(f"[{model}] logits vs fp32 on the timing clips ...", flush=True)
            accuracy.setdefault("logits_vs_fp32", {})[model] = logit_check(
                variants, list(np.load(clips_path)), providers_of(args)
            )
        if model == "demo" and args.backend == "cpu" and args.accuracy_clips:
            print(
                f"[{model}] accuracy check on {args.accuracy_clips} clips of {args.eval_set} ...", flush=True
            )
            accuracy = accuracy_check(variants, args.eval_set, args.accuracy_clips, args.threads)
    rows = rows_of(results)
    table = format_table(rows)
    print("\n" + table)
    gains = {
        v: speedups(rows, v)
        for v in (
            "int8",
            "int8-cpu",
            *WEIGHT_VARIANTS,
            "mixed",
            "mixed-cpu",
            "fp16",
            "fp16-unguarded",
            "fp16-casts",
            "fp16-ort",
        )
        if any(r.get("variant") == v for r in rows)
    }
    for variant, per_model in gains.items():
        for model, g in per_model.items():
            print(
                f"{variant} / fp32 p50 ({model}): geomean {g['geomean']:.2f} over {len(g['points'])} points"
            )
    for model, per_point in interleaved_runs.items():
        for point, res in per_point.items():
            ratios = ", ".join(f"{n} {r:.2f}" for n, r in res["x_fp32"].items() if n != "fp32")
            print(f"interleaved ({model}, {point}, {res['rounds']} rounds): p50 / fp32: {ratios}")
    if accuracy:
        print("accuracy:", json.dumps(accuracy, indent=1))
    record = {
        "benchmark": "inference",
        "backend": args.backend,
        "providers": providers_of(args),
        "cpu_dry_run": args.cpu_dry_run,
        "command": "python benchmarks/inference.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": machine,
        "packages": package_versions(),
        "onnxruntime": __import__("onnxruntime").__version__,
        "environment": {k: os.environ.get(k) for k in ("OPENBLAS_CORETYPE", "OMP_NUM_THREADS")},
        "config": {
            "seconds": args.seconds,
            "batch": args.batch,
            "warmup": args.warmup,
            "repeats": args.repeats,
            "point_budget_s": args.point_budget_s,
            "min_repeats": args.min_repeats,
            "threads": args.threads or "onnxruntime default",
            "calibration_clips": calib_info,
            "timing_clips": timing_info,
        },
        "models": models,
        "rows": rows,
        "speedups_vs_fp32": gains,
        "interleaved": interleaved_runs,
        "accuracy": accuracy,
        "raw": {f"{m}/{v}": r for (m, v), r in results.items()},
        "tensorrt": TENSORRT_NOTE,
        "wall_s": round(time.perf_counter() - started, 1),
    }
    write_json_atomic(args.out, record)
    print(f"\nwrote {args.out} ({record['wall_s']:.0f} s)")
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except WorkbenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(1) from None

"""The timing child process: one (model, variant) per process, so peak memory is that variant's alone.

The parent writes a JSON spec and runs ``benchmarks/inference.py --child SPEC``; the child times the
variant with ``workbench.evaluate.latency.measure_latency`` (plus device-resident timing and GPU memory
on CUDA) and prints one ``RESULT <json>`` line, which the parent reads.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from inference_bench.gpu import device_resident, gpu_memory_mb
from inference_bench.prep import Variant

SCRIPT = Path(__file__).resolve().parent.parent / "inference.py"


def child(spec_path: Path) -> None:
    from workbench.backends.onnxruntime import OnnxRuntimeRunner
    from workbench.evaluate.latency import LatencyConfig, measure_latency

    spec = json.loads(spec_path.read_text())
    clips = list(np.load(spec["clips"]))
    buckets = {f"{s:g}s": (float(s), clips) for s in spec["seconds"]}
    config = LatencyConfig(
        tuple(spec["batch"]), spec["warmup"], spec["repeats"], spec["point_budget_s"], spec["min_repeats"]
    )
    runner = OnnxRuntimeRunner(
        Path(spec["path"]),
        providers=spec["providers"],
        threads=spec["threads"],
        name=f"{spec['model']}/{spec['variant']}",
        exact_int8=spec["exact_int8"],
    )
    extra: dict = {}
    if spec["backend"] == "cuda":
        runner.activate()  # one session for both timings; measure_latency deactivates it at the end
        extra["device_resident"] = device_resident(
            runner.session, buckets, config.batch_sizes, config, "cpu" if spec["dry_run"] else "cuda"
        )
        # read with the session alive: ORT's CUDA arena has grown to the largest point by now
        extra["gpu_memory_mb"], extra["gpu_memory_source"] = gpu_memory_mb()
    result = measure_latency(runner, buckets, config, runner.name, spec["machine"])
    print("RESULT " + json.dumps({**result.to_json(), **extra}))


def time_variant(
    variant: Variant, args, providers: list[str], clips_path: Path, machine: dict, work: Path
) -> dict:
    spec = {
        "path": variant.path,
        "model": variant.model,
        "variant": variant.name,
        "clips": str(clips_path),
        "seconds": args.seconds,
        "batch": args.batch,
        "warmup": args.warmup,
        "repeats": args.repeats,
        "point_budget_s": args.point_budget_s,
        "min_repeats": args.min_repeats,
        "threads": args.threads,
        "providers": providers,
        "backend": args.backend,
        "machine": machine,
        "dry_run": args.cpu_dry_run,
        "exact_int8": variant.exact_int8,
    }
    spec_path = work / f"spec-{variant.model}-{variant.name}.json"
    spec_path.write_text(json.dumps(spec))
    start = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, str(SCRIPT), "--child", str(spec_path)],
            capture_output=True,
            text=True,
            timeout=args.timeout,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {args.timeout:.0f} s"}
    lines = [ln[7:] for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {done.returncode}: {tail[:300]}"}
    return {**json.loads(lines[-1]), "process_wall_s": round(time.perf_counter() - start, 1)}

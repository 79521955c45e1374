"""Inference benchmark: latency p50/p99, clips/s and peak memory of every precision variant, CPU or CUDA.

Models: the demo model (``models/demo-wav2vec2-ctc``) and a Wav2Vec2-base-sized model with random weights
(``workbench.model.synthetic``). Clips of 4 s and 10 s, batch sizes 1, 8, 32. Each (model, variant) is
timed in its own subprocess by ``workbench.evaluate.latency.measure_latency`` through the workbench's
``OnnxRuntimeRunner`` (so peak memory is that variant's alone); points run in ascending size.

Variants (``workbench.quantize.build_variant`` with a ``PrecisionPlan``; ranges from the real calibration,
``workbench.calibration.runner.calibrate_ranges``, entropy, on ``--calib-clips`` clips):

- CPU (ONNX Runtime CPU EP): ``fp32``, ``fp16`` (MatMul/Conv in FP16 with Casts), ``int8`` (INT8 everywhere,
  the TensorRT-bound Q/DQ graph as written), ``int8-cpu`` (the same graph through
  ``workbench.quantize.ort_cpu.cpu_flavour``), ``mixed`` and ``mixed-cpu`` (a mixed plan: ``--mixed-plan``,
  e.g. the mixed-precision search's found plan, else the fixed plan of ``fixed_mixed_plan``).
  The demo model's variants are also checked for accuracy on ``--accuracy-clips`` clips of the evaluation set.
- CUDA (onnxruntime-gpu, CUDA EP): ``fp32``, ``fp16`` (build_variant's FP16 plan) and ``fp16-ort``
  (onnxruntime's float16 converter, IO kept FP32). Besides the runner's end-to-end time (numpy in and out,
  host<->device copies included) each point is also timed device-resident (IO binding, input on the GPU),
  which is what the PyTorch eager figures of ``benchmarks/gpu_torch.py`` measure.

TensorRT INT8 latency is not measured: the H200 machine has no TensorRT, and the TensorRT-RTX runtime that
installs here refuses compute capability 9.0 (see ../shared/DESIGN.md).

    python benchmarks/inference.py                                  # CPU, full grid -> results/inference_cpu.json
    python benchmarks/inference.py --backend cuda --out X.json      # on the GPU machine
    python benchmarks/inference.py --models tiny --seconds 1 --batch 1,2 --out /tmp/x.json   # smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from workbench.artifacts import sha256_bytes, sha256_file, write_json_atomic  # noqa: E402
from workbench.errors import WorkbenchError  # noqa: E402

DEMO_MODEL = ROOT / "models" / "demo-wav2vec2-ctc"
CPU_VARIANTS = ("fp32", "fp16", "int8", "int8-cpu", "mixed", "mixed-cpu")
CUDA_VARIANTS = ("fp32", "fp16", "fp16-ort")
PROVIDERS = {"cpu": ("CPUExecutionProvider",), "cuda": ("CUDAExecutionProvider", "CPUExecutionProvider")}
RESULTS = {"cpu": HERE / "results" / "inference_cpu.json", "cuda": HERE / "results" / "inference_gpu_h200_ort.json"}
TENSORRT_NOTE = ("TensorRT INT8 latency is not measured: the lent H200 machine has no TensorRT, and the "
                 "TensorRT-RTX runtime (the only TensorRT that installs from the package index here) refuses "
                 "compute capability 9.0, so no engine can be executed on the H200 (../shared/DESIGN.md).")
# The fixed mixed plan: Wav2Vec2 INT8 is known to break in the first convolutions of the feature encoder
# (a public OpenVINO run recovered after keeping conv layers 1-3 in float, DESIGN.md); keep those three
# in FP32 (the fast float on a CPU), everything else INT8.
FIXED_MIXED_FLOAT = re.compile(r"/feature_extractor/conv_layers\.[012]/")


def fixed_mixed_plan(model) -> "PrecisionPlan":
    """INT8 everywhere except the first three feature-encoder convolutions (FP32)."""
    from workbench.quantize.plan import PrecisionPlan, quantizable_nodes

    keep = [n for n in quantizable_nodes(model) if FIXED_MIXED_FLOAT.search(n)]
    return PrecisionPlan("mixed-fixed (feature_extractor.conv_layers.0-2 fp32, rest int8)", "int8",
                         {n: "fp32" for n in keep})


# ---------------------------------------------------------------- clips
def clip_source(set_name: str | None, count: int, seed: int = 0) -> tuple[list[np.ndarray], dict]:
    """``count`` clips of a stored speech set when it exists, else speech-like synthetic clips."""
    from workbench.config import CALIB_SETS_DIR

    if set_name and (CALIB_SETS_DIR / set_name).exists():  # (the GPU machine has no soundfile, and no sets)
        from workbench.speech.store import load_set

        speech_set = load_set(set_name)
        utts = speech_set.utterances[:count]
        return [speech_set.audio(u) for u in utts], {"kind": "speech set", "name": speech_set.name,
                                                      "content_hash": speech_set.content_hash, "clips": len(utts)}
    from calibration import speech_like_clips  # benchmarks/calibration.py: harmonics + noise, 5 s each

    clips = speech_like_clips(count, seed)
    return list(clips), {"kind": "speech-like synthetic (benchmarks/calibration.py)", "seed": seed,
                         "clips": count, "content_hash": sha256_bytes(clips.tobytes())}


# ---------------------------------------------------------------- variants
@dataclass
class Variant:
    model: str
    name: str
    path: str
    plan: dict | None = None
    rewrites: dict | None = None
    sha256: str = ""


def _export(model_name: str, out: Path) -> tuple[Path, dict]:
    from workbench.model.export import export_onnx

    if model_name == "demo":
        from workbench.model.loading import load_model, model_hash

        export_onnx(load_model(DEMO_MODEL), out)
        return out, {"source": str(DEMO_MODEL.relative_to(ROOT)), "model_hash": model_hash(DEMO_MODEL)}
    from workbench.model.synthetic import SIZES, random_wav2vec2

    export_onnx(random_wav2vec2(model_name, seed=0), out)
    return out, {"source": f"random Wav2Vec2ForCTC, size {model_name}, seed 0", "dims": SIZES[model_name]}


def prepare_model(model_name: str, variants: list[str], work: Path, calib: list[np.ndarray],
                  mixed_plan: Path | None, log=print) -> tuple[list[Variant], dict]:
    """Export FP32, calibrate when an INT8 variant is asked for, write every variant; returns them + info."""
    import onnx

    from workbench.calibration.methods import MethodSpec
    from workbench.calibration.runner import calibrate_ranges
    from workbench.quantize.ort_cpu import cpu_flavour
    from workbench.quantize.plan import FP16, INT8, PrecisionPlan
    from workbench.quantize.qdq import build_variant
    from workbench.artifacts import write_bytes_atomic

    folder = work / model_name
    folder.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    fp32, info = _export(model_name, folder / "fp32.onnx")
    info["export_s"] = round(time.perf_counter() - start, 1)
    out: list[Variant] = []
    amax = None
    if any(v.startswith(("int8", "mixed")) for v in variants):
        start = time.perf_counter()
        amax = calibrate_ranges(fp32, iter(calib), len(calib), MethodSpec("entropy"))
        info["calibration"] = {"method": "entropy", "clips": len(calib), "tensors": len(amax),
                               "seconds": round(time.perf_counter() - start, 1)}
    plans: dict[str, PrecisionPlan] = {"int8": INT8}
    if any(v.startswith("mixed") for v in variants):
        plans["mixed"] = PrecisionPlan.load(mixed_plan) if mixed_plan else \
            fixed_mixed_plan(onnx.load(str(fp32), load_external_data=False))
    for name in variants:
        path = folder / f"{name}.onnx"
        variant = Variant(model_name, name, str(path))
        if name == "fp32":
            path = fp32
            variant.path = str(fp32)
        elif name == "fp16":
            build_variant(fp32, {}, FP16, path)
            variant.plan = FP16.to_json()
        elif name == "fp16-ort":
            from onnxruntime.transformers.float16 import convert_float_to_float16

            half = convert_float_to_float16(onnx.load(str(fp32)), keep_io_types=True)
            write_bytes_atomic(path, half.SerializeToString())
            variant.plan = {"name": "onnxruntime float16 converter, keep_io_types=True"}
        elif name in ("int8", "mixed"):
            build_variant(fp32, amax, plans[name], path)
            variant.plan = plans[name].to_json()
        elif name in ("int8-cpu", "mixed-cpu"):
            base = name.removesuffix("-cpu")
            trt = folder / f"{base}.onnx"
            if not trt.exists():
                build_variant(fp32, amax, plans[base], trt)
            flavoured, stats = cpu_flavour(onnx.load(str(trt)))
            write_bytes_atomic(path, flavoured.SerializeToString())
            variant.plan, variant.rewrites = plans[base].to_json(), stats
        else:
            raise WorkbenchError(f"unknown variant {name!r}; choose from {CPU_VARIANTS + CUDA_VARIANTS}")
        variant.sha256 = sha256_file(path)
        out.append(variant)
        log(f"  {model_name}/{name}: {path.stat().st_size / 2**20:.1f} MB")
    return out, info


# ---------------------------------------------------------------- timing (child process)
def gpu_memory_mb() -> tuple[float | None, str]:
    """(MB, what was read): this process's GPU memory from NVML, else the device's used memory where NVML
    does not list the process (containers); (None, why) without an NVIDIA driver."""
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
            if proc.pid == os.getpid() and proc.usedGpuMemory:
                return proc.usedGpuMemory / 2**20, "nvml process"
        return pynvml.nvmlDeviceGetMemoryInfo(handle).used / 2**20, "nvml device used (process not listed)"
    except Exception as exc:  # noqa: BLE001 - any NVML failure means "not available"
        return None, f"unavailable: {type(exc).__name__}"


def device_resident(session, buckets: dict, batches: tuple[int, ...], config, device: str = "cuda") -> list[dict]:
    """p50/p99 with the input already on the GPU and the output left there (IO binding)."""
    import onnxruntime as ort

    from workbench.evaluate.latency import make_batch

    rows = []
    for batch in batches:
        for bucket, (seconds, clips) in buckets.items():
            value = ort.OrtValue.ortvalue_from_numpy(make_batch(clips, batch, seconds), device, 0)
            binding = session.io_binding()
            binding.bind_ortvalue_input(session.get_inputs()[0].name, value)
            binding.bind_output(session.get_outputs()[0].name, device, 0)
            for _ in range(config.warmup):
                session.run_with_iobinding(binding)
            times = []
            for _ in range(max(config.repeats, 20)):
                start = time.perf_counter()
                session.run_with_iobinding(binding)  # synchronises the CUDA stream before returning
                times.append((time.perf_counter() - start) * 1000.0)
            rows.append({"batch": batch, "bucket": bucket, "device_p50_ms": float(np.percentile(times, 50)),
                         "device_p99_ms": float(np.percentile(times, 99)), "device_repeats": len(times)})
    return rows


def child(spec_path: Path) -> None:
    from workbench.backends.onnxruntime import OnnxRuntimeRunner
    from workbench.evaluate.latency import LatencyConfig, measure_latency

    spec = json.loads(spec_path.read_text())
    clips = list(np.load(spec["clips"]))
    buckets = {f"{s:g}s": (float(s), clips) for s in spec["seconds"]}
    config = LatencyConfig(tuple(spec["batch"]), spec["warmup"], spec["repeats"], spec["point_budget_s"],
                           spec["min_repeats"])
    runner = OnnxRuntimeRunner(Path(spec["path"]), providers=spec["providers"], threads=spec["threads"],
                               name=f"{spec['model']}/{spec['variant']}")
    extra: dict = {}
    if spec["backend"] == "cuda":
        runner.activate()  # one session for both timings; measure_latency deactivates it at the end
        extra["device_resident"] = device_resident(runner.session, buckets, config.batch_sizes, config,
                                                   "cpu" if spec["dry_run"] else "cuda")
        # read with the session alive: ORT's CUDA arena has grown to the largest point by now
        extra["gpu_memory_mb"], extra["gpu_memory_source"] = gpu_memory_mb()
    result = measure_latency(runner, buckets, config, runner.name, spec["machine"])
    print("RESULT " + json.dumps({**result.to_json(), **extra}))


def time_variant(variant: Variant, args, clips_path: Path, machine: dict, work: Path) -> dict:
    spec = {"path": variant.path, "model": variant.model, "variant": variant.name, "clips": str(clips_path),
            "seconds": args.seconds, "batch": args.batch, "warmup": args.warmup, "repeats": args.repeats,
            "point_budget_s": args.point_budget_s, "min_repeats": args.min_repeats, "threads": args.threads,
            "providers": providers_of(args), "backend": args.backend, "machine": machine,
            "dry_run": args.cpu_dry_run}
    spec_path = work / f"spec-{variant.model}-{variant.name}.json"
    spec_path.write_text(json.dumps(spec))
    start = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", str(spec_path)],
                              capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {args.timeout:.0f} s"}
    lines = [ln[7:] for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {done.returncode}: {tail[:300]}"}
    return {**json.loads(lines[-1]), "process_wall_s": round(time.perf_counter() - start, 1)}


# ---------------------------------------------------------------- interleaved ratios (one process)
def interleaved(variants: list[Variant], clips: list[np.ndarray], points: list[tuple[int, float]], rounds: int,
                providers: list[str], threads: int | None) -> dict:
    """p50 of each variant with the runs interleaved (A B C, B C A, ...) in one process, and the ratio to FP32.

    The grid times variants one after another; on a shared machine the load drifts between them. Here
    every round runs every variant once, so a drift hits all of them alike and the ratios are robust.
    """
    from workbench.backends.onnxruntime import OnnxRuntimeRunner
    from workbench.evaluate.latency import make_batch
    from workbench.evaluate.transcribe import logits_of

    runners = {v.name: OnnxRuntimeRunner(Path(v.path), providers=providers, threads=threads, name=v.name)
               for v in variants}
    out: dict = {}
    try:
        for runner in runners.values():
            runner.activate()
        names = list(runners)
        for batch, seconds in points:
            feed = make_batch(clips, batch, seconds)
            for runner in runners.values():
                logits_of(runner, feed)
            times: dict[str, list[float]] = {n: [] for n in names}
            for i in range(rounds):
                for name in names[i % len(names):] + names[:i % len(names)]:
                    logits_of(runners[name], feed)
                    times[name].append(runners[name].last_inference_time() * 1000.0)
            p50 = {n: float(np.median(t)) for n, t in times.items()}
            out[f"{seconds:g}s b{batch}"] = {"rounds": rounds, "p50_ms": p50,
                                              "x_fp32": {n: p50[n] / p50["fp32"] for n in names if "fp32" in p50}}
    finally:
        for runner in runners.values():
            runner.deactivate()
    return out


# ---------------------------------------------------------------- accuracy (CPU, demo model)
def accuracy_check(variants: list[Variant], eval_set: str, count: int, threads: int | None) -> dict:
    """Logits of each variant vs FP32 and each ``-cpu`` flavour vs its TensorRT-bound graph; WER per variant."""
    from workbench.backends.onnxruntime import OnnxRuntimeRunner
    from workbench.evaluate.transcribe import logits_of
    from workbench.model.features import normalise_audio
    from workbench.evaluate.wer import corpus_wer, score_utterances
    from workbench.model.vocab import decode_ids
    from workbench.speech.store import load_set, set_path

    if not set_path(eval_set).exists():
        return {"skipped": f"evaluation set {eval_set} not found (python -m workbench data build)"}
    speech_set = load_set(eval_set)
    utts = speech_set.utterances[:count]
    audio = [normalise_audio(speech_set.audio(u))[None] for u in utts]
    logits: dict[str, list[np.ndarray]] = {}
    for variant in variants:
        with OnnxRuntimeRunner(Path(variant.path), threads=threads, name=variant.name) as runner:
            logits[variant.name] = [logits_of(runner, x)[0] for x in audio]
    refs = [u.text for u in utts]
    ids = [u.id for u in utts]

    def compare(a: str, b: str) -> dict:
        diff = max(float(np.abs(x - y).max()) for x, y in zip(logits[a], logits[b]))
        agree = sum(int((x.argmax(-1) == y.argmax(-1)).sum()) for x, y in zip(logits[a], logits[b]))
        frames = sum(len(x) for x in logits[a])
        return {"max_abs_logit_diff": diff, "token_agreement": agree / frames}

    out: dict = {"set": speech_set.name, "set_hash": speech_set.content_hash, "clips": len(utts), "wer": {},
                 "vs_fp32": {}, "cpu_flavour_vs_tensorrt_bound": {}}
    for name, values in logits.items():
        hyps = [decode_ids(v.argmax(-1).tolist()) for v in values]
        out["wer"][name] = corpus_wer(score_utterances(ids, refs, hyps))
        if name != "fp32" and "fp32" in logits:
            out["vs_fp32"][name] = compare(name, "fp32")
        if name.endswith("-cpu") and name.removesuffix("-cpu") in logits:
            out["cpu_flavour_vs_tensorrt_bound"][name] = compare(name, name.removesuffix("-cpu"))
    return out


# ---------------------------------------------------------------- table
def rows_of(results: dict[tuple[str, str], dict]) -> list[dict]:
    rows = []
    for (model, variant), res in results.items():
        if "error" in res:
            rows.append({"model": model, "variant": variant, "error": res["error"]})
            continue
        device = {(d["batch"], d["bucket"]): d for d in res.get("device_resident", [])}
        for p in res["points"]:
            base = results.get((model, "fp32"), {})
            ref = next((q for q in base.get("points", []) if q["batch"] == p["batch"] and q["bucket"] == p["bucket"]),
                       None)
            row = {"model": model, "variant": variant, "clip_s": p["clip_seconds"], "batch": p["batch"],
                   "p50_ms": p["p50_ms"], "p99_ms": p["p99_ms"], "clips_per_s": p["clips_per_second"],
                   "peak_rss_mb": p["peak_rss_mb"], "repeats": p["repeats"],
                   "x_fp32": p["p50_ms"] / ref["p50_ms"] if ref else None}
            if (p["batch"], p["bucket"]) in device:
                row.update({k: v for k, v in device[(p["batch"], p["bucket"])].items() if k.startswith("device")})
                row["gpu_memory_mb"] = res.get("gpu_memory_mb")
            rows.append(row)
    return rows


def format_table(rows: list[dict]) -> str:
    gpu = any("device_p50_ms" in r for r in rows)
    head = (f"{'model':8} {'variant':10} {'clip':>5} {'batch':>5} {'p50 ms':>9} {'p99 ms':>9} {'clips/s':>8} "
            f"{'x fp32':>7} {'peak RSS MB':>11} {'reps':>4}")
    if gpu:
        head += f" {'dev p50 ms':>10} {'dev p99 ms':>10} {'GPU MB':>7}"
    lines = [head, "-" * len(head)]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['model']:8} {r['variant']:10} error: {r['error']}")
            continue
        ratio = f"{r['x_fp32']:.2f}" if r["x_fp32"] is not None else "-"
        line = (f"{r['model']:8} {r['variant']:10} {r['clip_s']:>4g}s {r['batch']:>5} {r['p50_ms']:>9.1f} "
                f"{r['p99_ms']:>9.1f} {r['clips_per_s']:>8.2f} {ratio:>7} {r['peak_rss_mb']:>11.0f} {r['repeats']:>4}")
        if gpu:
            mem = r.get("gpu_memory_mb")
            line += (f" {r.get('device_p50_ms', float('nan')):>10.2f} {r.get('device_p99_ms', float('nan')):>10.2f} "
                     f"{(f'{mem:.0f}' if mem else '-'):>7}")
        lines.append(line)
    return "\n".join(lines)


def speedups(rows: list[dict], variant: str = "int8-cpu") -> dict:
    """p50 ratio ``variant`` / fp32 per model and point, and its geometric mean per model."""
    out: dict = {}
    for model in sorted({r["model"] for r in rows}):
        ratios = {f"{r['clip_s']:g}s b{r['batch']}": r["x_fp32"] for r in rows
                  if r["model"] == model and r["variant"] == variant and r.get("x_fp32")}
        if ratios:
            out[model] = {"points": ratios, "geomean": float(np.exp(np.mean(np.log(list(ratios.values())))))}
    return out


# ---------------------------------------------------------------- main
def providers_of(args: argparse.Namespace) -> list[str]:
    return list(PROVIDERS["cpu" if args.cpu_dry_run else args.backend])


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    def ints(text: str) -> list[int]:
        return [int(t) for t in text.split(",") if t]

    def floats(text: str) -> list[float]:
        return [float(t) for t in text.split(",") if t]

    def points(text: str) -> list[tuple[int, float]]:
        return [(int(t.split("x")[0]), float(t.split("x")[1])) for t in text.split(",") if t]

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--models", default="demo,base", help="demo, base, tiny (comma-separated)")
    parser.add_argument("--variants", default=None, help="default: all the backend can run")
    parser.add_argument("--seconds", type=floats, default=[4.0, 10.0])
    parser.add_argument("--batch", type=ints, default=[1, 8, 32])
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--point-budget-s", type=float, default=12.0,
                        help="fewer repeats (not fewer than --min-repeats) where a point would take longer")
    parser.add_argument("--min-repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="ONNX Runtime intra-op threads (default: its own)")
    parser.add_argument("--calib-set", default="demo-calib", help="speech set for calibration clips, if it exists")
    parser.add_argument("--calib-clips", type=int, default=4)
    parser.add_argument("--eval-set", default="demo-eval", help="speech set for the accuracy check, if it exists")
    parser.add_argument("--accuracy-clips", type=int, default=24, help="0: no accuracy check")
    parser.add_argument("--interleave-variants", default="fp32,int8,int8-cpu",
                        help="variants re-timed interleaved in one process, for robust ratios")
    parser.add_argument("--interleave-points", type=points, default=[(1, 10.0), (8, 4.0), (32, 4.0)],
                        help="BATCHxSECONDS,... (default 1x10,8x4,32x4)")
    parser.add_argument("--interleave-rounds", type=int, default=5, help="0: no interleaved run")
    parser.add_argument("--mixed-plan", type=Path, default=None, help="PrecisionPlan JSON (e.g. a found plan)")
    parser.add_argument("--work", type=Path, default=None, help="folder for the variants (default: temporary)")
    parser.add_argument("--timeout", type=float, default=1200.0, help="per (model, variant) timing process")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--cpu-dry-run", action="store_true",
                        help="with --backend cuda: run the CUDA variants and code path on the CPU EP (a rehearsal)")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    known = CPU_VARIANTS if args.backend == "cpu" else CUDA_VARIANTS
    args.variant_list = args.variants.split(",") if args.variants else list(known)
    bad = [v for v in args.variant_list if v not in known]
    if bad:
        parser.error(f"variants {bad} do not run on the {args.backend} backend; choose from {', '.join(known)}")
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
        variants, info = prepare_model(model, args.variant_list, work, calib, args.mixed_plan)
        info["variants"] = {v.name: {k: val for k, val in asdict(v).items() if k not in ("model", "name", "path")}
                            for v in variants}
        models[model] = info
        for variant in variants:
            print(f"[{model}] timing {variant.name} ...", flush=True)
            results[(model, variant.name)] = time_variant(variant, args, clips_path, machine, work)
        chosen = [v for v in variants if v.name in args.interleave_variants]
        if args.interleave_rounds and len(chosen) > 1:
            print(f"[{model}] interleaved {', '.join(v.name for v in chosen)} at {args.interleave_points} ...",
                  flush=True)
            interleaved_runs[model] = interleaved(chosen, list(np.load(clips_path)), args.interleave_points,
                                                  args.interleave_rounds, providers_of(args), args.threads)
        if model == "demo" and args.backend == "cpu" and args.accuracy_clips:
            print(f"[{model}] accuracy check on {args.accuracy_clips} clips of {args.eval_set} ...", flush=True)
            accuracy = accuracy_check(variants, args.eval_set, args.accuracy_clips, args.threads)
    rows = rows_of(results)
    table = format_table(rows)
    print("\n" + table)
    gains = {v: speedups(rows, v) for v in ("int8", "int8-cpu", "mixed", "mixed-cpu", "fp16", "fp16-ort")
             if any(r.get("variant") == v for r in rows)}
    for variant, per_model in gains.items():
        for model, g in per_model.items():
            print(f"{variant} / fp32 p50 ({model}): geomean {g['geomean']:.2f} over {len(g['points'])} points")
    for model, per_point in interleaved_runs.items():
        for point, res in per_point.items():
            ratios = ", ".join(f"{n} {r:.2f}" for n, r in res["x_fp32"].items() if n != "fp32")
            print(f"interleaved ({model}, {point}, {res['rounds']} rounds): p50 / fp32: {ratios}")
    if accuracy:
        print("accuracy:", json.dumps(accuracy, indent=1))
    record = {"benchmark": "inference", "backend": args.backend, "providers": providers_of(args),
              "cpu_dry_run": args.cpu_dry_run,
              "command": "python benchmarks/inference.py " + " ".join(sys.argv[1:] if argv is None else argv),
              "machine": machine, "packages": package_versions(),
              "onnxruntime": __import__("onnxruntime").__version__,
              "environment": {k: os.environ.get(k) for k in ("OPENBLAS_CORETYPE", "OMP_NUM_THREADS")},
              "config": {"seconds": args.seconds, "batch": args.batch, "warmup": args.warmup,
                         "repeats": args.repeats, "point_budget_s": args.point_budget_s,
                         "min_repeats": args.min_repeats, "threads": args.threads or "onnxruntime default",
                         "calibration_clips": calib_info, "timing_clips": timing_info},
              "models": models, "rows": rows, "speedups_vs_fp32": gains, "interleaved": interleaved_runs,
              "accuracy": accuracy,
              "raw": {f"{m}/{v}": r for (m, v), r in results.items()}, "tensorrt": TENSORRT_NOTE,
              "wall_s": round(time.perf_counter() - started, 1)}
    write_json_atomic(args.out, record)
    print(f"\nwrote {args.out} ({record['wall_s']:.0f} s)")
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except WorkbenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(1)

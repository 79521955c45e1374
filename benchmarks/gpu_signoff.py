"""GPU calibration and sign-off on ONNX Runtime CUDA (issue 23's show), run on the lent H200.

1. Calibrate the model (``--model``: the shipped demo model, or a random-weight Wav2Vec2 of a size from
   ``workbench/model/synthetic.py``, e.g. ``base``, built in ``--work``) on the same calibration set twice, statistics on ``ort-cpu`` and on ``ort-cuda``
   (the calibrate job with ``--backend``), for the demo's method (percentile 99.99) and for ``max``, and
   compare the scales tensor by tensor against a stated tolerance (see ``TOLERANCE``).
2. Build FP32, FP16, INT8 (the CPU cache's scales) and a fixed mixed plan (feature-encoder convs 0-2 in FP32,
   the rest INT8), and sign them off on the evaluation set twice: on ``ort-cuda`` with the deployment target
   ``ort-cuda`` (latency on the target: the verdict may pick a winner by the interval rule) and on ``ort-cpu``
   (accuracy only), and compare the WER and transcripts of the two backends.

    python benchmarks/gpu_signoff.py --calib-set SETS/demo-calib --eval-set SETS/demo-eval --work /tmp/w --out OUT
    python benchmarks/gpu_signoff.py --model base ...   # Wav2Vec2-base-size, random weights (seed 0)

A random-weight model transcribes noise: its WER (near 100 %) says nothing about recognition quality. It is
there to compare the CPU and CUDA transcripts of the same graphs at the base model's size (12 layers, 768
wide, about 94 M parameters), and the scales and latency at that size.

Writes ``gpu_signoff.json`` (the figures) and the two sign-off reports (``signoff-ort-cuda.md/.html``,
``signoff-ort-cpu.md``) into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from workbench.model.synthetic import SIZES  # noqa: E402

# Scales from GPU statistics equal the CPU path's within: for ``max`` 1e-3 relative (the maximum of the same
# activations; CUDA kernels sum in another order and cuBLAS may use TF32 for FP32 GEMMs, about 1e-3 relative
# on a product); for histogram methods two histogram bins of that tensor (bin width = its max / 2048): the
# threshold is a bin edge, and activations that move by float rounding can carry a count across an edge and
# move the chosen edge by a bin.
TOLERANCE = {"max_relative": 1e-3, "histogram_bins": 2}


def compare_scales(
    cpu: dict[str, float], gpu: dict[str, float], cpu_max: dict[str, float], method: str
) -> dict:
    rows = []
    for name in sorted(cpu):
        a, b = cpu[name], gpu.get(name, float("nan"))
        rel = abs(a - b) / max(abs(a), 1e-30)
        if method == "max":
            limit = TOLERANCE["max_relative"] * abs(a)
        else:
            limit = TOLERANCE["histogram_bins"] * cpu_max[name] / 2048 + TOLERANCE["max_relative"] * abs(a)
        rows.append(
            {
                "tensor": name,
                "cpu": a,
                "gpu": b,
                "relative": rel,
                "limit_abs": limit,
                "within": bool(abs(a - b) <= limit),
            }
        )
    rels = np.array([r["relative"] for r in rows])
    return {
        "method": method,
        "tensors": len(rows),
        "within_tolerance": int(sum(r["within"] for r in rows)),
        "identical": int(sum(r["cpu"] == r["gpu"] for r in rows)),
        "max_relative": float(rels.max()),
        "median_relative": float(np.median(rels)),
        "worst": sorted(rows, key=lambda r: -r["relative"])[:5],
        "outside": [r for r in rows if not r["within"]],
    }


def model_folder(name: str, work: Path) -> tuple[Path, str]:
    """The model's Hugging Face folder and a line saying what its weights are."""
    from workbench.model.synthetic import save_random_wav2vec2
    from workbench.resources import demo_model_dir

    if name == "demo":
        return demo_model_dir(), "the shipped demo model (trained weights)"
    folder = work / "models" / f"{name}-random"
    if not (folder / "config.json").exists():
        save_random_wav2vec2(folder, name, seed=0)
    return folder, (
        f"Wav2Vec2 {name}-size with RANDOM weights (seed 0): its WER compares the CPU and CUDA "
        "transcripts of the same graphs, not recognition quality"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calib-set", required=True)
    parser.add_argument("--eval-set", required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--model",
        default="demo",
        choices=("demo", *SIZES),
        help="demo: the shipped model; a size: a random-weight Wav2Vec2 of that size (seed 0)",
    )
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--batch-sizes", default="1,8")
    parser.add_argument(
        "--gpu", default="ort-cuda", help=argparse.SUPPRESS
    )  # ort-cpu: a smoke test without a GPU
    args = parser.parse_args()

    import onnxruntime as ort
    from inference_bench.prep import fixed_mixed_plan

    from workbench.calibration import cache as cache_mod
    from workbench.calibration.methods import MethodSpec
    from workbench.evaluate.latency import LatencyConfig
    from workbench.evaluate.machine import machine_info
    from workbench.jobs import calibrate, signoff
    from workbench.quantize.qdq import build_variant

    started = time.time()
    args.out.mkdir(parents=True, exist_ok=True)
    model_dir, weights = model_folder(args.model, args.work)
    print(f"model: {weights}", flush=True)
    engines = args.work / "engines"
    record: dict = {
        "benchmark": "gpu_signoff",
        "model": args.model,
        "weights": weights,
        "onnxruntime": ort.__version__,
        "providers": ort.get_available_providers(),
        "machine": machine_info(),
        "load_before": os.getloadavg(),
        "tolerance": TOLERANCE,
        "calibration": {},
    }
    caches = {}
    for method in (MethodSpec("percentile", 99.99), MethodSpec("max")):
        per_backend = {}
        for backend in ("ort-cpu", args.gpu):
            t0 = time.perf_counter()
            result = calibrate.run(
                calibrate.CalibrateInputs(
                    model_dir, args.calib_set, method, engines=engines, calib_root=args.work, backend=backend
                )
            )
            per_backend[backend] = (result, time.perf_counter() - t0)
            print(
                f"calibrated {method.name} on {backend} in {per_backend[backend][1]:.1f} s: {result.cache}",
                flush=True,
            )
        cpu_cache = cache_mod.load(per_backend["ort-cpu"][0].cache)
        gpu_cache = cache_mod.load(per_backend[args.gpu][0].cache)
        caches[method.name] = (cpu_cache, gpu_cache, per_backend)
    max_cpu = caches["max"][0].amax()  # each tensor's max: the histogram bin width is max / 2048
    for name, (cpu_cache, gpu_cache, per_backend) in caches.items():
        record["calibration"][name] = {
            **compare_scales(cpu_cache.amax(), gpu_cache.amax(), max_cpu, name),
            "seconds": {b: round(s, 2) for b, (_, s) in per_backend.items()},
            "devices": {b: r.device for b, (r, _) in per_backend.items()},
            "caches": {b: str(r.cache) for b, (r, _) in per_backend.items()},
        }
    cpu_result = caches["percentile"][2]["ort-cpu"][0]
    fp32 = cpu_result.fp32_onnx
    import onnx

    mixed = fp32.with_name("model.mixed-fixed.onnx")
    build_variant(fp32, caches["percentile"][0].amax(), fixed_mixed_plan(onnx.load(str(fp32))), mixed)
    candidates = [
        ("fp32", fp32),
        ("fp16", signoff.fp16_variant(fp32)),
        ("int8", cpu_result.int8_onnx),
        ("mixed", mixed),
    ]
    batches = tuple(int(b) for b in args.batch_sizes.split(","))
    results = {}
    for backend, latency in (
        ("ort-cuda", LatencyConfig(batches, warmup=3, repeats=args.repeats)),
        ("ort-cpu", None),
    ):
        run_on = args.gpu if backend == "ort-cuda" else backend
        t0 = time.perf_counter()
        results[backend] = signoff.run(
            signoff.SignoffInputs(
                eval_set=args.eval_set,
                out_dir=args.work / f"signoff-{backend}",
                candidates=candidates,
                calib_set=args.calib_set,
                cache=cpu_result.cache,
                latency=latency,
                backend=run_on,
                target=args.gpu,
                engines=engines,
                calib_root=args.work,
                resamples=1000,
            )
        )
        print(
            f"signed off on {backend} in {time.perf_counter() - t0:.1f} s: {results[backend].record['decision']['line']}",
            flush=True,
        )
        for kind in ("markdown", "html"):
            shutil.copyfile(
                results[backend].paths[kind],
                args.out / f"signoff-{backend}{results[backend].paths[kind].suffix}",
            )
        report = args.out / f"signoff-{backend}{results[backend].paths['markdown'].suffix}"
        report.write_text(f"> Model: {weights}.\n\n" + report.read_text())
    wer = {}
    for name, _ in candidates:
        per = {b: results[b].record["accuracy"]["candidates"][name] for b in results}
        hyps = {b: [u["hyp"] for u in per[b]["utterances"]] for b in per}
        wer[name] = {
            "wer_cpu": per["ort-cpu"]["overall"]["wer"]["estimate"],
            "wer_cuda": per["ort-cuda"]["overall"]["wer"]["estimate"],
            "identical_transcripts": sum(a == b for a, b in zip(hyps["ort-cpu"], hyps["ort-cuda"])),
            "utterances": len(hyps["ort-cpu"]),
        }
    cuda = results["ort-cuda"].record
    record.update(
        {
            "wer_cpu_vs_cuda": wer,
            "decision_cuda": cuda["decision"],
            "decision_cpu": results["ort-cpu"].record["decision"],
            "verdicts_cuda": {v["candidate"]: v["summary"] for v in cuda["verdicts"]},
            "latency_cuda": {
                n: [
                    {k: p[k] for k in ("batch", "bucket", "clip_seconds", "p50_ms", "p90_ms", "repeats")}
                    for p in lat["points"]
                ]
                for n, lat in cuda["latency"].items()
            },
            "backend_cuda": cuda["backend"],
            "load_after": os.getloadavg(),
            "wall_s": round(time.time() - started, 1),
        }
    )
    (args.out / "gpu_signoff.json").write_text(json.dumps(record, indent=1, default=str))
    print(
        json.dumps(
            {
                "model": weights,
                "calibration": {
                    k: {x: v[x] for x in ("tensors", "within_tolerance", "identical", "max_relative")}
                    for k, v in record["calibration"].items()
                },
                "wer": wer,
                "cuda_verdict": cuda["decision"]["line"],
                "ratios": cuda["decision"]["ratios"],
            },
            indent=1,
            default=str,
        )
    )


if __name__ == "__main__":
    main()

"""PyTorch eager latency on a CUDA GPU: FP32 and FP16, demo model and a Wav2Vec2-base-sized model.

Run on the GPU machine: ``python benchmarks/gpu_torch.py --model workbench/demo_model --out X.json``.
Clips of 4 s and 10 s, batch 1/8/32; median/p99 latency from CUDA events after warm-up, clips/s,
peak GPU memory. Random weights are fine for the base-sized model (speed only).
"""

from __future__ import annotations

import argparse
import json
import platform
from pathlib import Path

import numpy as np
import torch


def base_sized():
    from transformers import Wav2Vec2Config, Wav2Vec2ForCTC

    return Wav2Vec2ForCTC(Wav2Vec2Config(vocab_size=32))  # wav2vec2-base dimensions


def time_model(model, batch: int, seconds: float, dtype: torch.dtype, repeats: int) -> dict:
    x = torch.randn(batch, int(seconds * 16000), device="cuda", dtype=dtype)
    torch.cuda.reset_peak_memory_stats()
    times = []
    with torch.inference_mode():
        for _ in range(5):
            model(x)
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            model(x)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
    p50 = float(np.median(times))
    return {
        "p50_ms": p50,
        "p90_ms": float(np.percentile(times, 90)),
        "p99_ms": float(np.percentile(times, 99)),
        "clips_per_s": batch / (p50 / 1000),
        "peak_gpu_mb": torch.cuda.max_memory_allocated() / 2**20,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--repeats", type=int, default=30)
    args = ap.parse_args()
    from transformers import Wav2Vec2ForCTC

    models = {"wav2vec2-base-size (random)": base_sized()}
    if args.model:
        models = {"demo": Wav2Vec2ForCTC.from_pretrained(str(args.model)), **models}
    rows = []
    for name, model in models.items():
        for precision, dtype in (("fp32", torch.float32), ("fp16", torch.float16)):
            m = model.to("cuda", dtype=dtype).eval()
            for seconds in (4.0, 10.0):
                for batch in (1, 8, 32):
                    r = time_model(m, batch, seconds, dtype, args.repeats)
                    rows.append(
                        {
                            "model": name,
                            "backend": "torch-eager-cuda",
                            "precision": precision,
                            "clip_s": seconds,
                            "batch": batch,
                            **r,
                        }
                    )
                    print(
                        f"{name:28} {precision} {seconds:4.0f}s b{batch:<3} p50 {r['p50_ms']:8.2f} ms "
                        f"p99 {r['p99_ms']:8.2f} ms {r['clips_per_s']:8.1f} clips/s {r['peak_gpu_mb']:8.0f} MB"
                    )
            model.float()
    machine = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "platform": platform.platform(),
        "cpu_count": __import__("os").cpu_count(),
    }
    args.out.write_text(json.dumps({"machine": machine, "results": rows}, indent=2))


if __name__ == "__main__":
    main()

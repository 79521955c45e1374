"""GPU-only measurements of the inference benchmark: NVML memory and device-resident timing (IO binding)."""

from __future__ import annotations

import os
import time

import numpy as np


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
    except Exception as exc:
        return None, f"unavailable: {type(exc).__name__}"


def device_resident(
    session, buckets: dict, batches: tuple[int, ...], config, device: str = "cuda"
) -> list[dict]:
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
            rows.append(
                {
                    "batch": batch,
                    "bucket": bucket,
                    "device_p50_ms": float(np.percentile(times, 50)),
                    "device_p99_ms": float(np.percentile(times, 99)),
                    "device_repeats": len(times),
                }
            )
    return rows

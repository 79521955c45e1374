"""What machine and which package versions produced a figure (recorded with every measurement)."""

from __future__ import annotations

import os
import platform
from importlib import metadata

PACKAGES: tuple[str, ...] = (
    "workbench",
    "numpy",
    "onnx",
    "onnxruntime",
    "onnxruntime-gpu",
    "jiwer",
    "matplotlib",
    "torch",
    "transformers",
    "onnx-graphsurgeon",
    "polygraphy",
    "tensorrt",
    "tensorrt-rtx-cu13-bindings",
    "psutil",
)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_info() -> dict[str, str | int | float | None]:
    """Host, OS, CPU model, usable cores, total memory; GPU name when ``nvidia-smi`` is present; whether ONNX
    Runtime's U8S8 integer GEMMs are exact on this CPU (x86 without VNNI: they saturate)."""
    import shutil
    import subprocess

    import psutil

    from workbench.backends.cpu_int8 import u8s8_exact

    gpu = None
    if shutil.which("nvidia-smi"):
        try:
            gpu = (
                subprocess.run(
                    ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                    capture_output=True,
                    text=True,
                    timeout=10,
                ).stdout.strip()
                or None
            )
        except (OSError, subprocess.SubprocessError):
            gpu = None
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 0
    return {
        "hostname": platform.node(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "cpu": _cpu_model(),
        "usable_cores": cores,
        "logical_cores": os.cpu_count(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "gpu": gpu,
        "int8_gemm": u8s8_exact()[1],
    }


def package_versions(packages: tuple[str, ...] = PACKAGES) -> dict[str, str]:
    """Installed versions of the packages that matter to a result (absent ones are left out)."""
    out = {}
    for name in packages:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out

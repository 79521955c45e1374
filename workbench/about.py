"""What this installation is, for ``workbench --version``: the package version and where it runs from,
the workspace, and which inference back-ends import here (TensorRT, TensorRT-RTX, ONNX Runtime with
its execution providers). Every back-end is probed through ``workbench.optional``, so none is required."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

from workbench import __version__
from workbench.backends.tensorrt.loader import CANDIDATES as TENSORRT_MODULES
from workbench.optional import try_import

TENSORRT_NAMES = {"tensorrt": "TensorRT", "tensorrt-rtx": "TensorRT-RTX"}


def _distributions(module: str) -> list[str]:
    """The installed distributions providing top-level ``module`` (onnxruntime vs onnxruntime-gpu, ...)."""
    try:
        return sorted(set(metadata.packages_distributions().get(module, [])))
    except Exception:
        return []


def tensorrt_lines() -> list[str]:
    """One line per TensorRT flavour: its version, or why it is not usable."""
    lines = []
    for module_name, flavour in TENSORRT_MODULES:
        module, why = try_import(module_name)
        label = f"{TENSORRT_NAMES.get(flavour, flavour)} ({module_name})"
        lines.append(
            f"{label}: {getattr(module, '__version__', '?')}" if module is not None else f"{label}: {why}"
        )
    return lines


def onnxruntime_line() -> str:
    """ONNX Runtime's version, the distribution it came from and its execution providers."""
    ort, why = try_import("onnxruntime")
    if ort is None:
        return f"ONNX Runtime: {why}"
    dists = _distributions("onnxruntime")
    providers = ", ".join(ort.get_available_providers())
    return f"ONNX Runtime: {ort.__version__} [{', '.join(dists) or 'onnxruntime'}] providers: {providers}"


def version_text(workspace: Path | None = None) -> str:
    """The ``--version`` report: package, location, workspace, back-ends."""
    import workbench

    lines = [f"workbench {__version__} ({Path(workbench.__file__).parent})"]
    if workspace is not None:
        lines.append(f"workspace: {workspace}")
    lines += tensorrt_lines()
    lines.append(onnxruntime_line())
    return "\n".join(lines)

"""The device a backend's numbers come from: ``cpu <machine>`` for ``ort-cpu``, else the CUDA GPU torch sees.

The factory asks it whether a GPU is there; the runners and the jobs record it beside their numbers.
"""

from __future__ import annotations

import platform

from workbench.optional import try_import


def cuda_device() -> tuple[bool, str]:
    """(a CUDA GPU is visible to torch, its description)."""
    torch, why = try_import("torch")
    if torch is None:
        return False, f"torch {why}"
    if not torch.cuda.is_available():
        return False, "no CUDA GPU is visible to torch"
    major, minor = torch.cuda.get_device_capability(0)
    return True, f"cuda:0 {torch.cuda.get_device_name(0)} (compute capability {major}.{minor})"


def device_of(name: str) -> str:
    """The device a backend's numbers come from, as recorded beside them."""
    if name == "ort-cpu":
        return f"cpu {platform.machine()}"
    return cuda_device()[1]

"""Whether ONNX Runtime's uint8 x int8 (U8S8) integer GEMMs are exact on this CPU, and what to do where not.

On x86-64, ONNX Runtime's MLAS computes a U8S8 GEMM with ``vpmaddubsw`` unless the CPU has VNNI
(``avx512_vnni`` or ``avx_vnni``, whose ``vpdpbusd`` sums into int32). ``vpmaddubsw`` adds two
uint8 x int8 products into a *saturating* int16: 2 x 255 x 127 = 64770 does not fit, so wherever two
neighbouring activations and weights are both large the sum is clipped and the output is wrong (measured
here on a tiny CNN: 10 % of the outputs off by several units). uint8 x uint8 (U8U8) GEMMs widen to int16
before multiplying and never saturate. ONNX Runtime's quantization guide says to use U8U8 or
``reduce_range`` (7-bit weights) on such CPUs; its session option ``session.x64quantprecision`` converts
int8 weights of the fused integer nodes to uint8 at session load (where its own check says U8S8 may
overflow). Other architectures (ARM: ``udot``/``sdot``) have no such problem.

The flags come from ``/proc/cpuinfo``; where that file is missing the CPU is treated as one without VNNI
(uint8 weights are exact on every CPU).
"""

from __future__ import annotations

import platform
from pathlib import Path

from workbench.config import ORT_CPU_WEIGHT_TYPES as WEIGHT_TYPES
from workbench.errors import WorkbenchError

VNNI_FLAGS: tuple[str, ...] = ("avx512_vnni", "avx_vnni")
X86_MACHINES = frozenset({"x86_64", "amd64", "i386", "i686", "x86"})
# ONNX Runtime session config key (kOrtSessionOptionsAvx2PrecisionMode): int8 weights of MatMulIntegerToFloat,
# QGemm, QLinearConv, ... become uint8 at session load (only where ORT's own check says U8S8 may overflow)
PRECISION_MODE_KEY = "session.x64quantprecision"


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str] | None:
    """The CPU's feature flags (first ``flags`` line of ``cpuinfo``); None when it cannot be read."""
    try:
        with open(cpuinfo, encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        return None
    return None


def u8s8_exact(machine: str | None = None, flags: frozenset[str] | None = None) -> tuple[bool, str]:
    """(whether ORT's U8S8 GEMMs are exact here, why); ``machine``/``flags`` default to this machine's."""
    machine = (machine or platform.machine()).lower()
    if machine not in X86_MACHINES:
        return True, f"{machine} CPU: ONNX Runtime's U8S8 GEMMs do not saturate"
    flags = cpu_flags() if flags is None else flags
    if flags is None:
        return False, "x86 CPU with unknown flags (no /proc/cpuinfo): assumed without VNNI"
    vnni = [f for f in VNNI_FLAGS if f in flags]
    if vnni:
        return True, f"x86 CPU with {vnni[0]}: ONNX Runtime's U8S8 GEMMs use vpdpbusd (int32 sums, exact)"
    return False, (
        "x86 CPU without VNNI (no avx512_vnni/avx_vnni): ONNX Runtime's U8S8 GEMMs use vpmaddubsw, "
        "whose int16 pair sums saturate"
    )


def int8_weight_type(
    requested: str = "auto", machine: str | None = None, flags: frozenset[str] | None = None
) -> tuple[str, str]:
    """The weight type ("u8" or "s8") for integer GEMMs on ORT's CPU EP, and why.

    ``auto``: int8 where U8S8 is exact on this CPU (the faster kernels there: VNNI), else uint8 with zero
    point 128 (the same values, U8U8 kernels). ``u8``/``s8``: as asked; ``s8`` on a CPU where U8S8 saturates
    says so (the file is for another machine; the workbench's own sessions still compute it exactly, see
    ``PRECISION_MODE_KEY``).
    """
    if requested not in WEIGHT_TYPES:
        raise WorkbenchError(
            f"int8 weight type {requested!r} is not one of {', '.join(WEIGHT_TYPES)}: "
            "use auto (what this CPU computes exactly), u8 (every CPU) or s8 (VNNI CPUs)"
        )
    exact, why = u8s8_exact(machine, flags)
    if requested == "u8":
        return "u8", f"uint8 weights asked for (exact on every CPU); here: {why}"
    if requested == "s8":
        return "s8", ("int8 weights asked for; " + ("exact here: " if exact else "NOT exact here: ") + why)
    if exact:
        return "s8", f"auto: int8 weights, {why}"
    return "u8", f"auto: uint8 weights (zero point 128, same values, U8U8 kernels), {why}"

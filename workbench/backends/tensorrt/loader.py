"""The one helper that imports TensorRT: ``tensorrt`` first, else ``tensorrt_rtx_bindings``."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

from workbench.errors import WorkbenchError

INSTALL_HINT = (
    "install TensorRT-RTX (builds engines on any machine, even without a GPU): "
    "pip install tensorrt-rtx-cu13-libs tensorrt-rtx-cu13-bindings  (or pip install 'workbench[trt]'); "
    "or install NVIDIA TensorRT 10.x/11.x (module 'tensorrt') where it is available"
)
CANDIDATES: tuple[tuple[str, str], ...] = (
    ("tensorrt", "tensorrt"),
    ("tensorrt_rtx_bindings", "tensorrt-rtx"),
)


@dataclass(frozen=True)
class TensorRT:
    """An imported TensorRT flavour and what the workbench needs to know about it."""

    module: ModuleType
    flavour: str  # "tensorrt" or "tensorrt-rtx"
    version: str

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    @property
    def is_rtx(self) -> bool:
        return self.flavour == "tensorrt-rtx"

    @property
    def has_timing_cache(self) -> bool:
        """TensorRT-RTX keeps the timing-cache API but documents it as a no-op."""
        return not self.is_rtx

    @property
    def has_implicit_int8(self) -> bool:
        """Legacy implicit quantization (BuilderFlag.INT8 + calibrator): TensorRT <= 10 only."""
        return (
            not self.is_rtx
            and self.major <= 10
            and hasattr(self.module, "IInt8EntropyCalibrator2")
            and hasattr(self.module.BuilderFlag, "INT8")
        )

    def network_flags(self, strongly_typed: bool = True) -> int:
        """Network creation flags: STRONGLY_TYPED where the flavour has it and it is asked for.

        TensorRT 11 and TensorRT-RTX networks are always strongly typed (the flag is accepted);
        TensorRT 10 needs it so that precision comes from the ONNX graph (Q/DQ, Cast, FP16 tensors).
        """
        flag_enum = self.module.NetworkDefinitionCreationFlag
        if strongly_typed and hasattr(flag_enum, "STRONGLY_TYPED"):
            return 1 << int(flag_enum.STRONGLY_TYPED)
        return 0

    def describe(self) -> dict[str, str]:
        return {"flavour": self.flavour, "module": self.module.__name__, "version": self.version}


def load_tensorrt(prefer: str | None = None) -> TensorRT:
    """Import a TensorRT flavour (``prefer`` = "tensorrt" or "tensorrt-rtx" to pick one).

    Raises WorkbenchError saying what to install when none is importable.
    """
    candidates = [c for c in CANDIDATES if prefer in (None, c[1])]
    if not candidates:
        raise WorkbenchError(f"unknown TensorRT flavour {prefer!r}; use one of {[c[1] for c in CANDIDATES]}")
    errors = []
    for module_name, flavour in candidates:
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:  # also covers sys.modules[name] = None
            errors.append(f"{module_name}: {exc}")
            continue
        version = str(getattr(module, "__version__", "0"))
        if flavour == "tensorrt" and int(version.split(".")[0]) < 10:
            errors.append(f"tensorrt {version} is older than 10 (no strongly typed networks)")
            continue
        return TensorRT(module, flavour, version)
    raise WorkbenchError("no usable TensorRT module (" + "; ".join(errors) + "). To fix, " + INSTALL_HINT)

"""Legacy implicit INT8 for TensorRT <= 10: a calibrator that serves the workbench's calibration cache.

TensorRT reads the cache through ``read_calibration_cache`` and, finding scales for every tensor,
never asks for data (``get_batch`` returns None). TensorRT only accepts a cache stamped with its own
version and its calibrator's algorithm, so the cache is served re-stamped for the running TensorRT
and ``EntropyCalibration2`` (this calibrator's class); the scales are served unchanged. The class is defined only when the real
``tensorrt`` with ``IInt8EntropyCalibrator2`` is importable (never on TensorRT 11 or TensorRT-RTX).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from workbench.backends.tensorrt.cache_header import cache_algorithm, stamped
from workbench.errors import WorkbenchError


def read_cache(path: Path) -> bytes:
    try:
        blob = Path(path).read_bytes()
    except OSError as exc:
        raise WorkbenchError(f"cannot read calibration cache {path}: {exc}") from exc
    cache_algorithm(blob)
    return blob


def _legacy_module() -> Any | None:
    from workbench.backends.tensorrt.loader import load_tensorrt

    try:
        trt = load_tensorrt(prefer="tensorrt")
    except WorkbenchError:
        return None
    return trt.module if trt.has_implicit_int8 else None


_trt = _legacy_module()

if _trt is not None:
    _trt_version = _trt.__version__

    # the base class comes from the optional tensorrt module, known only at run time
    class CacheCalibrator(_trt.IInt8EntropyCalibrator2):  # type: ignore[name-defined]
        """Serves a calibration cache file; needs no data."""

        def __init__(self, cache_path: Path, batch_size: int = 1) -> None:
            super().__init__()
            self.cache_path = Path(cache_path)
            self.cache = stamped(read_cache(self.cache_path), _trt_version, "EntropyCalibration2")
            self.batch_size = batch_size

        def get_batch_size(self) -> int:
            return self.batch_size

        def get_batch(self, names: list[str]) -> None:
            return None  # everything comes from the cache

        def read_calibration_cache(self) -> bytes:
            return self.cache

        def write_calibration_cache(self, cache: bytes) -> None:
            return None  # the workbench's cache is the source of truth; never overwritten here


def configure_legacy_int8(trt: Any, config: Any, cache_path: Path) -> Any:
    """Turn on implicit INT8 (and FP16 fallback) in ``config``, calibrated from ``cache_path``."""
    if _trt is None or not trt.has_implicit_int8:
        raise WorkbenchError(
            "implicit INT8 needs NVIDIA TensorRT <= 10 (module 'tensorrt'); with TensorRT 11 or "
            "TensorRT-RTX build the Q/DQ ONNX variant instead"
        )
    calibrator = CacheCalibrator(cache_path)
    config.set_flag(trt.module.BuilderFlag.INT8)
    config.set_flag(trt.module.BuilderFlag.FP16)
    config.int8_calibrator = calibrator
    return calibrator

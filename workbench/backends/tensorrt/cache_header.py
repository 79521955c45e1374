"""The first line of TensorRT's legacy calibration cache: ``TRT-<version number>-<algorithm>`` (no TensorRT import).

The header is a compatibility stamp that TensorRT (<= 10, implicit INT8) checks before it uses the
scales: the version number is TensorRT's ``NV_TENSORRT_VERSION`` — major*1000 + minor*100 + patch up
to TensorRT 8 (``TRT-8600`` is 8.6.0), major*10000 + minor*100 + patch from TensorRT 10
(``TRT-100300`` is 10.3.0) — and a cache stamped for another version or another calibrator
algorithm is rejected. ``stamped`` re-stamps the same scales for another TensorRT; the calibration
package writes caches with it and the legacy calibrator serves them with it.
"""

from __future__ import annotations

from workbench.errors import WorkbenchError


def trt_version_number(version: str) -> int:
    """TensorRT's ``NV_TENSORRT_VERSION`` for a version string such as ``"10.3.0.26"`` or ``"8.6.1"``."""
    try:
        major, minor, patch = (int(p) for p in (str(version).split(".") + ["0", "0"])[:3])
    except ValueError as exc:
        raise WorkbenchError(f"TensorRT version {version!r} is not like 10.3.0") from exc
    return major * (10000 if major >= 10 else 1000) + minor * 100 + patch


def header(trt_version: str, algorithm: str) -> str:
    """``TRT-<version number>-<algorithm>``."""
    return f"TRT-{trt_version_number(trt_version)}-{algorithm}"


def cache_algorithm(blob: bytes) -> str:
    """The calibration algorithm named in a legacy cache header (``TRT-<v>-EntropyCalibration2``)."""
    first = blob.split(b"\n", 1)[0].decode("ascii", "replace").strip()
    parts = first.split("-", 2)
    if len(parts) < 3 or parts[0] != "TRT":
        raise WorkbenchError(
            f"not a TensorRT calibration cache (first line {first[:60]!r}); "
            "write one with the workbench's calibrate command"
        )
    return parts[2]


def stamped(blob: bytes, trt_version: str, algorithm: str | None = None) -> bytes:
    """The same cache with its header re-stamped for ``trt_version`` (and ``algorithm``, if given)."""
    current = cache_algorithm(blob)
    return header(trt_version, algorithm or current).encode("ascii") + b"\n" + blob.partition(b"\n")[2]

"""Calibration cache: TensorRT's legacy text format plus a JSON sidecar with provenance keys.

Text: first line ``TRT-<version number>-<algorithm>``, then one line per tensor ``name: xxxxxxxx``
with the big-endian IEEE-754 float32 bits of scale = amax / 127.
Sidecar ``<cache>.json``: the provenance keys (model hash, calibration set hash, method and its
parameters, tool version) and, from runs that recorded it, ``convergence`` (``convergence.Convergence``:
how far each range moved over the last quarter of the clips; older sidecars lack it) and, from runs with
accuracy-recovery options, ``recovery`` (what each technique did: ``workbench.calibration.recovery``), and from a
verb that assumed a left-out option (the embedded demo model), ``assumed`` (its lines; not a key). ``load_matching`` returns a cache only when every key matches; a
mismatch is reported, never used silently.

The header is TensorRT's compatibility stamp (``workbench.backends.tensorrt.cache_header``); files are
stamped for ``DEFAULT_TRT_VERSION`` and the TensorRT backend re-stamps them for the running version.
Algorithms: ``entropy`` is exactly TensorRT's ``EntropyCalibration2`` and ``max`` its
``MinMaxCalibration``. TensorRT has no percentile or MSE calibrator, so those caches carry the
``EntropyCalibration2`` stamp, the one TensorRT's default calibrator and ``trtexec --calib`` accept;
the scales were not chosen by entropy, and the sidecar's ``method`` key (shown by ``python -m workbench cache show``) records the true method.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.artifacts import sha256_bytes, write_json_atomic, write_text_atomic
from workbench.backends.tensorrt.cache_header import header
from workbench.config import DEFAULT_METHOD
from workbench.errors import WorkbenchError
from workbench.inputs.cache import FIX, cache_lines, check_sidecar
from workbench.inputs.problem import Where
from workbench.inputs.read import read_json, read_text

DEFAULT_TRT_VERSION = "10.3.0"  # the stamp written into cache files (TensorRT 10.3: JetPack 6, TAO caches)
ALGORITHMS = {
    "entropy": "EntropyCalibration2",
    "max": "MinMaxCalibration",
    "percentile": "EntropyCalibration2",
    "mse": "EntropyCalibration2",
}


def legacy_header(method: str, trt_version: str = DEFAULT_TRT_VERSION) -> str:
    """First line of a legacy cache holding ``method``'s scales, stamped for ``trt_version``."""
    if method not in ALGORITHMS:
        raise WorkbenchError(
            f"no legacy cache algorithm for method {method!r}; one of {', '.join(ALGORITHMS)}"
        )
    return header(trt_version, ALGORITHMS[method])


def scale_to_hex(scale: float) -> str:
    return struct.pack(">f", scale).hex()


def hex_to_scale(text: str) -> float:
    return struct.unpack(">f", bytes.fromhex(text))[0]


@dataclass
class CalibrationCache:
    """Scales per tensor (scale = amax / 127) and the keys of what they were made from."""

    scales: dict[str, float]
    keys: dict[str, Any]
    header: str
    convergence: dict[str, Any] | None = (
        None  # the sidecar's convergence record, as stored (None: not recorded)
    )
    recovery: dict[str, Any] | None = None  # what the accuracy-recovery options did (None: none asked for)
    assumed: list[str] | None = None  # what the verb that made it assumed for left-out options (no key)

    @classmethod
    def from_amax(
        cls, amax: dict[str, float], keys: dict[str, Any], trt_version: str = DEFAULT_TRT_VERSION
    ) -> CalibrationCache:
        header = legacy_header(str(keys.get("method", DEFAULT_METHOD)), trt_version)
        # round through float32 so the in-memory scales equal what the text file holds
        scales = {n: hex_to_scale(scale_to_hex(a / 127.0)) for n, a in sorted(amax.items())}
        return cls(scales, dict(keys), header)

    def amax(self) -> dict[str, float]:
        return {n: s * 127.0 for n, s in self.scales.items()}

    def to_text(self) -> str:
        return "\n".join([self.header] + [f"{n}: {scale_to_hex(s)}" for n, s in self.scales.items()]) + "\n"

    @classmethod
    def parse(
        cls, text: str, keys: dict[str, Any] | None = None, where: Where = Where("calibration cache", FIX)
    ) -> CalibrationCache:
        """Scales from a cache's text; a line that is not ``name: 8 hex digits`` or a scale that is not a
        finite number >= 0 is a ``BadInput`` naming the line."""
        header, values = cache_lines(text, where)
        scales = {}
        for name, value in values.items():
            scale = hex_to_scale(value)
            if not (math.isfinite(scale) and scale >= 0):
                raise where.key(name).fail(f"scale {value} is {scale}, not a finite number >= 0")
            scales[name] = scale
        return cls(scales, dict(keys or {}), header)

    @property
    def content_hash(self) -> str:
        return sha256_bytes(self.to_text().encode())

    def save(self, path: Path) -> None:
        write_text_atomic(path, self.to_text())
        meta = {
            "keys": self.keys,
            "content_hash": self.content_hash,
            "tensors": len(self.scales),
            "header": self.header,
        }
        if self.convergence is not None:
            meta["convergence"] = self.convergence
        if self.recovery is not None:
            meta["recovery"] = self.recovery
        if self.assumed:
            meta["assumed"] = self.assumed
        write_json_atomic(sidecar(path), meta)


def sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".json")


def load(path: Path) -> CalibrationCache:
    """A cache and its sidecar, checked (``workbench.inputs.cache``); anything damaged is a ``BadInput``."""
    path = Path(path)
    if not path.exists():
        raise WorkbenchError(f"calibration cache {path} not found")
    meta_path = sidecar(path)
    if not meta_path.exists():
        raise WorkbenchError(
            f"calibration cache {path} has no provenance sidecar {meta_path.name}; "
            "it cannot be checked against the model, so it is not used"
        )
    meta_where = Where(f"calibration cache sidecar {meta_path}", FIX)
    meta = check_sidecar(read_json(meta_path, meta_where), meta_where)
    where = Where(f"calibration cache {path}", FIX)
    cache = CalibrationCache.parse(read_text(path, where), meta["keys"], where)
    if cache.content_hash != meta["content_hash"]:
        raise WorkbenchError(f"calibration cache {path} was edited after it was written (hash mismatch)")
    cache.convergence = meta.get("convergence")
    cache.recovery = meta.get("recovery")
    cache.assumed = meta.get("assumed")
    return cache


def key_mismatches(expected: dict[str, Any], found: dict[str, Any]) -> list[str]:
    names = sorted(set(expected) | set(found))
    return [
        f"{k}: cache has {found.get(k)!r}, need {expected.get(k)!r}"
        for k in names
        if expected.get(k) != found.get(k)
    ]


def load_matching(path: Path, expected: dict[str, Any]) -> tuple[CalibrationCache | None, list[str]]:
    """(cache, []) when every key matches; (None, reasons) otherwise. Nothing is deleted."""
    if not path.exists():
        return None, ["no cache yet"]
    try:
        cache = load(path)
    except WorkbenchError as exc:
        return None, [str(exc)]
    problems = key_mismatches(expected, cache.keys)
    return (None, problems) if problems else (cache, [])


def require_matching(path: Path, expected: dict[str, Any]) -> CalibrationCache:
    cache, problems = load_matching(path, expected)
    if cache is None:
        raise WorkbenchError(
            f"calibration cache {path} does not match this model/set/method: "
            + "; ".join(problems)
            + ". Recalibrate (python -m workbench calibrate)."
        )
    return cache

"""Engine build from any ONNX file, with an engine cache under ``engines/`` and a timing cache.

The cache key is the sha256 of the ONNX file's hash (external data files included), the build settings and
the TensorRT flavour and version. Each engine ``<stem>-<key16>.engine`` has a JSON sidecar (provenance, with
the model the ONNX file names when the build job passes it; shapes, build time) and ``.layers.json`` (the precision summary of the parsed network). Writes are atomic.
"""

from __future__ import annotations

import datetime as _dt
import json
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench import __version__
from workbench.artifacts import sha256_bytes, sha256_file, write_bytes_atomic, write_json_atomic
from workbench.backends.tensorrt.loader import TensorRT, load_tensorrt
from workbench.backends.tensorrt.profile import Range, batch_range, input_shapes
from workbench.backends.tensorrt.summary import PrecisionSummary, summarise_network, summary_from_json
from workbench.errors import WorkbenchError
from workbench.workspace import area_path


@dataclass(frozen=True)
class BuildSettings:
    """Everything that changes the engine; all of it goes into the cache key."""

    batches: tuple[int, ...] = (1, 8, 32)
    samples: Range = field(default_factory=lambda: Range(16_000, 64_000, 128_000))
    strongly_typed: bool = True
    optimization_level: int | None = None
    legacy_int8_cache: Path | None = None  # TensorRT <= 10 implicit INT8 from a calibration cache
    calibration_set: dict[str, str] | None = None  # provenance of the durations, when they came from a set
    model: dict[str, Any] | None = (
        None  # the model the ONNX file names (provenance; its hash is in the ONNX's)
    )

    def key_fields(self) -> dict[str, Any]:
        out = {
            "batches": sorted(set(self.batches)),
            "samples": self.samples.as_list(),
            "strongly_typed": self.strongly_typed,
            "optimization_level": self.optimization_level,
            "legacy_int8_cache": sha256_file(self.legacy_int8_cache) if self.legacy_int8_cache else None,
            "profiling_verbosity": "detailed",
        }  # the engine inspector lists every layer's precisions
        return out


@dataclass
class BuildResult:
    engine_path: Path
    sidecar_path: Path
    summary_path: Path
    key: str
    build_time_s: float
    cached: bool
    engine_bytes: int
    summary: PrecisionSummary
    provenance: dict[str, Any]


def onnx_inputs(onnx_path: Path) -> list[tuple[str, list[int | str | None]]]:
    """Graph inputs (not initializers) and their dims: int, symbolic name, or None."""
    import onnx

    try:
        model = onnx.load(str(onnx_path), load_external_data=False)
    except Exception as exc:  # protobuf DecodeError and friends: not an ONNX file
        raise WorkbenchError(
            f"{onnx_path} is not a readable ONNX model ({type(exc).__name__}: {exc})"
        ) from exc
    inits = {i.name for i in model.graph.initializer}
    out = []
    for value in model.graph.input:
        if value.name in inits:
            continue
        dims: list[int | str | None] = []
        for d in value.type.tensor_type.shape.dim:
            dims.append(d.dim_value if d.HasField("dim_value") else (d.dim_param or None))
        out.append((value.name, dims))
    return out


def onnx_content_hash(onnx_path: Path) -> str:
    """sha256 of the ONNX file and of every external-data file its initializers point at."""
    import onnx

    digest = sha256_file(onnx_path)
    try:
        model = onnx.load(str(onnx_path), load_external_data=False)
    except Exception:  # unreadable files are reported by onnx_inputs with a clear message
        return digest
    locations = sorted(
        {
            entry.value
            for init in model.graph.initializer
            if init.data_location == onnx.TensorProto.EXTERNAL
            for entry in init.external_data
            if entry.key == "location"
        }
    )
    if not locations:
        return digest
    parts = [digest]
    for location in locations:
        data = onnx_path.parent / location
        if not data.is_file():
            raise WorkbenchError(f"{onnx_path} keeps weights in {location}, which is missing beside it")
        parts.append(f"{location}:{sha256_file(data)}")
    return sha256_bytes("\n".join(parts).encode())


def cache_key(onnx_sha: str, settings: BuildSettings, trt: TensorRT) -> str:
    payload = {"onnx_sha256": onnx_sha, "settings": settings.key_fields(), "tensorrt": trt.describe()}
    return sha256_bytes(json.dumps(payload, sort_keys=True).encode())


def build_engine(
    onnx_path: Path,
    settings: BuildSettings = BuildSettings(),
    engines_dir: Path | None = None,
    trt: TensorRT | None = None,
    force: bool = False,
) -> BuildResult:
    """Build (or reuse from the engine cache) a TensorRT engine for ``onnx_path``."""
    onnx_path = Path(onnx_path)
    if not onnx_path.is_file():
        raise WorkbenchError(f"no ONNX file at {onnx_path}")
    trt = trt or load_tensorrt()
    onnx_sha = onnx_content_hash(onnx_path)
    key = cache_key(onnx_sha, settings, trt)
    stem = f"{onnx_path.stem}-{key[:16]}"
    engines_dir = area_path("engines", engines_dir)
    engine_path = engines_dir / f"{stem}.engine"
    sidecar_path = engine_path.with_suffix(".json")
    summary_path = engine_path.with_suffix(".layers.json")
    if not force:
        hit = _cached(engine_path, sidecar_path, summary_path, key)
        if hit is not None:
            return hit
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # TensorRT-RTX marks timing-cache calls no-op
        return _build(
            onnx_path, onnx_sha, settings, trt, key, engine_path, sidecar_path, summary_path, engines_dir
        )


def _cached(engine_path: Path, sidecar_path: Path, summary_path: Path, key: str) -> BuildResult | None:
    if not (engine_path.is_file() and sidecar_path.is_file() and summary_path.is_file()):
        return None
    try:
        meta = json.loads(sidecar_path.read_text())
        summary = summary_from_json(json.loads(summary_path.read_text()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):  # damaged sidecars: rebuild
        return None
    if not isinstance(meta, dict) or not isinstance(meta.get("build_time_s"), (int, float)):
        return None
    if meta.get("key") != key or meta.get("engine_sha256") != sha256_file(engine_path):
        return None  # stale or damaged: rebuild rather than use it silently
    return BuildResult(
        engine_path,
        sidecar_path,
        summary_path,
        key,
        float(meta["build_time_s"]),
        True,
        engine_path.stat().st_size,
        summary,
        meta,
    )


def _build(
    onnx_path: Path,
    onnx_sha: str,
    settings: BuildSettings,
    trt: TensorRT,
    key: str,
    engine_path: Path,
    sidecar_path: Path,
    summary_path: Path,
    engines_dir: Path,
) -> BuildResult:
    t = trt.module
    logger = t.Logger(t.Logger.ERROR)
    builder = t.Builder(logger)
    legacy = settings.legacy_int8_cache is not None
    if legacy and not trt.has_implicit_int8:
        raise WorkbenchError(
            f"{trt.flavour} {trt.version} has no implicit INT8 calibration (TensorRT <= 10 only); "
            "build the Q/DQ ONNX variant instead, which every TensorRT accepts"
        )
    inputs = onnx_inputs(onnx_path)
    network = builder.create_network(trt.network_flags(settings.strongly_typed and not legacy))
    parser = t.OnnxParser(network, logger)
    if not parser.parse_from_file(str(onnx_path)):
        errors = [str(parser.get_error(i)) for i in range(parser.num_errors)]
        raise WorkbenchError(
            f"{trt.flavour} {trt.version} could not parse {onnx_path}: " + " | ".join(errors[:5])
        )
    if network.num_layers == 0:
        raise WorkbenchError(
            f"{trt.flavour} {trt.version} parsed {onnx_path} into an empty network; "
            "is it a complete ONNX model (with its external data files)?"
        )
    summary = summarise_network(network)
    config = builder.create_builder_config()
    if settings.optimization_level is not None:
        config.builder_optimization_level = settings.optimization_level
    if hasattr(t, "ProfilingVerbosity"):  # per-layer precisions in the engine inspector (inspector.py)
        config.profiling_verbosity = t.ProfilingVerbosity.DETAILED
    shapes = input_shapes(inputs, batch_range(settings.batches), settings.samples)
    profile = builder.create_optimization_profile()
    for name, triple in shapes.items():
        profile.set_shape(name, triple["min"], triple["opt"], triple["max"])
    config.add_optimization_profile(profile)
    timing_path, timing_cache = _attach_timing_cache(trt, config, Path(engines_dir))
    if settings.legacy_int8_cache is not None:
        from workbench.backends.tensorrt.calibrator import configure_legacy_int8

        _calibrator = configure_legacy_int8(
            trt, config, Path(settings.legacy_int8_cache)
        )  # alive until built
    start = time.perf_counter()
    serialized = builder.build_serialized_network(network, config)
    build_time = time.perf_counter() - start
    if serialized is None:
        raise WorkbenchError(
            f"{trt.flavour} {trt.version} parsed {onnx_path} but the engine build failed; "
            "rerun with a smaller profile (--batch, --min/--max seconds) or check the model"
        )
    data = bytes(memoryview(serialized))
    if timing_cache is not None and timing_path is not None:
        write_bytes_atomic(timing_path, bytes(memoryview(timing_cache.serialize())))
    provenance = {
        "key": key,
        "engine_sha256": sha256_bytes(data),
        "onnx": str(onnx_path),
        "onnx_sha256": onnx_sha,
        "settings": settings.key_fields(),
        "calibration_set": settings.calibration_set,
        "shapes": shapes,
        "tensorrt": trt.describe(),
        "workbench": __version__,
        "build_time_s": round(build_time, 4),
        "timing_cache": str(timing_path)
        if timing_path
        else f"not used: {trt.flavour} timing cache is a no-op",
        "built_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "precision_counts": summary.compute_precisions(),
        "layer_precisions": summary.layer_precisions(),
        "model": settings.model,
    }
    write_json_atomic(summary_path, summary.to_json())
    write_bytes_atomic(engine_path, data)
    write_json_atomic(sidecar_path, provenance)  # last: a sidecar means engine and summary are complete
    return BuildResult(
        engine_path, sidecar_path, summary_path, key, build_time, False, len(data), summary, provenance
    )


def _attach_timing_cache(trt: TensorRT, config: Any, engines_dir: Path) -> tuple[Path | None, Any]:
    """Load/attach ``engines/timing-<flavour>-<version>.cache`` (shared by builds); None on RTX."""
    if not trt.has_timing_cache:
        return None, None
    path = engines_dir / f"timing-{trt.flavour}-{trt.version}.cache"
    blob = path.read_bytes() if path.is_file() else b""
    cache = config.create_timing_cache(blob)
    config.set_timing_cache(cache, False)
    return path, cache

"""Inputs every analysis needs: the FP32 ONNX model and a calibration cache that belongs to it.

Without an explicit cache this is the calibrate job (export once, reuse a matching cache or calibrate).
With ``cache_path`` the cache is loaded and checked against the model: a cache made for another model
or another FP32 export is refused with a message that says what to do. The FP32 export is the
calibrate job's ``export_or_reuse`` either way. The model description (features, vocabulary, error unit)
is read first and comes along for every analysis. ``AnalysisInputs`` holds what compare and search share.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from workbench.artifacts import sha256_file
from workbench.backends.factory import ort_providers
from workbench.calibration import cache as cache_mod
from workbench.calibration.methods import METHODS, MethodSpec
from workbench.config import DEFAULT_BACKEND, DEFAULT_METHOD
from workbench.errors import WorkbenchError
from workbench.inputs.out_folder import check_out_folder
from workbench.jobs import calibrate
from workbench.model.description import ModelDescription, describe_model
from workbench.model.loading import check_model_source
from workbench.quantize.guard import guard_for_set
from workbench.resources import demo_model_dir
from workbench.speech.select import require_utterances
from workbench.speech.store import SpeechSet, load_set
from workbench.workspace import area_path, default_area


@dataclass
class Prepared:
    """Model hash and folder, FP32 ONNX, cache (path + parsed), calibration set, INT8-everywhere ONNX, the
    model's description, and the FP16 guard's FP32 nodes (node -> reason) from the calibration set's float
    statistics."""

    model: str
    model_hash: str
    folder: Path
    fp32_onnx: Path
    cache_path: Path
    cache: cache_mod.CalibrationCache
    calib_set: SpeechSet
    method: str
    int8_onnx: Path | None
    description: ModelDescription
    guard: dict[str, str] = field(default_factory=dict)

    @property
    def tag(self) -> str:
        """``<method>-<calibration set hash 12>``: names files made from this cache."""
        return f"{self.method}-{self.calib_set.content_hash[:12]}"

    def provenance(self) -> dict[str, str]:
        """Hashes of the model, FP32 ONNX, calibration cache and calibration set (every analysis file records them)."""
        return {
            "model": self.model_hash,
            "fp32_onnx": sha256_file(self.fp32_onnx),
            "cache": self.cache.content_hash,
            "calibration_set": self.calib_set.content_hash,
        }


def prepare(
    model: str | Path,
    calib_set: str | Path,
    method: str = DEFAULT_METHOD,
    root: Path | None = None,
    cache_path: Path | None = None,
    calib_root: Path | None = None,
    backend: str = DEFAULT_BACKEND,
    error_unit: str | None = None,
) -> Prepared:
    """FP32 ONNX + a cache for ``model``; calibrates (or reuses a matching cache) when none is given."""
    check_method(method)
    root, calib_root = area_path("engines", root), area_path("calib_sets", calib_root)
    speech_set = require_utterances(load_set(calib_set, root=calib_root), "calibration")
    description = describe_model(model, error_unit)  # an unsupported model stops here, before any work
    if cache_path is None:
        result = calibrate.run(
            calibrate.CalibrateInputs(
                description,
                str(speech_set.path),
                MethodSpec(method),
                engines=root,
                calib_root=calib_root,
                backend=backend,
            )
        )
        cache = cache_mod.load(result.cache)
        return Prepared(
            str(model),
            description.model_hash,
            result.fp32_onnx.parent,
            result.fp32_onnx,
            result.cache,
            cache,
            speech_set,
            method,
            result.int8_onnx,
            description,
            result.guard,
        )
    check_cache_file(cache_path)
    cache = cache_mod.load(Path(cache_path))
    mhash = description.model_hash
    if cache.keys.get("model") != mhash:
        raise WorkbenchError(
            f"calibration cache {cache_path} was made for another model (model hash "
            f"{str(cache.keys.get('model'))[:12]}, this model is {mhash[:12]}); run "
            f"python -m workbench calibrate --model {model} or drop --cache"
        )
    if cache.keys.get("calibration_set") != speech_set.content_hash:
        raise WorkbenchError(
            f"calibration cache {cache_path} was made from another calibration set than "
            f"{speech_set.name}; give the matching --calib-set or drop --cache"
        )
    fp32 = calibrate.export_or_reuse(description, root)
    if cache.keys.get("onnx") != sha256_file(fp32):
        raise WorkbenchError(
            f"calibration cache {cache_path} was made for another ONNX export than {fp32}; "
            "recalibrate (python -m workbench calibrate)"
        )
    guard, _ = guard_for_set(fp32, speech_set, fp32.parent, prepare=description.prepare)
    return Prepared(
        str(model),
        mhash,
        fp32.parent,
        fp32,
        Path(cache_path),
        cache,
        speech_set,
        str(cache.keys.get("method", method)),
        None,
        description,
        guard,
    )


def check_method(method: str) -> None:
    if method not in METHODS:
        raise WorkbenchError(f"--method must be one of {', '.join(METHODS)}, not {method!r}")


def check_cache_file(path: Path) -> None:
    if not Path(path).is_file():
        raise WorkbenchError(
            f"--cache {path} is not a file; give a .cache written by python -m workbench "
            "calibrate for this model, or drop --cache to reuse or make one"
        )


def named_set(name: str | Path | None, role: str, root: Path | None = None) -> SpeechSet | None:
    """The set named by an option (``None`` when not given), loaded and checked before any model work."""
    return require_utterances(load_set(name, root=root), role) if name else None


@dataclass(frozen=True)
class AnalysisInputs:
    """What the compare and search jobs share: the model, its calibration (set, method, optional cache),
    clips per condition, layer-group granularity, threads and where files go."""

    model: str | Path = field(default_factory=demo_model_dir)
    calib_set: str | Path = "demo-calib"
    method: str = DEFAULT_METHOD
    cache: Path | None = None
    per_condition: int = 2
    granularity: str = "group"
    threads: int | None = None
    out: Path | None = None
    engines: Path = field(default_factory=default_area("engines"))
    calib_root: Path = field(default_factory=default_area("calib_sets"))
    progress: bool = True
    backend: str = (
        DEFAULT_BACKEND  # where the model runs: ort-cpu or ort-cuda (layer outputs need ONNX Runtime)
    )
    error_unit: str | None = None  # wer or cer; None: what the model's vocabulary calls for

    @property
    def providers(self) -> list[str]:
        return ort_providers(self.backend)

    def check(self) -> None:
        """The shared options' checks that need no model work: method, the output folder, clips per condition, the
        model folder, the calibration set, the cache file."""
        check_method(self.method)
        if self.out is not None:
            check_out_folder(self.out)
        if self.per_condition < 1:
            raise WorkbenchError("--per-condition must be at least 1")
        check_model_source(self.model)
        named_set(self.calib_set, "calibration", self.calib_root)
        if self.cache is not None:
            check_cache_file(self.cache)
        ort_providers(self.backend)

    def prepare(self) -> Prepared:
        """Check the shared options, then the FP32 ONNX + cache (see ``prepare``)."""
        self.check()
        return prepare(
            self.model,
            self.calib_set,
            self.method,
            root=self.engines,
            cache_path=self.cache,
            calib_root=self.calib_root,
            backend=self.backend,
            error_unit=self.error_unit,
        )


def file_lines(files: dict[str, Path]) -> list[str]:
    """The files a job wrote, one per line."""
    return [f"  {key:>16}: {path}" for key, path in files.items()]

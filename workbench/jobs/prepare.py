"""Inputs every analysis needs: the FP32 ONNX model and a calibration cache that belongs to it.

Without an explicit cache this is the calibrate job (export once, reuse a matching cache or calibrate).
With ``cache_path`` the cache is loaded and checked against the model: a cache made for another model
or another FP32 export is refused with a message that says what to do. The FP32 export is the
calibrate job's ``export_or_reuse`` either way. The model description (features, vocabulary, error unit)
is read first and comes along for every analysis. A cache made with accuracy recovery brings its recovered
FP32 source (``Prepared.recovered``: the smoothed graph, bias correction per plan), from which
``Prepared.variant_runner`` and ``Prepared.build`` make every quantized variant; its options are in
``Prepared.provenance`` and ``Prepared.tag``, and a cache made with other options than the ones asked for is
refused. ``AnalysisInputs`` holds what compare and search share.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx

from workbench.artifacts import sha256_file
from workbench.backends.factory import ort_providers
from workbench.calibration import cache as cache_mod
from workbench.calibration import recovery as rec
from workbench.calibration.methods import METHODS, MethodSpec
from workbench.calibration.recovery import RecoveryOptions
from workbench.compare.sensitivity import VariantRunner
from workbench.config import DEFAULT_BACKEND, DEFAULT_METHOD
from workbench.errors import WorkbenchError
from workbench.inputs.out_folder import check_out_folder
from workbench.jobs import calibrate
from workbench.model.description import ModelDescription, describe_model
from workbench.model.loading import check_model_source
from workbench.quantize.guard import guard_for_set
from workbench.quantize.plan import PrecisionPlan
from workbench.quantize.qdq import build_variant
from workbench.quantize.recovered import RecoveredSource
from workbench.resources import demo_model_dir
from workbench.speech.select import require_calibration_role, require_utterances
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
    recovered: RecoveredSource | None = (
        None  # the cache's accuracy recovery: what quantized variants start from
    )

    @property
    def recovery_options(self) -> dict[str, Any] | None:
        """The recovery options the cache was made with (its ``recovery`` key; None: none)."""
        return self.cache.keys.get("recovery")

    @property
    def tag(self) -> str:
        """``<method>-<calibration set hash 12>`` (+ ``-<recovery tag>``, e.g. ``-rr-bc``): names files made from
        this cache."""
        base = f"{self.method}-{self.calib_set.content_hash[:12]}"
        options = recovery_of(self.recovery_options)
        return f"{base}-{options.tag()}" if options is not None and options.tag() else base

    def provenance(self) -> dict[str, Any]:
        """Hashes of the model, FP32 ONNX, calibration cache and calibration set, and the recovery options (None:
        none), which the cache's scales do not show (bias correction leaves them as they are): every analysis
        file records them."""
        return {
            "model": self.model_hash,
            "fp32_onnx": sha256_file(self.fp32_onnx),
            "cache": self.cache.content_hash,
            "calibration_set": self.calib_set.content_hash,
            "recovery": self.recovery_options,
        }

    def variant_runner(
        self, model: onnx.ModelProto, threads: int | None, providers: Sequence[str]
    ) -> VariantRunner:
        """Builds and runs this calibration's variants of ``model`` (the FP32 export, loaded): its ranges, the FP16
        guard, and the recovered source when the cache was made with recovery."""
        return VariantRunner(
            model,
            self.cache.amax(),
            threads,
            providers,
            self.description.prepare,
            self.guard,
            recovered=self.recovered,
        )

    def build(
        self, plan: PrecisionPlan, out_path: Path, model: onnx.ModelProto | None = None
    ) -> dict[str, Any] | None:
        """Write ``plan``'s variant (with its plan file) from this calibration: from the recovered source with bias
        correction for the plan's INT8 nodes when the cache was made with recovery, else from the FP32 export
        (``model``: the export, when loaded already). Returns the recovery record the plan file carries (which
        techniques were on, what bias correction changed; None without recovery)."""
        if self.recovered is None:
            build_variant(self.fp32_onnx, self.cache.amax(), plan, out_path, with_plan=True)
            return None
        export = model if model is not None else onnx.load(str(self.fp32_onnx))
        graph, record = self.recovered.for_plan(plan, self.recovered.source(export))
        build_variant(graph, self.cache.amax(), plan, out_path, with_plan=True, recovery=record)
        return record


def recovery_of(params: dict[str, Any] | None) -> RecoveryOptions | None:
    """The ``RecoveryOptions`` a cache's ``recovery`` key describes (None: none)."""
    if not params:
        return None
    return RecoveryOptions(
        smoothquant=params.get("smoothquant"),
        bias_correction=bool(params.get("bias_correction")),
        refine_ranges=bool(params.get("refine_ranges")),
        clip_search=bool(params.get("clip_search")),
        shift_scale=bool(params.get("shift_scale")),
    )


def check_recovery_matches(
    cache_path: Path, found: dict[str, Any] | None, asked: RecoveryOptions | None
) -> None:
    """Refuse a cache made with other recovery options than the ones asked for (``asked`` None: take the cache's)."""
    if asked is None:
        return
    expected = asked.params().get("recovery")
    if (found or None) != expected:
        made, wanted = describe_recovery(recovery_of(found)), describe_recovery(asked)
        if made == wanted:  # the same options with other settings (made by another version)
            raise WorkbenchError(
                f"calibration cache {cache_path} was made with {made} but other settings than "
                f"this version's (cache: {json.dumps(found, sort_keys=True)}; this version: "
                f"{json.dumps(expected, sort_keys=True)}); calibrate it again (python -m workbench calibrate)"
            )
        raise WorkbenchError(
            f"calibration cache {cache_path} was made with {made}, not with "
            f"{wanted} as asked; give the recovery options it was made with, drop --cache to "
            "calibrate with the ones asked, or calibrate it again (python -m workbench calibrate)"
        )


def describe_recovery(options: RecoveryOptions | None) -> str:
    """``no accuracy recovery`` or the options as the calibrate verb spells them."""
    if options is None or not options.active:
        return "no accuracy recovery"
    parts = []
    if options.smoothquant:
        parts.append(f"--smoothquant {options.smoothquant}")
    if options.refine_ranges:
        parts.append("--refine-ranges")
    if options.clip_search:
        parts.append("--clip-search")
    if options.shift_scale:
        parts.append("--shift-scale")
    if options.bias_correction:
        parts.append("--bias-correction")
    return " ".join(parts)


def prepare(
    model: str | Path,
    calib_set: str | Path,
    method: str = DEFAULT_METHOD,
    root: Path | None = None,
    cache_path: Path | None = None,
    calib_root: Path | None = None,
    backend: str = DEFAULT_BACKEND,
    error_unit: str | None = None,
    recovery: RecoveryOptions | None = None,
) -> Prepared:
    """FP32 ONNX + a cache for ``model``; calibrates (or reuses a matching cache) when none is given, with the
    accuracy-recovery options ``recovery`` (None: none). A given cache made with recovery brings its recovered
    source; one made with other recovery options than ``recovery`` (when given) is refused."""
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
                recovery=recovery or RecoveryOptions(),
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
            result.recovered,
        )
    check_cache_file(cache_path)
    cache = cache_mod.load(Path(cache_path))
    check_recovery_matches(Path(cache_path), cache.keys.get("recovery"), recovery)
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
    recovered = rec.cache_recovered_source(Path(cache_path), cache)
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
        recovered,
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
    # accuracy recovery (calibrate --smoothquant/--bias-correction/--refine-ranges); None: off, or, with ``cache``,
    # the options the cache was made with
    recovery: RecoveryOptions | None = None
    assumed: tuple[str, ...] = ()  # what the verb assumed for a left-out option (the record says)

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
        calib = named_set(self.calib_set, "calibration", self.calib_root)
        if calib is not None:
            require_calibration_role(calib)
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
            recovery=self.recovery,
        )


def file_lines(files: dict[str, Path]) -> list[str]:
    """The files a job wrote, one per line."""
    return [f"  {key:>16}: {path}" for key, path in files.items()]

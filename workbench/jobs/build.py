"""The build job: an ONNX variant (FP32, FP16, Q/DQ INT8 or mixed) -> a cached TensorRT engine.

The profile's lengths come from a calibration set's recorded profile (``set_name``; its durations for
sets that record none) or explicit seconds; its batch range from ``batches``. The result carries the
engine path, build time and precision summary; the engine's sidecar names the model the ONNX file was
exported from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from workbench.backends.tensorrt.builder import BuildResult, BuildSettings, build_engine
from workbench.backends.tensorrt.loader import TensorRT, load_tensorrt
from workbench.backends.tensorrt.profile import Range, samples_from_durations
from workbench.config import SAMPLE_RATE, EngineProfile
from workbench.errors import WorkbenchError
from workbench.model.description import description_of_onnx
from workbench.speech.profiles import card_profile
from workbench.speech.store import load_set
from workbench.workspace import default_area


@dataclass(frozen=True)
class BuildInputs:
    """The ONNX model, the profile (batch sizes; a set's durations or explicit seconds) and the builder."""

    onnx: Path
    batches: tuple[int, ...] = (1, 8, 32)
    set_name: str | Path | None = None
    seconds: EngineProfile = EngineProfile()
    flavour: str = "auto"  # auto: tensorrt, else TensorRT-RTX
    legacy_int8_cache: Path | None = None
    opt_level: int | None = None
    engines_dir: Path = field(default_factory=default_area("engines"))
    force: bool = False
    calib_root: Path = field(default_factory=default_area("calib_sets"))


@dataclass
class BuildJobResult:
    """The builder's result, the TensorRT that built it and the settings (profile) it used."""

    build: BuildResult
    trt: TensorRT
    settings: BuildSettings

    def lines(self) -> list[str]:
        r, s = self.build, self.settings.samples
        return [
            f"engine: {r.engine_path}{'  (from engine cache)' if r.cached else ''}",
            f"built with {self.trt.flavour} {self.trt.version} in {r.build_time_s:.2f} s, {r.engine_bytes} bytes",
            f"profile: batch {'/'.join(map(str, self.settings.key_fields()['batches']))}, samples "
            f"{s.min}/{s.opt}/{s.max} ({s.min / SAMPLE_RATE:.2f}-{s.max / SAMPLE_RATE:.2f} s)",
            f"precision: {r.summary.counts_line()}",
            self.model_line(),
            f"layer summary: {r.summary_path}",
        ]

    def model_line(self) -> str:
        """The model the ONNX file names (written into it by the workbench's export), or that it names none."""
        model = self.build.provenance.get("model")
        return (
            f"model: {model['architecture']} {model['source']} ({model['model_hash'][:12]})"
            if model
            else "model: not named by the ONNX file (not exported by the workbench)"
        )


def samples_from_set(name: str | Path, root: Path | None = None) -> tuple[Range, dict[str, str]]:
    """Samples range from a stored calibration set's engine profile (its durations for sets that record
    none), plus the set's provenance (name, content hash)."""
    speech_set = load_set(name, root)
    provenance = {"name": speech_set.name, "content_hash": speech_set.content_hash}
    profile = card_profile(speech_set.card)
    if profile is not None:
        return samples_from_durations([profile.min_s, profile.opt_s, profile.max_s]), provenance
    return samples_from_durations([u.duration_s for u in speech_set.utterances]), provenance


def run(inputs: BuildInputs) -> BuildJobResult:
    """Derive the profile, load TensorRT (or TensorRT-RTX) and build the engine (or take it from the cache)."""
    provenance = None
    if inputs.set_name:
        samples, provenance = samples_from_set(inputs.set_name, inputs.calib_root)
    else:
        p = inputs.seconds
        samples = samples_from_durations([p.min_s, p.opt_s, p.max_s])
    if inputs.flavour not in ("auto", "tensorrt", "tensorrt-rtx"):
        raise WorkbenchError(
            f"TensorRT flavour must be auto, tensorrt or tensorrt-rtx, not {inputs.flavour!r}"
        )
    trt = load_tensorrt(None if inputs.flavour == "auto" else inputs.flavour)
    # the model the ONNX file names (the workbench's export writes its description into the metadata)
    described = description_of_onnx(Path(inputs.onnx)) if Path(inputs.onnx).is_file() else None
    settings = BuildSettings(
        batches=inputs.batches,
        samples=samples,
        optimization_level=inputs.opt_level,
        legacy_int8_cache=inputs.legacy_int8_cache,
        calibration_set=provenance,
        model=described.record() if described is not None else None,
    )
    return BuildJobResult(
        build_engine(inputs.onnx, settings, inputs.engines_dir, trt=trt, force=inputs.force), trt, settings
    )

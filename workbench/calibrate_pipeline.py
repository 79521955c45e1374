"""The calibrate job: export FP32 ONNX, calibrate (or reuse a matching cache), write the INT8 variant.

Layout under ``engines/<model hash 12>/``: ``model.fp32.onnx``, ``calib-<set hash 12>-<method>.cache``
(+ ``.json`` sidecar, + ``.hist.npz`` per-tensor histograms for histogram methods),
``model.int8-<method>-<set hash 12>.onnx`` (the TensorRT-bound Q/DQ graph) and, with ``ort_cpu``,
``model.int8-<method>-<set hash 12>.ort-cpu.onnx`` (the same arithmetic laid out for ONNX Runtime's CPU
kernels, ``workbench.quantize.ort_cpu``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from workbench import __version__
from workbench.artifacts import sha256_file
from workbench.calibration import cache as cache_mod
from workbench.calibration.collectors import STATISTICS_SCHEME
from workbench.calibration.methods import MethodSpec
from workbench.calibration import histograms
from workbench.calibration.runner import collect_statistics, ranges_from_statistics
from workbench.config import ENGINES_DIR
from workbench.model.export import Parity, export_onnx, parity_check
from workbench.model.loading import artifact_folder_name, load_model, model_hash
from workbench.model.vocab import DEFAULT_VOCABULARY, load_vocabulary
from workbench.quantize.plan import INT8
from workbench.quantize.qdq import build_variant
from workbench.speech.store import load_set


@dataclass
class CalibrateResult:
    """Where everything went, and whether the cache was reused."""

    fp32_onnx: Path
    int8_onnx: Path
    cache: Path
    reused_cache: bool
    cache_problems: list[str]
    parity: Parity
    tensors: int
    int8_ort_cpu: Path | None = None


def run_calibrate(model_path: str | Path, set_name: str, spec: MethodSpec,
                  root: Path = ENGINES_DIR, parity_clips: int = 6, ort_cpu: bool = False) -> CalibrateResult:
    """Export (once per model), check parity, calibrate or reuse a matching cache, write the INT8 variant."""
    speech_set = load_set(set_name)
    mhash = model_hash(model_path)
    model = load_model(model_path)  # before any folder is made: a model that fails to load leaves nothing
    out = root / artifact_folder_name(mhash)
    out.mkdir(parents=True, exist_ok=True)
    fp32 = out / "model.fp32.onnx"
    if not fp32.exists():
        export_onnx(model, fp32)
    clips = [speech_set.audio(u) for u in speech_set.utterances[:parity_clips]]
    parity = parity_check(model, fp32, clips, load_vocabulary(model_path) if Path(model_path).is_dir()
                          else DEFAULT_VOCABULARY)
    keys = {"model": mhash, "onnx": sha256_file(fp32), "calibration_set": speech_set.content_hash,
            **spec.params(), "statistics": STATISTICS_SCHEME,
            "cache_header": cache_mod.legacy_header(spec.name),  # caches with an older stamp are rewritten
            "workbench": __version__}
    cache_path = out / f"calib-{speech_set.content_hash[:12]}-{spec.name}.cache"
    cache, problems = cache_mod.load_matching(cache_path, keys)
    reused = cache is not None
    if cache is None:
        stats = collect_statistics(fp32, (a for _, a in speech_set.iter_audio()), len(speech_set.utterances),
                                   with_histograms=spec.name != "max", bins=spec.bins)
        cache = cache_mod.CalibrationCache.from_amax(ranges_from_statistics(stats, spec), keys)
        cache.save(cache_path)
        if stats.with_histograms:  # what the scales were chosen from, for the dashboard
            histograms.save(histograms.histogram_path(cache_path),
                            histograms.from_statistics(stats, {"keys": keys, "cache_sha256": cache.content_hash}))
    int8 = out / f"model.int8-{spec.name}-{speech_set.content_hash[:12]}.onnx"
    build_variant(fp32, cache.amax(), INT8, int8)
    cpu = None
    if ort_cpu:
        import onnx

        from workbench.artifacts import write_bytes_atomic
        from workbench.quantize.ort_cpu import cpu_flavour

        cpu = int8.with_suffix(".ort-cpu.onnx")
        write_bytes_atomic(cpu, cpu_flavour(onnx.load(str(int8)))[0].SerializeToString())
    return CalibrateResult(fp32, int8, cache_path, reused, [] if reused else problems, parity, len(cache.scales),
                           cpu)

"""The calibrate job: export (or reuse) the FP32 ONNX, calibrate (or reuse a matching cache), write the INT8 variant.

The model description (``workbench.model.description``) is read first: an unsupported model is refused
before anything is loaded or written. The export carries the description in its metadata; an export
from before that (or of a model whose description changed) is made again.

Layout under ``engines/<model hash 12>/``: ``model.fp32.onnx``, ``calib-<set hash 12>-<method>.cache``
(+ ``.json`` sidecar, + ``.hist.npz`` per-tensor histograms for histogram methods),
``float-<set hash 12>.json`` (the float statistics of every tensor, from which the FP16 guard keeps nodes in
FP32: ``workbench.quantize.guard``), ``model.int8-<method>-<set hash 12>.onnx`` (the TensorRT-bound Q/DQ
graph, FP16 between the Q/DQ islands) and ``model.fp16-<set hash 12>.onnx`` (the whole graph in FP16 but the
guard's FP32 nodes), each with its plan ``….plan.json`` (every node's precision, each FP32 node's reason),
and, with ``ort_cpu``, ``model.int8-<method>-<set hash 12>.ort-cpu.onnx`` (the same INT8 arithmetic, FP32
between the islands, laid out for ONNX Runtime's CPU kernels, ``workbench.quantize.ort_cpu``; its weights
int8 or uint8 as ``ort_cpu_weights`` says, ``auto``: what this CPU's integer kernels compute exactly,
``workbench.backends.cpu_int8``). With accuracy recovery (``recovery``) the cache's name carries the options'
tag, its input means sit beside it (``….cache.means.npz``) and, when SmoothQuant smoothed a tensor, its
smoothed FP32 graph (``….cache.smoothed.onnx``); the sidecar records both files' hashes, and the INT8 variant and
its CPU flavour are built from that recovered source (``workbench.quantize.recovered``). ``export_or_reuse`` is the one export step
every job uses.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from workbench import __version__
from workbench.artifacts import sha256_file, write_bytes_atomic
from workbench.backends.cpu_int8 import int8_weight_type
from workbench.backends.devices import device_of
from workbench.backends.factory import ort_providers
from workbench.calibration import cache as cache_mod
from workbench.calibration import convergence as conv
from workbench.calibration import histograms, kernels
from workbench.calibration import recovery as rec
from workbench.calibration.collectors import STATISTICS_SCHEME
from workbench.calibration.methods import MethodSpec
from workbench.calibration.runner import collect_statistics, ranges_from_statistics
from workbench.cluster.address import ClusterAddress, require_ray
from workbench.config import DEFAULT_BACKEND, ORT_CPU_WEIGHTS
from workbench.errors import WorkbenchError
from workbench.evaluate.chunking import chunk_audio, chunk_lengths_s, samples_per_frame
from workbench.evaluate.inference import ChunkSettings
from workbench.model.description import ModelDescription, describe_model, description_of_onnx
from workbench.model.export import Parity, export_onnx, parity_check
from workbench.model.folders import artifact_folder_name
from workbench.model.loading import check_model_source, load_model
from workbench.quantize.guard import guard_for_set, stored_float_stats
from workbench.quantize.plan import FP16, INT8
from workbench.quantize.qdq import build_variant
from workbench.quantize.recovered import RecoveredSource
from workbench.speech.select import require_calibration_role
from workbench.speech.store import SpeechSet, load_set
from workbench.workspace import default_area

FP32_NAME = "model.fp32.onnx"


def export_is_current(fp32: Path, model: ModelDescription) -> bool:
    """The FP32 export exists and carries this model's description (older exports carry none).

    The folder the model was given as does not count: the same model under another path is the same model."""
    if not fp32.exists():
        return False
    try:
        found = description_of_onnx(fp32)
    except WorkbenchError:  # a damaged export is made again
        return False
    return found is not None and found.same_model(model)


def export_or_reuse(description: ModelDescription, root: Path, model: Any = None) -> Path:
    """``<root>/<model hash 12>/model.fp32.onnx``: exported once (with the description in its metadata),
    reused after while it carries this model's description.

    ``model`` is the loaded PyTorch model when the caller has it; otherwise it is loaded only when an
    export is needed.
    """
    fp32 = Path(root) / artifact_folder_name(description.model_hash) / FP32_NAME
    if not export_is_current(fp32, description):
        export_onnx(model if model is not None else load_model(description), fp32, description)
    return fp32


@dataclass(frozen=True)
class CalibrateInputs:
    """Model (folder or hub id, or its description), calibration set (name under ``calib_root`` or a path)
    and method."""

    model: str | Path | ModelDescription
    calib_set: str | Path
    method: MethodSpec
    engines: Path = field(default_factory=default_area("engines"))
    parity_clips: int = 6
    ort_cpu: bool = False
    ort_cpu_weights: str = ORT_CPU_WEIGHTS
    calib_root: Path = field(default_factory=default_area("calib_sets"))
    backend: str = DEFAULT_BACKEND  # where the statistics pass runs: ort-cpu or ort-cuda
    chunks: ChunkSettings | None = None  # deployment chunks long audio: statistics from chunk-length inputs
    recovery: rec.RecoveryOptions = field(default_factory=rec.RecoveryOptions)
    ray: str | None = None  # spread the statistics pass over a Ray cluster (``workbench.cluster``)
    assumed: tuple[
        str, ...
    ] = ()  # what the verb assumed for left-out options (a computed cache's sidecar says)


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
    int8_ort_cpu_weights: tuple[str, str] | None = None  # ("u8" | "s8", why)
    backend: str = DEFAULT_BACKEND
    device: str = ""
    convergence: conv.Convergence | None = None
    convergence_note: str = ""  # why there is none
    model: ModelDescription | None = None
    guard: dict[str, str] = field(default_factory=dict)  # node -> why the FP16 variants keep it in FP32
    float_stats: Path | None = None
    fp16_onnx: Path | None = None
    recovery: dict | None = None  # what the accuracy-recovery options did (the sidecar's record)
    smoothed_onnx: Path | None = (
        None  # the FP32 graph with SmoothQuant folded in, when smoothing was asked for
    )
    recovered: RecoveredSource | None = None  # what quantized variants of this cache are built from

    def lines(self) -> list[str]:
        p = self.parity
        state = "reused (all provenance keys match)" if self.reused_cache else "computed"
        out = [f"model:        {self.model.summary()}"] if self.model is not None else []
        out += [
            f"FP32 ONNX:    {self.fp32_onnx}",
            f"  parity vs PyTorch on {p.clips} clips: max |logit diff| {p.max_abs_logit_diff:.2e}, "
            f"token agreement {p.token_agreement:.4f}, identical transcripts {p.transcripts_equal}/{p.clips}",
            f"cache:        {self.cache} ({self.tensors} tensors, {state}; statistics on {self.backend}, "
            f"{self.device})",
        ]
        if self.cache_problems and self.cache_problems != ["no cache yet"]:
            out.append("  previous cache not used: " + "; ".join(self.cache_problems))
        out += (
            ["  " + line for line in self.convergence.lines()]
            if self.convergence
            else [f"  convergence: {self.convergence_note}"]
        )
        out += [f"  {line}" for line in rec.summary_lines(self.recovery)] if self.recovery else []
        if self.smoothed_onnx:
            out.append(f"smoothed FP32: {self.smoothed_onnx} (the INT8 variant's source)")
        out.append(f"INT8 variant: {self.int8_onnx}")
        if self.fp16_onnx:
            out.append(f"FP16 variant: {self.fp16_onnx}")
        for node, reason in self.guard.items():
            out.append(f"  kept in FP32: {node}: {reason}")
        if self.int8_ort_cpu:
            out.append(f"  ONNX Runtime CPU flavour: {self.int8_ort_cpu}")
        if self.int8_ort_cpu_weights:
            weights, why = self.int8_ort_cpu_weights
            out.append(f"    {'uint8' if weights == 'u8' else 'int8'} weights: {why}")
        return out


def check(inputs: CalibrateInputs) -> None:
    """The input checks that need no model work (the method is checked by ``MethodSpec`` itself): the set
    exists, the model is a supported CTC model (config, vocabulary, CTC head; no weights read). ``run`` starts
    with them; so does the Run page."""
    require_calibration_role(load_set(inputs.calib_set, root=inputs.calib_root))
    if not isinstance(inputs.model, ModelDescription):
        check_model_source(inputs.model)
    ort_providers(inputs.backend)  # the statistics pass needs an ONNX Runtime backend that exists here
    if inputs.ray is not None:
        ClusterAddress.parse(inputs.ray)
        require_ray()
        if inputs.recovery.active:
            raise WorkbenchError(
                "--ray spreads the plain statistics pass; the recovery options (--smoothquant, "
                "--bias-correction, --refine-ranges, --clip-search, --shift-scale; the default recipe has bias "
                "correction and the clipping search) run without --ray: drop --ray, or add --no-recovery"
            )


@dataclass(frozen=True)
class CalibrationPieces:
    """What the statistics pass is fed: whole clips, or each clip's chunks as deployment cuts them."""

    speech_set: SpeechSet
    conditions: list[str]  # one per piece, in order
    chunks: ChunkSettings | None
    sampling_rate: int
    align: int

    def audio(self) -> Iterator[np.ndarray]:
        for _, audio in self.speech_set.iter_audio():
            if self.chunks is None:
                yield audio
            else:
                yield from chunk_audio(audio, self.chunks, self.sampling_rate, self.align)


def calibration_pieces(
    speech_set: SpeechSet, description: ModelDescription, chunks: ChunkSettings | None
) -> CalibrationPieces:
    rate, align = description.features.sampling_rate, samples_per_frame(description)
    conditions = [
        u.condition
        for u in speech_set.utterances
        for _ in (chunk_lengths_s(u.duration_s, chunks, rate, align) if chunks else [u.duration_s])
    ]
    return CalibrationPieces(speech_set, conditions, chunks, rate, align)


def spread_pass(
    fp32: Path,
    pieces: CalibrationPieces,
    spec: MethodSpec,
    inputs: CalibrateInputs,
    description: ModelDescription,
    float_keys: dict[str, Any] | None = None,
) -> tuple[Any, Any]:
    """The statistics pass over clip shards on the Ray cluster ``inputs.ray`` (``workbench.cluster.calibrate``):
    the same statistics as ``collect_statistics`` over every clip, and with ``float_keys`` the FP16 guard's float
    statistics (``guard_for_set``'s) in the same shards."""
    from workbench.calibration.graph_structure import read_structure
    from workbench.calibration.runner import activation_tensors
    from workbench.cluster.calibrate import spread_statistics

    audio = list(pieces.audio())
    assert inputs.ray is not None
    return spread_statistics(
        ClusterAddress.parse(inputs.ray),
        fp32.read_bytes(),
        audio,
        [len(a) / pieces.sampling_rate for a in audio],
        checkpoint=conv.checkpoint_for(len(audio)),
        with_histograms=spec.name != "max",
        bins=spec.bins,
        providers=ort_providers(inputs.backend),
        prepare=description.prepare,
        names=activation_tensors(read_structure(fp32)),
        float_keys=float_keys,
    )


def run(inputs: CalibrateInputs) -> CalibrateResult:
    """Export (once per model), check parity, calibrate or reuse a matching cache, write the INT8 variant."""
    check(inputs)
    spec = inputs.method
    weights = int8_weight_type(inputs.ort_cpu_weights) if inputs.ort_cpu else None  # a bad value stops here
    speech_set = load_set(inputs.calib_set, root=inputs.calib_root)
    description = inputs.model if isinstance(inputs.model, ModelDescription) else describe_model(inputs.model)
    mhash = description.model_hash
    model = load_model(description)  # before any folder is made: a model that fails to load leaves nothing
    if spec.name != "max":
        kernels.warm_up()  # the histogram kernel loads in the background during export and parity
    fp32 = export_or_reuse(description, inputs.engines, model)
    out = fp32.parent
    clips = [speech_set.audio(u) for u in speech_set.utterances[: inputs.parity_clips]]
    parity = parity_check(model, fp32, clips, description)
    del model
    keys: dict[str, Any] = {
        "model": mhash,
        "onnx": sha256_file(fp32),
        "calibration_set": speech_set.content_hash,
        "input_features": "normalised" if description.features.do_normalize else "raw",
        **spec.params(),
        "statistics": STATISTICS_SCHEME,
        "cache_header": cache_mod.legacy_header(spec.name),  # caches with an older stamp are rewritten
        "workbench": __version__,
    }
    suffix = ""
    if inputs.backend != DEFAULT_BACKEND:  # a cache of another backend's statistics: its own keys and file
        keys["statistics_backend"] = inputs.backend
        suffix = f"-{inputs.backend}"
    pieces = calibration_pieces(speech_set, description, inputs.chunks)
    if inputs.chunks is not None:  # statistics of chunk-length inputs: their own keys and files
        keys["chunks"] = asdict(inputs.chunks)
        suffix += f"-chunk{inputs.chunks.length_s:g}s"
    options = inputs.recovery
    keys.update(options.params())
    if options.tag():
        suffix += f"-{options.tag()}"
    cache_path = out / f"calib-{speech_set.content_hash[:12]}-{spec.name}{suffix}.cache"
    smoothed_path = rec.smoothed_path(cache_path)
    cache, problems = cache_mod.load_matching(cache_path, keys)
    if cache is not None and (gone := histograms.histograms_problem(cache_path, cache)):
        cache, problems = None, [f"its histograms are not usable ({gone}); recalibrated to rewrite them"]
    source: Path | Any = fp32  # the FP32-side graph the variants are built from
    if cache is not None and options.active:
        if (missing := rec.source_problem(cache_path, cache.recovery)) is not None:
            cache, problems = None, [f"{missing}; recalibrated"]
        elif (cache.recovery or {}).get("smoothquant", {}).get("smoothed"):
            source = smoothed_path
    reused = cache is not None
    floats = None  # the FP16 guard's float statistics when the Ray pass made them
    if cache is None:
        clip_count = len(pieces.conditions)

        def one_pass(model: Any, channels: Any = None) -> Any:
            return collect_statistics(
                model,
                pieces.audio(),
                clip_count,
                with_histograms=spec.name != "max",
                bins=spec.bins,
                providers=ort_providers(inputs.backend),
                checkpoint=conv.checkpoint_for(clip_count),
                prepare=description.prepare,
                channels=channels,
            )

        stats: Any  # the pass's statistics (StreamingStats)
        if options.active:
            scoring: list[Any] = []
            if options.clip_search or options.shift_scale:  # these searches score on whole calibration clips
                from workbench.calibration.clip_search import scoring_rows

                scoring = scoring_rows(speech_set.utterances, speech_set.audio, description.prepare)
            recovered = rec.recover(fp32, one_pass, spec, options, scoring)
            stats, amax, method_amax = recovered.stats, recovered.amax, recovered.method_amax
            if recovered.passes > 1:
                write_bytes_atomic(smoothed_path, recovered.model.SerializeToString())
                source = smoothed_path
            else:  # a smoothed graph left here by an earlier cache of this name is not this one's
                smoothed_path.unlink(missing_ok=True)
        elif inputs.ray is not None:
            stored, float_keys, _ = stored_float_stats(fp32, speech_set, out)
            wanted = float_keys if stored is None and inputs.chunks is None else None  # whole clips only
            stats, floats = spread_pass(fp32, pieces, spec, inputs, description, wanted)
            amax = method_amax = ranges_from_statistics(stats, spec)
        else:
            stats = one_pass(fp32)
            amax = method_amax = ranges_from_statistics(stats, spec)
        cache = cache_mod.CalibrationCache.from_amax(amax, keys)
        if options.active:
            rec.save_arrays(rec.means_path(cache_path), recovered.means)
            if recovered.shifts:
                rec.save_shifts(rec.shifts_path(cache_path), recovered.shifts)
            else:  # shifts left here by an earlier cache of this name are not this one's
                rec.shifts_path(cache_path).unlink(missing_ok=True)
            cache.recovery = {**recovered.record, "files": rec.file_hashes(cache_path)}
        found = conv.measure(stats, method_amax, spec, pieces.conditions)  # the statistics, not the moves
        cache.convergence = found.to_json() if found else None
        cache.assumed = list(inputs.assumed)
        cache.save(cache_path)
        if stats.with_histograms:  # what the scales were chosen from, for the dashboard
            histograms.save(
                histograms.histogram_path(cache_path),
                histograms.from_statistics(stats, {"keys": keys, "cache_sha256": cache.content_hash}),
            )
    guard, stats_path = guard_for_set(fp32, speech_set, out, prepare=description.prepare, computed=floats)
    int8 = out / f"model.int8-{spec.name}-{speech_set.content_hash[:12]}{suffix}.onnx"
    int8_plan = INT8.with_guard(guard)
    recovered_src = rec.cache_recovered_source(cache_path, cache) if options.active else None
    if recovered_src is not None:
        import onnx

        export = onnx.load(str(fp32))
        graph, record = recovered_src.for_plan(int8_plan, recovered_src.source(export))
        build_variant(graph, cache.amax(), int8_plan, int8, with_plan=True, recovery=record)
    else:
        build_variant(source, cache.amax(), int8_plan, int8, with_plan=True, recovery=cache.recovery)
    fp16 = out / f"model.fp16-{speech_set.content_hash[:12]}.onnx"
    build_variant(fp32, {}, FP16.with_guard(guard), fp16, with_plan=True)
    cpu = None
    if weights is not None:  # the ONNX Runtime CPU flavour was asked for
        from workbench.quantize.ort_cpu import build_cpu_variant

        cpu = build_cpu_variant(
            fp32,
            cache.amax(),
            INT8,
            int8.with_suffix(".ort-cpu.onnx"),
            weights=weights[0],
            reason=weights[1],
            recovered=recovered_src,
        )
    found, note = conv.from_sidecar(cache.convergence)
    return CalibrateResult(
        fp32,
        int8,
        cache_path,
        reused,
        [] if reused else problems,
        parity,
        len(cache.scales),
        cpu,
        weights,
        inputs.backend,
        device_of(inputs.backend),
        found,
        note,
        description,
        guard=guard,
        float_stats=stats_path,
        fp16_onnx=fp16,
        recovery=cache.recovery,
        smoothed_onnx=source if source != fp32 else None,
        recovered=recovered_src,
    )

"""Accuracy recovery at calibration: SmoothQuant migration, range refinement, the clipping search, the per-channel
shift and scale of conv and MatMul inputs, and the statistics bias correction needs.

``RecoveryOptions`` are options of ``calibrate`` (``--smoothquant``, ``--refine-ranges``, ``--clip-search``,
``--shift-scale``, ``--bias-correction``);
they go into the cache's provenance keys (``params``) and the file names (``tag``). ``recover`` runs the
calibration pass with per-channel statistics and a row sample (``channels.ChannelStats``), then:

1. SmoothQuant (``workbench.quantize.smoothing``): for every MatMul/Gemm input with a constant weight, the
   strength alpha is searched per tensor among ``ALPHAS`` (or fixed by the option) by the output error on
   the sampled rows; "no smoothing" is a candidate too, so a tensor is smoothed only where the sample says it
   helps. The scales are folded into the FP32 graph, and a second pass over the calibration clips measures
   the smoothed graph's ranges (a smoothed tensor's histogram cannot be derived from the original's).
2. Range refinement (``refine``): each tensor's threshold among the methods', by output error.
3. Clipping search (``clip_search``): each Conv input's threshold by the model's logits on calibration clips.
4. Shift and scale (``workbench.calibration.shift_scale``): per Conv input and one-sided MatMul input (a GELU's
   output; a channel's high end at least its largest magnitude in the calibration pass), a per-channel shift and
   scale and the shifted tensor's threshold, by the model's logits on the same clips ("off" is a candidate); the shifts are kept
   beside the cache (``shifts_path``), the thresholds in it (``shift_scale.shifted_name``); the transform belongs
   to a plan and is applied when a variant is built (``workbench.quantize.shift_scale``).
5. Bias correction needs each INT8 layer's input mean per channel: ``Recovered.means``, from the last pass;
   the correction itself belongs to a plan (``workbench.quantize.bias_correction``) and is applied when a
   variant is built (``Recovered.for_plan``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from workbench.calibration.channels import ChannelStats
from workbench.calibration.clip_search import (
    CLIP_SECONDS,
    DEFAULT_CLIPS,
    PERCENTILES,
    clip_record,
    search_clipping,
)
from workbench.calibration.collectors import StreamingStats
from workbench.calibration.methods import MethodSpec
from workbench.calibration.refine import refine_ranges
from workbench.calibration.runner import activation_tensors, ranges_from_statistics
from workbench.calibration.shift_scale import (
    ALPHAS as SHIFT_ALPHAS,
)
from workbench.calibration.shift_scale import (
    CHANNEL_PERCENTILE,
    ONE_SIDED,
    Z_PERCENTILES,
    search_shift_scale,
    shift_record,
)
from workbench.errors import WorkbenchError
from workbench.quantize.plan import PrecisionPlan
from workbench.quantize.qdq import dequantized_weight
from workbench.quantize.recovered import RecoveredSource
from workbench.quantize.shift_scale import ChannelShift, shifted_name
from workbench.quantize.smoothing import (
    SmoothTarget,
    apply_smoothing,
    output_error,
    smoothing_scales,
    smoothing_targets,
)

ALPHAS = (0.25, 0.4, 0.5, 0.6, 0.75, 0.9)
SCALE_DTYPE = np.float16  # weight scales of the default INT8 plan (its INT8 nodes compute in FP16)


@dataclass(frozen=True)
class RecoveryOptions:
    """Which recovery techniques a calibration applies. ``smoothquant``: None (off), "auto" (alpha searched per
    tensor) or an alpha in [0, 1] as text."""

    smoothquant: str | None = None
    bias_correction: bool = False
    refine_ranges: bool = False
    clip_search: bool = False
    shift_scale: bool = False

    def __post_init__(self) -> None:
        if self.smoothquant not in (None, "auto"):
            try:
                alpha = float(self.smoothquant)
            except ValueError:
                alpha = -1.0
            if not 0.0 <= alpha <= 1.0:
                raise WorkbenchError(
                    f"--smoothquant takes 'auto' or a migration strength alpha in [0, 1], not {self.smoothquant!r}"
                )

    @property
    def active(self) -> bool:
        return bool(
            self.smoothquant
            or self.bias_correction
            or self.refine_ranges
            or self.clip_search
            or self.shift_scale
        )

    def params(self) -> dict[str, Any]:
        """What goes into the cache keys (empty when off, so existing caches keep their keys)."""
        if not self.active:
            return {}
        keys: dict[str, Any] = {
            "smoothquant": self.smoothquant,
            "bias_correction": self.bias_correction,
            "refine_ranges": self.refine_ranges,
            "alphas": list(ALPHAS) if self.smoothquant == "auto" else None,
        }
        if self.clip_search:  # only when on, so caches made without it keep their keys
            keys["clip_search"] = {
                "percentiles": list(PERCENTILES),
                "clips": DEFAULT_CLIPS,
                "seconds": CLIP_SECONDS,
            }
        if self.shift_scale:  # likewise
            keys["shift_scale"] = {
                "alphas": list(SHIFT_ALPHAS),
                "percentiles": list(Z_PERCENTILES),
                "channel_percentile": CHANNEL_PERCENTILE,
                "clips": DEFAULT_CLIPS,
                "seconds": CLIP_SECONDS,
                # what is searched, so a cache made when only conv inputs were is not taken for one
                "inputs": "conv, one-sided matmul",
                "one_sided": ONE_SIDED,
                "matmul_high": "at least the calibration pass's channel max",
            }
        return {"recovery": keys}

    def tag(self) -> str:
        """File-name part: ``sq`` (``sq0.5`` for a fixed alpha), ``rr``, ``cs``, ``ss``, ``bc`` joined by '-', '' when
        off."""
        parts = []
        if self.smoothquant:
            parts.append("sq" if self.smoothquant == "auto" else f"sq{float(self.smoothquant):g}")
        if self.refine_ranges:
            parts.append("rr")
        if self.clip_search:
            parts.append("cs")
        if self.shift_scale:
            parts.append("ss")
        if self.bias_correction:
            parts.append("bc")
        return "-".join(parts)


PassRunner = Callable[[onnx.ModelProto | Path, ChannelStats], StreamingStats]


@dataclass
class Recovered:
    """The FP32 graph the variants are built from (smoothed or the source), its ranges, input means, record;
    ``method_amax``: the method's own ranges on the last pass, before refinement or clipping search moved any
    (what the convergence check compares with the ranges at its checkpoint); ``shifts``: the conv inputs' shift
    and scale (empty without ``--shift-scale``)."""

    model: onnx.ModelProto
    amax: dict[str, float]
    means: dict[str, np.ndarray]
    record: dict[str, Any] = field(default_factory=dict)
    stats: StreamingStats | None = None
    passes: int = 1
    method_amax: dict[str, float] = field(default_factory=dict)
    shifts: dict[str, ChannelShift] = field(default_factory=dict)

    def for_plan(self, plan: PrecisionPlan, bias_correction: bool) -> tuple[onnx.ModelProto, dict]:
        """The graph ``plan``'s variant is built from (the shift and scale, and bias correction when asked, for its
        INT8 nodes) and what was done, as ``RecoveredSource.for_plan`` gives it from the files of a cache."""
        means = self.means if bias_correction else None
        source = RecoveredSource(None, means, {}, {}, False, self.shifts or None)
        return source.for_plan(plan, self.model)


def summary_lines(record: dict[str, Any]) -> list[str]:
    """What a person reads of a recovery record after ``calibrate``."""
    out = []
    if "smoothquant" in record:
        sq = record["smoothquant"]
        folds: dict[str, int] = {}
        for entry in sq["tensors"].values():
            if "fold" in entry:
                folds[entry["fold"]] = folds.get(entry["fold"], 0) + 1
        how = ", ".join(f"{k} {v}" for k, v in sorted(folds.items())) or "none"
        out.append(
            f"SmoothQuant (alpha {sq['alpha']}): {sq['smoothed']} of {sq['targets']} MatMul/Gemm inputs "
            f"smoothed ({how}); ranges from a second pass over the clips"
        )
    if "refine_ranges" in record:
        rr = record["refine_ranges"]
        out.append(
            f"range refinement: {rr['changed']} of {rr['tensors']} tensors took another method's threshold"
        )
    if "clip_search" in record:
        cs = record["clip_search"]
        out.append(
            f"clipping search: {cs['changed']} of {cs['tensors']} conv inputs took another threshold (logit KL on "
            f"{cs['clips']} calibration clips)"
        )
    if "shift_scale" in record:
        ss = record["shift_scale"]
        out.append(
            f"shift and scale: {ss['changed']} of {ss['tensors']} conv and MatMul inputs shifted and scaled per "
            f"channel (logit KL on {ss['clips']} calibration clips)"
        )
    if "bias_correction" in record:
        bc = record["bias_correction"]
        if "nodes" in bc:
            out.append(
                f"bias correction: {bc['nodes']} INT8 layers, largest mean shift removed {bc['max_shift']:.3g}"
            )
        else:
            out.append("bias correction: input means kept for the INT8 variants")
    return out


def channel_stats_for(model: onnx.ModelProto) -> ChannelStats:
    """Per-channel statistics of the inputs of constant-weight layers (MatMul/Gemm channels last, Conv axis 1),
    rows sampled for the MatMul/Gemm ones (the attention MatMuls' inputs have no fixed channel axis)."""
    names = set(activation_tensors(model))
    targets = smoothing_targets(model)
    axes: dict[str, int] = {t.tensor: -1 for t in targets}
    inits = {i.name for i in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Conv" and len(node.input) > 1 and node.input[1] in inits:
            axes.setdefault(node.input[0], 1)
    sampled = {t.tensor for t in targets}
    return ChannelStats({n: a for n, a in axes.items() if n in names}, sampled & names)


def choose_smoothing(
    model: onnx.ModelProto,
    targets: list[SmoothTarget],
    channels: ChannelStats,
    stats: StreamingStats,
    amax: dict[str, float],
    alpha: str,
) -> tuple[dict[str, np.ndarray], dict[str, dict]]:
    """Scales per tensor to smooth and, per target, the alpha picked and the sampled output errors."""
    scales: dict[str, np.ndarray] = {}
    record: dict[str, dict] = {}
    alphas = ALPHAS if alpha == "auto" else (float(alpha),)
    for target in targets:
        absmax, rows = channels.absmax(target.tensor), channels.rows(target.tensor)
        if absmax is None or rows is None or target.tensor not in amax:
            continue
        weight = target.stacked_weight(model)
        wabs = target.weight_absmax(model)
        clip = amax[target.tensor] / max(
            stats.maxes.amax[target.tensor], 1e-12
        )  # the method's clipping ratio
        ones = np.ones_like(absmax, dtype=np.float32)
        off = output_error(rows, weight, ones, amax[target.tensor], SCALE_DTYPE)
        best_alpha, best_error, best_scales = None, off, None
        for a in alphas:
            s = smoothing_scales(absmax, wabs, a)
            error = output_error(rows, weight, s, clip * float(np.max(absmax / s)), SCALE_DTYPE)
            if error < best_error or alpha != "auto":
                best_alpha, best_error, best_scales = a, error, s
                if alpha != "auto":
                    break
        record[target.tensor] = {"alpha": best_alpha, "error": best_error, "error_unsmoothed": off}
        if best_scales is not None:
            scales[target.tensor] = best_scales
    return scales, record


def recover(
    source: Path,
    run_pass: PassRunner,
    spec: MethodSpec,
    options: RecoveryOptions,
    scoring_inputs: Sequence[np.ndarray] = (),
) -> Recovered:
    """Calibrate ``source`` (FP32 ONNX) with ``options``: see the module docstring. ``scoring_inputs``: the
    calibration clips' ``input_values`` rows the clipping search scores on (``clip_search.scoring_rows``)."""
    model = onnx.load(str(source))
    channels = channel_stats_for(model)
    stats = run_pass(source, channels)
    amax = ranges_from_statistics(stats, spec)
    record: dict[str, Any] = {}
    passes = 1
    if options.smoothquant:
        targets = smoothing_targets(model)
        scales, choices = choose_smoothing(model, targets, channels, stats, amax, options.smoothquant)
        model, folds = apply_smoothing(model, scales, targets)
        for tensor, fold in folds.items():
            choices[tensor]["fold"] = fold
        record["smoothquant"] = {
            "alpha": options.smoothquant,
            "smoothed": len(scales),
            "targets": len(choices),
            "tensors": choices,
            "second_pass": "the smoothed graph's ranges come from a second pass over the calibration clips",
        }
        if scales:
            channels = channel_stats_for(model)
            stats = run_pass(model, channels)
            amax = ranges_from_statistics(stats, spec)
            passes = 2
    method_amax = dict(amax)
    if options.refine_ranges:
        weights = {}
        for target in smoothing_targets(model):
            w = target.stacked_weight(model)
            weights[target.tensor] = (w, dequantized_weight(w, 1, SCALE_DTYPE))
        choices_rr = refine_ranges(stats, spec, channels, weights)
        amax = {n: c.amax for n, c in choices_rr.items()}
        moved = {n: c.to_json() for n, c in choices_rr.items() if c.error < c.own_error}
        record["refine_ranges"] = {"tensors": len(choices_rr), "changed": len(moved), "changes": moved}
    if options.clip_search:
        clipped = search_clipping(model, stats, amax, scoring_inputs)
        amax = {**amax, **{t: c.amax for t, c in clipped.items()}}
        record["clip_search"] = clip_record(clipped, len(scoring_inputs))
    shifts: dict[str, ChannelShift] = {}
    if options.shift_scale:
        off = {t: c.kl for t, c in clipped.items()} if options.clip_search else None
        tops = {t: top for t in channels.tensors if (top := channels.absmax(t)) is not None}
        chosen = search_shift_scale(model, amax, scoring_inputs, off_scores=off, channel_tops=tops)
        shifts = {t: c.shift for t, c in chosen.items() if c.shift is not None}
        amax = {**amax, **{shifted_name(t): chosen[t].amax for t in shifts}}
        record["shift_scale"] = shift_record(chosen, len(scoring_inputs))
    means = {n: m for n in channels.tensors if (m := channels.mean(n)) is not None}
    if options.bias_correction:
        record["bias_correction"] = {"means_of": len(means), "scale_dtype": np.dtype(SCALE_DTYPE).name}
    return Recovered(model, amax, means, record, stats, passes, method_amax, shifts)


MEANS_SUFFIX = ".means.npz"
SHIFTS_SUFFIX = ".shifts.npz"


def means_path(cache_path: Path) -> Path:
    """Where a recovery calibration keeps its per-channel input means (``calib-….cache`` -> ``….cache.means.npz``)."""
    cache_path = Path(cache_path)
    return cache_path.with_name(cache_path.name + MEANS_SUFFIX)


def shifts_path(cache_path: Path) -> Path:
    """Where a calibration with ``--shift-scale`` keeps the conv inputs' shifts and scales (``….cache.shifts.npz``)."""
    cache_path = Path(cache_path)
    return cache_path.with_name(cache_path.name + SHIFTS_SUFFIX)


def save_arrays(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Named arrays, atomically (names in ``names``, arrays ``m0``, ``m1``, ... in that order)."""
    import io
    import json

    from workbench.artifacts import write_bytes_atomic

    buffer = io.BytesIO()
    names = list(arrays)
    stored: dict[str, Any] = {f"m{k}": arrays[n] for k, n in enumerate(names)}
    stored["names"] = np.array(json.dumps(names))
    np.savez(buffer, **stored)
    write_bytes_atomic(path, buffer.getvalue())


def load_arrays(path: Path) -> dict[str, np.ndarray] | None:
    """The arrays ``save_arrays`` wrote, or None when the file is missing or unreadable (then recalibrate)."""
    import json

    try:
        with np.load(path, allow_pickle=False) as data:
            names = json.loads(str(data["names"]))
            return {n: data[f"m{k}"] for k, n in enumerate(names)}
    except (OSError, ValueError, KeyError):
        return None


def save_shifts(path: Path, shifts: dict[str, ChannelShift]) -> None:
    """The shifts and scales of ``--shift-scale`` (``shift/<tensor>``, ``scale/<tensor>``), atomically."""
    arrays: dict[str, np.ndarray] = {}
    for tensor, shift in shifts.items():
        arrays[f"shift/{tensor}"], arrays[f"scale/{tensor}"] = shift.shift, shift.scale
    save_arrays(path, arrays)


def load_shifts(path: Path) -> dict[str, ChannelShift] | None:
    """The shifts ``save_shifts`` wrote, or None when the file is missing or unreadable."""
    arrays = load_arrays(path)
    if arrays is None:
        return None
    tensors = [name[len("shift/") :] for name in arrays if name.startswith("shift/")]
    try:
        return {t: ChannelShift(arrays[f"shift/{t}"], arrays[f"scale/{t}"]) for t in tensors}
    except KeyError:
        return None


SMOOTHED_SUFFIX = ".smoothed.onnx"


def smoothed_path(cache_path: Path) -> Path:
    """Where a calibration with SmoothQuant keeps its smoothed FP32 graph (``calib-….cache`` ->
    ``calib-….cache.smoothed.onnx``): one per cache, so caches of other methods or sets never share it."""
    cache_path = Path(cache_path)
    return cache_path.with_name(cache_path.name + SMOOTHED_SUFFIX)


def file_hashes(cache_path: Path) -> dict[str, str]:
    """The sha256 of the recovery files beside a cache (means, smoothed graph) that exist: what the cache's
    record names, so a file that was replaced is noticed."""
    from workbench.artifacts import sha256_file

    out = {}
    paths = (
        ("means", means_path(cache_path)),
        ("smoothed_graph", smoothed_path(cache_path)),
        ("shifts", shifts_path(cache_path)),
    )
    for key, path in paths:
        if path.exists():
            out[key] = sha256_file(path)
    return out


def source_problem(cache_path: Path, record: dict[str, Any] | None) -> str | None:
    """Why the recovery files beside ``cache_path`` do not belong to the cache whose record is ``record``
    (missing, or not the files it was made with), or None when they do."""
    record = record or {}
    files = record.get("files", {})
    smoothed = bool(record.get("smoothquant", {}).get("smoothed"))
    found = file_hashes(cache_path)
    if "means" not in found:
        return f"its input means ({means_path(cache_path).name}) are missing"
    if smoothed and "smoothed_graph" not in found:
        return f"its smoothed FP32 graph ({smoothed_path(cache_path).name}) is missing"
    if record.get("shift_scale", {}).get("changed") and "shifts" not in found:
        return f"its shifts and scales ({shifts_path(cache_path).name}) are missing"
    for key, digest in files.items():
        if found.get(key) != digest:
            return f"its {key.replace('_', ' ')} file is not the one it was made with"
    return None


def recovered_source(
    cache_path: Path, record: dict[str, Any] | None, options: dict[str, Any] | None
) -> RecoveredSource:
    """The FP32 source the variants of a recovery cache are built from (``source_problem`` first: refused with
    the reason when its files are missing or replaced)."""
    problem = source_problem(cache_path, record)
    if problem is not None:
        raise WorkbenchError(
            f"calibration cache {cache_path} was made with accuracy recovery, but {problem}; recalibrate "
            "(python -m workbench calibrate with the same recovery options)"
        )
    record = dict(record or {})
    smoothed = bool(record.get("smoothquant", {}).get("smoothed"))
    graph = onnx.load(str(smoothed_path(cache_path))) if smoothed else None
    means = load_arrays(means_path(cache_path)) if (options or {}).get("bias_correction") else None
    shifts = load_shifts(shifts_path(cache_path)) if record.get("shift_scale", {}).get("changed") else None
    return RecoveredSource(graph, means, record, dict(options or {}), smoothed, shifts)


def cache_recovered_source(cache_path: Path, cache: Any) -> RecoveredSource | None:
    """The recovered source of the calibration cache ``cache`` (a ``CalibrationCache``, loaded from ``cache_path``;
    None when it was made without accuracy recovery), refused as ``recovered_source`` refuses."""
    options = cache.keys.get("recovery")
    return recovered_source(Path(cache_path), cache.recovery, options) if options else None

"""The FP16 guard: which nodes stay FP32 in a model's FP16 and mixed variants, each with its reason.

FP16 holds |x| <= 65504 with an 11-bit significand. A node is kept FP32 when, on the calibration set
(``float_stats.FloatStats``), FP16 would overflow or lose the result there:

1. range: it writes or reads a tensor whose |x| exceeds 65504 / headroom (both ends of the edge stay FP32,
   so the large values never pass through FP16);
2. sums: a normalisation (LayerNorm, GroupNorm/InstanceNorm statistics) or reduction whose Σ|x| or Σx²
   over one group exceeds the same limit; sums over the time axis are projected to the longest clip
   allowed (``Fp16GuardConfig.max_clip_seconds``), since they grow with the audio;
3. Softmax inputs: a Softmax whose input reaches |x| where FP16's step is coarser than
   ``softmax_input_step`` (the probabilities would move by exp(step / 2)); the Softmax and the nodes that
   write its input (back through reshapes and transposes to the first arithmetic node) stay FP32;
4. constants: a node reading a float constant beyond 65504 (needs no statistics; ``constant_guard``).

Everything else follows the plan (FP16 by default). The guard never changes an INT8 decision; it only
widens the float side of a node to FP32.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from workbench.artifacts import sha256_file
from workbench.config import FP16_GUARD, Fp16GuardConfig
from workbench.errors import WorkbenchError
from workbench.quantize.float_stats import SCHEME, FloatStats, collect_float_stats
from workbench.quantize.plan import float_nodes, tensor_types

FP16_MAX = 65504.0
DATA_MOVEMENT_OPS = ("Reshape", "Transpose", "Squeeze", "Unsqueeze", "Identity", "Flatten", "Expand", "Cast")


def fp16_step(value: float) -> float:
    """Spacing of float16 numbers at ``value`` (normal range)."""
    return 2.0 ** (math.floor(math.log2(max(value, 2.0**-14))) - 10)


def constant_guard(model: onnx.ModelProto) -> dict[str, str]:
    """Readers of float constants (initializers, Constant nodes) holding a finite |x| above 65504."""
    big: dict[str, float] = {}
    for init in model.graph.initializer:
        if init.data_type == onnx.TensorProto.FLOAT:
            big[init.name] = _finite_max(numpy_helper.to_array(init))
    for node in model.graph.node:
        if (
            node.op_type == "Constant"
            and node.attribute
            and node.attribute[0].name == "value"
            and node.attribute[0].t.data_type == onnx.TensorProto.FLOAT
        ):
            big[node.output[0]] = _finite_max(numpy_helper.to_array(node.attribute[0].t))
    keep: dict[str, str] = {}
    for node in model.graph.node:
        for name in node.input:
            if big.get(name, 0.0) > FP16_MAX and node.name not in keep:
                keep[node.name] = f"reads constant {name} with |x| = {big[name]:.4g} > 65504 (FP16 max)"
    return keep


def _finite_max(values: np.ndarray) -> float:
    values = np.abs(values[np.isfinite(values)]) if values.size else values
    return float(values.max()) if values.size else 0.0


def fp32_islands(
    model: onnx.ModelProto,
    stats: FloatStats,
    config: Fp16GuardConfig = FP16_GUARD,
    types: dict[str, int] | None = None,
) -> dict[str, str]:
    """Node -> reason for every node the FP16 variants keep in FP32 (graph order)."""
    types = tensor_types(model) if types is None else types
    floats = float_nodes(model, types)
    limit = FP16_MAX / config.headroom
    producer = {o: n for n in model.graph.node for o in n.output}
    readers: dict[str, list[onnx.NodeProto]] = {}
    for node in model.graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    found: dict[str, str] = {}

    def keep(node: onnx.NodeProto, reason: str) -> None:
        if node.name in floats and node.name not in found:
            found[node.name] = reason

    for name, value in stats.amax.items():
        if value <= limit:
            continue
        where = (
            f"|x| up to {value:.4g} on the calibration set (FP16 max 65504, headroom x{config.headroom:g})"
        )
        if name in producer:
            keep(producer[name], f"writes {name}: {where}")
        for reader in readers.get(name, []):
            keep(reader, f"reads {name}: {where}")
    for name, acc in stats.accumulators.items():
        need = acc.largest(config.max_clip_seconds)
        if need <= limit or name not in {n.name for n in model.graph.node}:
            continue
        what = "Σx²" if acc.uses_squares and acc.sum_sq >= acc.sum_abs else "Σ|x|"
        grown = (
            f", {need:.4g} projected to {config.max_clip_seconds:g} s clips" if acc.grows_with_length else ""
        )
        node = next(n for n in model.graph.node if n.name == name)
        keep(
            node,
            f"{acc.op} statistics: {what} over {acc.count} elements reaches "
            f"{max(acc.sum_abs, acc.sum_sq):.4g} on the calibration set{grown} (FP16 max 65504)",
        )
    for node in model.graph.node:
        if node.op_type != "Softmax" or node.input[0] not in stats.amax:
            continue
        value = stats.amax[node.input[0]]
        step = fp16_step(value)
        if step <= config.softmax_input_step:
            continue
        reason = (
            f"Softmax input {node.input[0]} reaches |x| = {value:.4g}, where FP16's step {step:g} moves "
            f"probabilities by up to {100 * (math.exp(step / 2) - 1):.1f} %"
        )
        keep(node, reason)
        source = producer.get(node.input[0])
        while source is not None:
            keep(source, f"writes the input of {node.name}: {reason}")
            if source.op_type not in DATA_MOVEMENT_OPS:
                break
            source = producer.get(source.input[0])
    for name, reason in constant_guard(model).items():
        found.setdefault(name, reason)
    order = {n.name: i for i, n in enumerate(model.graph.node)}
    return dict(sorted(found.items(), key=lambda kv: order.get(kv[0], len(order))))


def stored_float_stats(fp32: Path, speech_set, folder: Path) -> tuple[FloatStats | None, dict, Path]:
    """``(statistics, keys, path)``: the float statistics of ``fp32`` on ``speech_set`` kept at
    ``<folder>/float-<set hash 12>.json`` when its keys (export hash, set hash, statistics scheme) match, else
    None, with the keys and path statistics computed now are kept under."""
    keys = {"onnx": sha256_file(fp32), "calibration_set": speech_set.content_hash, "scheme": SCHEME}
    path = Path(folder) / f"float-{speech_set.content_hash[:12]}.json"
    stats = None
    if path.is_file():
        try:
            stats = FloatStats.load(path)
        except WorkbenchError:
            stats = None
        if stats is not None and stats.keys != keys:
            stats = None  # made for another export or set: never used silently
    return stats, keys, path


def guard_for_set(
    fp32: Path,
    speech_set,
    folder: Path,
    config: Fp16GuardConfig = FP16_GUARD,
    prepare: Callable[[np.ndarray], np.ndarray] | None = None,
    computed: FloatStats | None = None,
) -> tuple[dict[str, str], Path]:
    """The FP32 nodes of ``fp32``'s FP16 variants from float statistics of ``speech_set`` (a stored
    ``SpeechSet``; clips made ``input_values`` by ``prepare``, the model's feature settings, default
    normalised), computed once per export and set: ``<folder>/float-<set hash 12>.json`` is reused while its
    keys (export hash, set hash, statistics scheme) match, and recomputed otherwise (``computed``: statistics
    already computed elsewhere with those keys, e.g. on a Ray cluster, kept instead). The export carries the
    model description, feature settings included, so its hash changes with them."""
    stats, keys, path = stored_float_stats(fp32, speech_set, folder)
    if computed is not None and computed.keys != keys:
        raise ValueError("the float statistics given were computed for another export or set")
    if stats is None:
        stats = computed or collect_float_stats(
            fp32, (a for _, a in speech_set.iter_audio()), len(speech_set.utterances), keys, prepare=prepare
        )
        stats.save(path)
    return fp32_islands(onnx.load(str(fp32)), stats, config), path

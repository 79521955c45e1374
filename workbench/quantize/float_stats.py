"""Float statistics of every tensor of an FP32 model on calibration clips: what the FP16 guard decides from.

One pass over the clips (ONNX Runtime CPU, every float node output marked as a graph output, like the
calibration runner does for the compute inputs): per tensor the largest finite |x| and the number of
non-finite values; per reduction or normalisation node the largest sums its statistics accumulate over one
group (LayerNormalization: the normalised axes; InstanceNormalization: each channel over the rest;
GroupNormalization: each group; Reduce*: the reduced axes): Σ|x| and Σx², the number of elements summed,
whether that number grows with the clip (a reduced axis without a fixed size in the exported graph) and
the same sums per second of audio, so that the guard can project them to the longest clip it must allow.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper
from tqdm import tqdm

from workbench.artifacts import read_json_artifact, write_json_atomic
from workbench.config import SAMPLE_RATE
from workbench.errors import WorkbenchError
from workbench.quantize.plan import tensor_types
from workbench.quiet import bars_on

SCHEME = "workbench-float-stats/1"
NORMALISATION_OPS = ("LayerNormalization", "InstanceNormalization", "GroupNormalization")
SUM_OPS = ("ReduceMean", "ReduceSum", "ReduceL1", "ReduceLogSum", "ReduceLogSumExp")
SQUARE_OPS = ("ReduceSumSquare", "ReduceL2")
ACCUMULATING_OPS = NORMALISATION_OPS + SUM_OPS + SQUARE_OPS


@dataclass
class Accumulator:
    """The largest sums one reduction/normalisation node accumulates per group, over all clips."""

    op: str
    count: int = 0  # elements summed per group (largest seen)
    sum_abs: float = 0.0  # Σ|x| (bounds |Σx| and every partial sum)
    sum_sq: float = 0.0  # Σx² (variance statistics, L2)
    sum_abs_per_s: float = 0.0  # the largest Σ|x| / clip seconds
    sum_sq_per_s: float = 0.0
    grows_with_length: bool = False

    @property
    def uses_squares(self) -> bool:
        return self.op in NORMALISATION_OPS + SQUARE_OPS

    def largest(self, seconds: float | None = None) -> float:
        """The accumulator the node needs: measured, or projected to clips of ``seconds`` when it grows."""
        value = max(self.sum_abs, self.sum_sq if self.uses_squares else 0.0)
        if seconds is None or not self.grows_with_length:
            return value
        rate = max(self.sum_abs_per_s, self.sum_sq_per_s if self.uses_squares else 0.0)
        return max(value, rate * seconds)


@dataclass
class FloatStats:
    """Per tensor amax / non-finite counts, per accumulating node its sums; clips and longest clip seen."""

    amax: dict[str, float] = field(default_factory=dict)
    nonfinite: dict[str, int] = field(default_factory=dict)
    accumulators: dict[str, Accumulator] = field(default_factory=dict)
    clips: int = 0
    longest_s: float = 0.0
    keys: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {
            "format": SCHEME,
            "keys": self.keys,
            "clips": self.clips,
            "longest_s": self.longest_s,
            "amax": self.amax,
            "nonfinite": self.nonfinite,
            "accumulators": {k: asdict(v) for k, v in self.accumulators.items()},
        }

    @classmethod
    def from_json(cls, obj: dict) -> FloatStats:
        if obj.get("format") != SCHEME:
            raise WorkbenchError(f"not float statistics ({obj.get('format')!r}, expected {SCHEME!r})")
        return cls(
            {k: float(v) for k, v in obj["amax"].items()},
            {k: int(v) for k, v in obj["nonfinite"].items()},
            {k: Accumulator(**v) for k, v in obj["accumulators"].items()},
            int(obj["clips"]),
            float(obj["longest_s"]),
            dict(obj.get("keys", {})),
        )

    def merged(self, other: FloatStats) -> FloatStats:
        """The statistics of both passes' clips together, exactly those of one pass over all of them (every field
        a maximum, a count or an "or"); tensors and nodes in this one's order, then the other's new ones."""
        if self.keys != other.keys:
            raise ValueError("float statistics of different exports or sets do not add")
        out = FloatStats(keys=dict(self.keys), clips=self.clips + other.clips)
        out.longest_s = max(self.longest_s, other.longest_s)
        for name in dict.fromkeys([*self.amax, *other.amax]):
            out.amax[name] = max(self.amax.get(name, 0.0), other.amax.get(name, 0.0))
        for name in dict.fromkeys([*self.nonfinite, *other.nonfinite]):
            out.nonfinite[name] = self.nonfinite.get(name, 0) + other.nonfinite.get(name, 0)
        for node in dict.fromkeys([*self.accumulators, *other.accumulators]):
            a, b = self.accumulators.get(node), other.accumulators.get(node)
            if a is None or b is None:
                only = a if a is not None else b
                assert only is not None
                out.accumulators[node] = replace(only)
                continue
            out.accumulators[node] = Accumulator(
                a.op,
                max(a.count, b.count),
                max(a.sum_abs, b.sum_abs),
                max(a.sum_sq, b.sum_sq),
                max(a.sum_abs_per_s, b.sum_abs_per_s),
                max(a.sum_sq_per_s, b.sum_sq_per_s),
                a.grows_with_length or b.grows_with_length,
            )
        return out

    def save(self, path: Path) -> None:
        write_json_atomic(Path(path), self.to_json())

    @classmethod
    def load(cls, path: Path) -> FloatStats:
        """Read through the one JSON-artifact reader; anything unreadable or malformed is a WorkbenchError."""
        hint = "delete the file to recompute them"
        data = read_json_artifact(path, SCHEME, hint, what="float statistics")
        try:
            return cls.from_json(data)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise WorkbenchError(f"float statistics {path} are malformed ({exc}); {hint}") from exc


def _static_dims(model: onnx.ModelProto) -> dict[str, list[int | None]]:
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    out = {}
    for value in [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]:
        if value.type.HasField("tensor_type") and value.type.tensor_type.HasField("shape"):
            out[value.name] = [
                d.dim_value if d.HasField("dim_value") else None for d in value.type.tensor_type.shape.dim
            ]
    return out


def _constant_ints(model: onnx.ModelProto, name: str) -> list[int] | None:
    for init in model.graph.initializer:
        if init.name == name:
            return [int(v) for v in numpy_helper.to_array(init).reshape(-1)]
    for node in model.graph.node:
        if node.op_type == "Constant" and node.output[0] == name:
            return [int(v) for v in numpy_helper.to_array(node.attribute[0].t).reshape(-1)]
    return None


def _reduced_axes(model: onnx.ModelProto, node: onnx.NodeProto, rank: int) -> tuple[int, ...] | None:
    """Axes one group of ``node``'s statistics sums over (None: the node reduces nothing)."""
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    if node.op_type == "LayerNormalization":
        return tuple(range(int(attrs.get("axis", -1)) % rank, rank))
    if node.op_type in ("InstanceNormalization", "GroupNormalization"):
        return tuple(range(2, rank))  # GroupNormalization: the channel axis joins its group (see _group_view)
    axes = attrs.get("axes")
    if axes is None and len(node.input) > 1 and node.input[1]:
        axes = _constant_ints(model, node.input[1])
    if not axes:
        return None if attrs.get("noop_with_empty_axes", 0) else tuple(range(rank))
    return tuple(sorted(int(a) % rank for a in axes))


def accumulating_nodes(model: onnx.ModelProto) -> dict[str, tuple[onnx.NodeProto, str]]:
    """Reduction/normalisation nodes with a float data input: name -> (node, input tensor)."""
    return {n.name: (n, n.input[0]) for n in model.graph.node if n.op_type in ACCUMULATING_OPS and n.input}


def _group_view(node: onnx.NodeProto, x: np.ndarray) -> np.ndarray:
    if node.op_type != "GroupNormalization":
        return x
    groups = int(next(helper.get_attribute_value(a) for a in node.attribute if a.name == "num_groups"))
    return x.reshape(x.shape[0], groups, -1)


def _update_accumulator(
    acc: Accumulator, node: onnx.NodeProto, x: np.ndarray, axes: tuple[int, ...], seconds: float
) -> None:
    x = _group_view(node, x)
    if node.op_type == "GroupNormalization":
        axes = (2,)
    count = int(np.prod([x.shape[a] for a in axes])) if axes else 1
    total_abs = float(np.abs(x).sum(axis=axes, dtype=np.float64).max()) if x.size else 0.0
    total_sq = (
        float(np.square(x, dtype=np.float64).sum(axis=axes).max()) if x.size and acc.uses_squares else 0.0
    )
    acc.count = max(acc.count, count)
    acc.sum_abs, acc.sum_sq = max(acc.sum_abs, total_abs), max(acc.sum_sq, total_sq)
    acc.sum_abs_per_s = max(acc.sum_abs_per_s, total_abs / seconds)
    acc.sum_sq_per_s = max(acc.sum_sq_per_s, total_sq / seconds)


def _largest_finite(value: np.ndarray) -> tuple[float, int]:
    """(largest finite |x|, how many values are inf/NaN) of ``value``; the maximum alone when it is finite (NaN
    and inf carry through ``max``, so a finite maximum means every value is finite)."""
    if not value.size:
        return 0.0, 0
    magnitude = np.abs(value)
    top = float(magnitude.max())
    if np.isfinite(top):
        return top, 0
    finite = np.isfinite(magnitude)
    bad = int(magnitude.size - np.count_nonzero(finite))
    return (float(magnitude[finite].max()) if finite.any() else 0.0), bad


@dataclass
class FloatSession:
    """An ONNX Runtime session of the FP32 model that returns every float tensor, and what the pass reads of the
    graph (the model itself, for the reduced axes)."""

    session: Any
    names: list[str]
    proto: onnx.ModelProto
    accumulating: dict[str, tuple[onnx.NodeProto, str]]
    dims: dict[str, list[int | None]]
    what: str


def open_float_session(model: onnx.ModelProto | Path, threads: int | None = None) -> FloatSession:
    """The session ``collect_float_stats`` runs clips through; ``threads``: ONNX Runtime's intra-op threads
    (default: the cores this process may run on; its float values depend on the count)."""
    from workbench.backends.onnxruntime import ort_failures, session_options, session_with_outputs

    proto = onnx.load(str(model)) if isinstance(model, Path) else model
    types = tensor_types(proto)
    produced = [o for n in proto.graph.node for o in n.output if o and types.get(o) == onnx.TensorProto.FLOAT]
    names = list(dict.fromkeys(produced))
    if not names:
        raise WorkbenchError("the model writes no float tensor; there is nothing to guard")
    what = str(model) if isinstance(model, Path) else "the model"
    with ort_failures(what):
        session = session_with_outputs(proto, names, session_options(threads, optimization="basic"))
    return FloatSession(session, names, proto, accumulating_nodes(proto), _static_dims(proto), what)


def collect_float_stats(
    model: onnx.ModelProto | Path | FloatSession,
    clips: Iterable[np.ndarray],
    count: int | None = None,
    keys: dict | None = None,
    progress: bool = True,
    prepare: Callable[[np.ndarray], np.ndarray] | None = None,
) -> FloatStats:
    """One pass over raw 16 kHz clips through the FP32 model (or a session of it from ``open_float_session``),
    each made ``input_values`` by ``prepare`` (the model's feature settings; default: normalised like the feature
    extractor)."""
    from workbench.backends.onnxruntime import runs_ahead
    from workbench.model.export import INPUT
    from workbench.model.features import normalise_audio

    prepare = prepare or normalise_audio
    opened = model if isinstance(model, FloatSession) else open_float_session(model)
    session, names, proto, what = opened.session, opened.names, opened.proto, opened.what
    accumulating, dims = opened.accumulating, opened.dims
    stats = FloatStats(keys=dict(keys or {}))
    axes_of: dict[str, tuple[int, ...] | None] = {}
    feeds = (
        (what, {INPUT: prepare(audio)[None]})
        for audio in tqdm(
            clips,
            total=count,
            desc="float statistics (one pass)",
            unit="clip",
            disable=not (progress and bars_on()),
        )
    )
    for feed, outputs in runs_ahead(
        session, names, feeds
    ):  # the next clip runs while this one's are measured
        x = feed[INPUT]
        seconds = max(x.shape[-1] / SAMPLE_RATE, 1e-3)
        values = dict(zip(names, outputs))
        values[INPUT] = x
        for name, value in values.items():
            top, bad = _largest_finite(value)
            stats.amax[name] = max(stats.amax.get(name, 0.0), top)
            if bad:
                stats.nonfinite[name] = stats.nonfinite.get(name, 0) + bad
        for node_name, (node, source) in accumulating.items():
            if source not in values:
                continue
            value = values[source]
            if node_name not in axes_of:
                axes_of[node_name] = _reduced_axes(proto, node, value.ndim)
            axes = axes_of[node_name]
            if axes is None:
                continue
            acc = stats.accumulators.setdefault(node_name, Accumulator(node.op_type))
            shape = dims.get(source)
            acc.grows_with_length = (
                acc.grows_with_length or shape is None or any(a >= len(shape) or not shape[a] for a in axes)
            )
            _update_accumulator(acc, node, value, axes, seconds)
        stats.clips += 1
        stats.longest_s = max(stats.longest_s, seconds)
        del values
    if stats.clips == 0:
        raise WorkbenchError("no clips for the float statistics")
    # in graph order, whichever clip first had a non-finite value: statistics of clip shards merge to these
    stats.nonfinite = {n: stats.nonfinite[n] for n in [*names, INPUT] if n in stats.nonfinite}
    return stats

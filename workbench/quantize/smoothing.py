"""SmoothQuant-style migration: move activation outliers of MatMul/Gemm inputs into the weights, in the FP32 graph.

For an activation X feeding ``X @ W`` (W constant), a per-input-channel scale ``s`` gives the same product
``(X / s) @ (s W)``. With ``s_j = max|X_j|**alpha / max|W_j|**(1 - alpha)`` (Xiao et al., SmoothQuant, 2022)
the channels of X that carry outliers shrink and the matching weight rows grow, so one per-tensor
activation scale loses less. The engine still sees per-tensor activation scales: ``1 / s`` is folded into
the FP32 graph, never into the Q/DQ:

- ``layernorm``: X is a LayerNormalization's output read by nothing but the smoothed nodes (and Shape): its
  gamma and beta are divided by ``s``;
- ``previous-layer``: X is ``MatMul(y, W0) + b`` read only by the smoothed nodes: W0's columns and b are
  divided by ``s``;
- ``scale-node``: otherwise (X also feeds a residual Add, or comes from a GELU or a Reshape) a ``Mul`` by
  ``1 / s`` is inserted before the smoothed nodes only; an engine fuses it into the quantize of X as a
  pointwise op.

``smoothing_targets`` finds the candidates, ``output_error`` scores a scale on sampled activation rows (the
strength search of ``workbench.calibration.recovery``), ``apply_smoothing`` writes the folded graph.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from numpy.typing import DTypeLike
from onnx import numpy_helper

from workbench.quantize.qdq import dequantized_weight

SCALE_RANGE = (1e-4, 1e4)  # smoothing scales are clipped here (a dead channel must not blow up a weight row)
SHAPE_ONLY = ("Shape",)  # consumers that read only a tensor's shape


@dataclass(frozen=True)
class SmoothTarget:
    """An activation tensor and the MatMul/Gemm nodes that read it against a constant weight."""

    tensor: str
    nodes: tuple[str, ...]
    weights: tuple[str, ...]  # initializer names, one per node
    input_axes: tuple[int, ...]  # each weight's input-channel axis

    def weight_absmax(self, model: onnx.ModelProto) -> np.ndarray:
        """max |W| per input channel over every smoothed weight."""
        inits = _initializers(model)
        tops = [
            np.abs(numpy_helper.to_array(inits[w])).max(axis=1 - a)
            for w, a in zip(self.weights, self.input_axes)
        ]
        return np.max(np.stack(tops), axis=0)

    def stacked_weight(self, model: onnx.ModelProto) -> np.ndarray:
        """The weights as one [channels, outputs] matrix (each node's outputs side by side)."""
        inits = _initializers(model)
        parts = []
        for w, a in zip(self.weights, self.input_axes):
            values = numpy_helper.to_array(inits[w]).astype(np.float32)
            parts.append(values if a == 0 else values.T)
        return np.concatenate(parts, axis=1)


def _initializers(model: onnx.ModelProto) -> dict[str, onnx.TensorProto]:
    return {i.name: i for i in model.graph.initializer}


def _weight_input_axis(node: onnx.NodeProto) -> int | None:
    """Input-channel axis of a MatMul/Gemm's constant B ([in, out] -> 0; Gemm transB -> 1); None if unsupported."""
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    if node.op_type == "MatMul":
        return 0
    if node.op_type == "Gemm" and not attrs.get("transA", 0) and attrs.get("alpha", 1.0) == 1.0:
        return 1 if attrs.get("transB", 0) else 0
    return None


def smoothing_targets(model: onnx.ModelProto) -> list[SmoothTarget]:
    """Activation tensors (graph order) whose every MatMul/Gemm/Conv reader multiplies them by a constant 2-D weight."""
    inits = _initializers(model)
    readers: dict[str, list[onnx.NodeProto]] = {}
    for node in model.graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    targets: list[SmoothTarget] = []
    seen: set[str] = set()
    for node in model.graph.node:
        if node.op_type not in ("MatMul", "Gemm") or len(node.input) < 2:
            continue
        tensor = node.input[0]
        if tensor in seen or tensor in inits:
            continue
        seen.add(tensor)
        compute = [r for r in readers[tensor] if r.op_type in ("MatMul", "Gemm", "Conv")]
        axes, weights = [], []
        for reader in compute:
            axis = _weight_input_axis(reader)
            weight = reader.input[1] if len(reader.input) > 1 else ""
            if (
                axis is None
                or reader.input[0] != tensor
                or weight not in inits
                or len(inits[weight].dims) != 2
                or len(readers.get(weight, [])) != 1
            ):
                break
            axes.append(axis)
            weights.append(weight)
        else:
            targets.append(SmoothTarget(tensor, tuple(r.name for r in compute), tuple(weights), tuple(axes)))
    return targets


def smoothing_scales(act_absmax: np.ndarray, weight_absmax: np.ndarray, alpha: float) -> np.ndarray:
    """``s = act**alpha / weight**(1 - alpha)`` per channel (1 where either is 0), clipped to ``SCALE_RANGE``."""
    act = np.asarray(act_absmax, np.float64)
    wgt = np.asarray(weight_absmax, np.float64)
    live = (act > 0) & (wgt > 0)
    scales = np.ones_like(act)
    scales[live] = act[live] ** alpha / wgt[live] ** (1.0 - alpha)
    return np.clip(scales, *SCALE_RANGE).astype(np.float32)


def fake_quantize(values: np.ndarray, amax: float) -> np.ndarray:
    """Symmetric per-tensor INT8 and back (scale ``amax / 127``, float32), as a Q/DQ pair computes it."""
    scale = np.float32(max(amax, 1e-8) / 127.0)
    return np.clip(np.round(values / scale), -127, 127).astype(np.float32) * scale


def output_error(
    rows: np.ndarray, weight: np.ndarray, scales: np.ndarray, amax: float, dtype: DTypeLike = np.float32
) -> float:
    """Mean squared error of ``Q(rows / s) @ Q(s W)`` against ``rows @ W`` (``weight``: [channels, outputs];
    ``amax``: the range of ``rows / s``; weights per output channel as ``qdq`` writes them)."""
    exact = rows @ weight
    smoothed = fake_quantize(rows / scales, amax)
    quantized = smoothed @ dequantized_weight(weight * scales[:, None], 1, dtype)
    return float(np.mean((quantized - exact) ** 2))


def apply_smoothing(
    model: onnx.ModelProto, scales: dict[str, np.ndarray], targets: list[SmoothTarget] | None = None
) -> tuple[onnx.ModelProto, dict[str, str]]:
    """A copy of ``model`` with each tensor in ``scales`` smoothed (weights times s, 1/s folded before them);
    returns it and how each 1/s was folded (``layernorm`` / ``previous-layer`` / ``scale-node``)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    by_tensor = {t.tensor: t for t in (targets or smoothing_targets(out))}
    inits = _initializers(out)
    producer = {o: n for n in out.graph.node for o in n.output}
    readers: dict[str, list[onnx.NodeProto]] = {}
    for node in out.graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    folds: dict[str, str] = {}
    for tensor, s in scales.items():
        target = by_tensor[tensor]
        s = np.asarray(s, np.float32)
        for weight, axis in zip(target.weights, target.input_axes):
            values = numpy_helper.to_array(inits[weight]).astype(np.float32)
            shape = (-1, 1) if axis == 0 else (1, -1)
            _set(inits[weight], values * s.reshape(shape))
        others = [
            r for r in readers.get(tensor, []) if r.name not in target.nodes and r.op_type not in SHAPE_ONLY
        ]
        graph_output = tensor in {o.name for o in out.graph.output}
        folds[tensor] = _fold(
            out, tensor, s, producer.get(tensor), readers, inits, not others and not graph_output
        )
        if folds[tensor] == "scale-node":
            _insert_scale(out, tensor, 1.0 / s, set(target.nodes))
    return out, folds


def _set(init: onnx.TensorProto, values: np.ndarray) -> None:
    init.CopyFrom(numpy_helper.from_array(values.astype(numpy_helper.to_array(init).dtype), init.name))


def _only_reader(name: str, node: onnx.NodeProto, readers: dict[str, list[onnx.NodeProto]]) -> bool:
    return [r.name for r in readers.get(name, [])] == [node.name]


def _fold(
    model: onnx.ModelProto,
    tensor: str,
    s: np.ndarray,
    producer: onnx.NodeProto | None,
    readers: dict[str, list[onnx.NodeProto]],
    inits: dict[str, onnx.TensorProto],
    exclusive: bool,
) -> str:
    """Fold ``1 / s`` into ``producer`` where that changes nothing but ``tensor``; the kind of fold made."""
    if producer is None or not exclusive:
        return "scale-node"
    if producer.op_type == "LayerNormalization" and len(producer.input) >= 2:
        params = [p for p in producer.input[1:3] if p]
        if all(p in inits and _only_reader(p, producer, readers) for p in params):
            for p in params:
                _set(inits[p], numpy_helper.to_array(inits[p]).astype(np.float32) / s)
            return "layernorm"
    if producer.op_type == "Add":
        consts = [i for i in producer.input if i in inits]
        others = [i for i in producer.input if i not in inits]
        prev = next((n for n in model.graph.node if others and others[0] in n.output), None)
        if (
            len(consts) == 1
            and len(others) == 1
            and prev is not None
            and prev.op_type == "MatMul"
            and prev.input[1] in inits
            and _only_reader(prev.input[1], prev, readers)
            and _only_reader(others[0], producer, readers)
            and _only_reader(consts[0], producer, readers)
            and numpy_helper.to_array(inits[consts[0]]).shape == s.shape
        ):
            w0 = numpy_helper.to_array(inits[prev.input[1]]).astype(np.float32)
            _set(inits[prev.input[1]], w0 / s.reshape(1, -1))
            _set(inits[consts[0]], numpy_helper.to_array(inits[consts[0]]).astype(np.float32) / s)
            return "previous-layer"
    return "scale-node"


def _insert_scale(model: onnx.ModelProto, tensor: str, inverse: np.ndarray, nodes: set[str]) -> None:
    """``tensor * inverse`` as a new Mul read by ``nodes`` in place of ``tensor`` (placed right after its producer)."""
    const = f"{tensor}_smooth_scale"
    scaled = f"{tensor}_smoothed"
    model.graph.initializer.append(numpy_helper.from_array(inverse.astype(np.float32), const))
    mul = onnx.helper.make_node("Mul", [tensor, const], [scaled], name=f"{tensor}_smooth")
    index = 0
    for k, node in enumerate(model.graph.node):
        if tensor in node.output:
            index = k + 1
    model.graph.node.insert(index, mul)
    for node in model.graph.node:
        if node.name in nodes:
            node.input[0] = scaled

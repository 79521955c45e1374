"""Per-channel shift and scale of convolution inputs: the graph transform (``calibrate --shift-scale``).

TensorRT's INT8 is symmetric and per tensor for activations. A feature encoder's convolutions read GELU outputs:
one-sided (nothing below -0.17), so half of the INT8 codes go unused, and uneven across channels, so the channels
with small values get few codes. With a shift ``c`` and a scale ``s`` per input channel, a Conv reads

    z = (x - c) / s,   W' = W * s (per input channel),   b' = b + sum over channels and taps of Q(W') * c / s

and computes the same function when ``Q`` (the INT8 weight rounding, per output channel) is left out: every
channel of ``z`` spans about the same range around zero, as per-channel asymmetric quantization would, while the
engine still sees one symmetric scale for ``z`` and per-channel weight scales for ``W'`` (Outlier Suppression+,
Wei et al., 2023: channel-wise shifting and scaling). The bias is computed from the rounded weights ``Q(W')`` the
plan's variant stores, so the shift adds no error of its own: the INT8 conv computes ``Q(W')/s`` against ``x``,
exactly as it would compute ``Q(W')`` against ``z`` (with the full ``W'``, the weights' rounding times ``c``
would shift every output channel by a constant). So the transform belongs to one plan and one weight-scale type,
like bias correction, and is applied to the plan's INT8 convolutions only, when its variant is built.

The ``Sub`` and ``Mul`` before the quantize are pointwise ops that TensorRT fuses into the producer's epilogue (the
GELU after the previous convolution) with the quantize; the bias lives in the INT8 convolution's epilogue.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from numpy.typing import DTypeLike
from onnx import helper, numpy_helper

from workbench.quantize.qdq import dequantized_weight

SHIFTED_SUFFIX = "_shift_scaled"


def shifted_name(tensor: str) -> str:
    """The tensor an INT8 convolution reads instead of ``tensor`` once shifted and scaled (its range in the cache)."""
    return tensor + SHIFTED_SUFFIX


@dataclass(frozen=True)
class ChannelShift:
    """Per input channel: the shift subtracted and the scale divided by (both float32, one value a channel)."""

    shift: np.ndarray
    scale: np.ndarray

    @classmethod
    def for_range(cls, low: np.ndarray, high: np.ndarray, alpha: float) -> ChannelShift:
        """Centre each channel's ``[low, high]`` on zero and bring its half-width ``r`` towards the median's:
        ``s = (r / median(r)) ** alpha`` (0: centring only, 1: every channel the same width)."""
        low, high = np.asarray(low, np.float64), np.asarray(high, np.float64)
        half = np.maximum((high - low) / 2, 1e-6)
        scale = (half / max(float(np.median(half)), 1e-6)) ** alpha
        return cls(((high + low) / 2).astype(np.float32), np.maximum(scale, 1e-4).astype(np.float32))

    def apply(self, values: np.ndarray, axis: int = 1) -> np.ndarray:
        """``(values - shift) / scale`` along the channel ``axis``."""
        shape = [1] * values.ndim
        shape[axis] = -1
        return (values - self.shift.reshape(shape)) / self.scale.reshape(shape)

    def rounded_weights_mean(self, mean: np.ndarray) -> np.ndarray:
        """What bias correction takes as the input mean of a shifted convolution, given the original input's: the
        conv computes ``Q(W') z + sum Q(W') c / s = Q(W') (x / s)``, so the rounded weights see ``x / s``, whose
        mean is ``mean / s`` (the mean of ``z`` would leave the weights' rounding times ``c / s`` uncorrected)."""
        return (np.asarray(mean, np.float64) / self.scale).astype(np.float32)


def convs_reading(model: onnx.ModelProto, tensor: str, nodes: set[str]) -> list[onnx.NodeProto]:
    """The convolutions among ``nodes`` that read ``tensor`` against a constant weight and bias (or none), with one
    group."""
    inits = {i.name for i in model.graph.initializer}
    return [
        n
        for n in model.graph.node
        if n.name in nodes
        and n.op_type == "Conv"
        and n.input[0] == tensor
        and len(n.input) > 1
        and n.input[1] in inits
        and (len(n.input) < 3 or not n.input[2] or n.input[2] in inits)
        and all(a.name != "group" or a.i == 1 for a in n.attribute)
    ]


def apply_shift_scale(
    model: onnx.ModelProto,
    shifts: dict[str, ChannelShift],
    nodes: set[str],
    dtype: DTypeLike | None = np.float16,
) -> tuple[onnx.ModelProto, list[str]]:
    """A copy of ``model`` in which the convolutions among ``nodes`` that read a tensor of ``shifts`` read it
    shifted and scaled (see the module docstring); returns it and the convolutions changed.

    ``dtype``: the type the plan's variant stores weight scales in (float16 when its INT8 nodes compute in FP16),
    so the bias matches the weights the variant rounds; None leaves the weights unrounded in the bias (then the
    graph computes the same function as ``model``)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    inits = {i.name: i for i in graph.initializer}
    readers: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            readers[name] = readers.get(name, 0) + 1
    before: dict[str, list[onnx.NodeProto]] = {}
    changed: list[str] = []
    for tensor, shift in shifts.items():
        convs = convs_reading(out, tensor, nodes)
        convs = [c for c in convs if numpy_helper.to_array(inits[c.input[1]]).shape[1] == shift.shift.size]
        if not convs:
            continue
        target = shifted_name(tensor)
        before[convs[0].name] = _shift_nodes(graph, tensor, target, shift)
        for conv in convs:
            _fold_into_conv(graph, conv, target, shift, inits, readers, dtype)
            changed.append(conv.name)
    if before:
        ordered: list[onnx.NodeProto] = []
        for node in graph.node:
            ordered += before.get(node.name, [])
            ordered.append(node)
        del graph.node[:]
        graph.node.extend(ordered)
    return out, changed


def _shift_nodes(
    graph: onnx.GraphProto, tensor: str, target: str, shift: ChannelShift
) -> list[onnx.NodeProto]:
    """``target = (tensor - shift) * (1 / scale)``, constants shaped [1, channels, 1]."""
    shape = (1, shift.shift.size, 1)
    centre, inverse, centred = f"{target}_shift", f"{target}_inverse_scale", f"{target}_centred"
    graph.initializer.append(numpy_helper.from_array(shift.shift.reshape(shape).astype(np.float32), centre))
    graph.initializer.append(
        numpy_helper.from_array((1.0 / shift.scale).reshape(shape).astype(np.float32), inverse)
    )
    return [
        helper.make_node("Sub", [tensor, centre], [centred], name=centred),
        helper.make_node("Mul", [centred, inverse], [target], name=target),
    ]


def _fold_into_conv(
    graph: onnx.GraphProto,
    conv: onnx.NodeProto,
    target: str,
    shift: ChannelShift,
    inits: dict[str, onnx.TensorProto],
    readers: dict[str, int],
    dtype: DTypeLike | None,
) -> None:
    """``conv`` reads ``target`` with its weight scaled per input channel and the shift added to its bias."""
    weight = numpy_helper.to_array(inits[conv.input[1]]).astype(np.float32)
    channel = (1, -1) + (1,) * (weight.ndim - 2)
    scaled = weight * shift.scale.reshape(channel)
    stored = scaled if dtype is None else dequantized_weight(scaled, 0, dtype)
    offset = (stored.astype(np.float64) * (shift.shift / shift.scale).reshape(channel)).reshape(
        weight.shape[0], -1
    )
    add = offset.sum(axis=1)
    name = f"{conv.name}_weight_shift_scaled"
    graph.initializer.append(numpy_helper.from_array(scaled.astype(np.float32), name))
    if readers.get(conv.input[1], 0) == 1:  # the original weight has no other reader: it goes
        graph.initializer.remove(inits.pop(conv.input[1]))
    conv.input[0], conv.input[1] = target, name
    bias_name = conv.input[2] if len(conv.input) > 2 and conv.input[2] else None
    if bias_name is not None:  # a constant (convs_reading)
        bias = numpy_helper.to_array(inits[bias_name])
        add = add + bias.astype(np.float64)
        if readers.get(bias_name, 0) == 1:
            inits[bias_name].CopyFrom(numpy_helper.from_array(add.astype(bias.dtype), bias_name))
            return
    new = f"{conv.name}_bias_shift_scaled"
    graph.initializer.append(numpy_helper.from_array(add.astype(np.float32), new))
    if len(conv.input) > 2:
        conv.input[2] = new
    else:
        conv.input.append(new)

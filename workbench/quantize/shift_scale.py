"""Per-channel shift and scale of the inputs of convolutions and MatMuls: the graph transform (``--shift-scale``).

TensorRT's INT8 is symmetric and per tensor for activations. A feature encoder's convolutions and a feed-forward
block's output projection read GELU outputs: one-sided (nothing below -0.17), so half of the INT8 codes go
unused, and uneven across channels, so the channels with small values get few codes. With a shift ``c`` and a
scale ``s`` per input channel, a Conv reads

    z = (x - c) / s,   W' = W * s (per input channel),   b' = b + sum over channels and taps of Q(W') * c / s

and a MatMul ``x @ B`` (``B`` a constant [in, out]) reads ``z`` with ``B' = diag(s) B`` and adds ``(c / s) @ Q(B')``
to the bias ``Add`` after it (a new ``Add`` when it has none). Each computes the same function when ``Q`` (the
INT8 weight rounding, per output channel) is left out: every channel of ``z`` spans about the same range around
zero, as per-channel asymmetric quantization would, while the engine still sees one symmetric scale for ``z`` and
per-channel weight scales for ``W'`` (Outlier Suppression+, Wei et al., 2023: channel-wise shifting and scaling).
The bias is computed from the rounded weights ``Q(W')`` the plan's variant stores, so the shift adds no error of
its own: the INT8 node computes ``Q(W')/s`` against ``x``, exactly as it would compute ``Q(W')`` against ``z``
(with the full ``W'``, the weights' rounding times ``c`` would shift every output channel by a constant). So the
transform belongs to one plan and one weight-scale type, like bias correction, and is applied to the plan's INT8
nodes only, when its variant is built.

The ``Sub`` and ``Mul`` before the quantize are pointwise ops that TensorRT fuses into the producer's epilogue (the
GELU after the previous layer) with the quantize; the bias lives in the INT8 layer's epilogue.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from numpy.typing import DTypeLike
from onnx import helper, numpy_helper

from workbench.quantize.qdq import dequantized_weight, weight_channel_axis

SHIFTED_SUFFIX = "_shift_scaled"


def shifted_name(tensor: str) -> str:
    """The tensor an INT8 convolution or MatMul reads instead of ``tensor`` once shifted and scaled (its range in the
    cache)."""
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
        """What bias correction takes as the input mean of a shifted convolution or MatMul, given the original
        input's: the layer computes ``Q(W') z + sum Q(W') c / s = Q(W') (x / s)``, so the rounded weights see
        ``x / s``, whose mean is ``mean / s`` (the mean of ``z`` would leave the weights' rounding times ``c / s`` uncorrected)."""
        return (np.asarray(mean, np.float64) / self.scale).astype(np.float32)


def shiftable_readers(model: onnx.ModelProto, tensor: str, nodes: set[str]) -> list[onnx.NodeProto]:
    """The nodes among ``nodes`` that read ``tensor`` against a constant weight and can take its shift: Convs with
    one group and a constant bias (or none), MatMuls with a constant 2-D right operand; all of the first one's op
    type (a shifted tensor is laid out for one of them: channels on axis 1 for a Conv, last for a MatMul)."""
    inits = {i.name: i for i in model.graph.initializer}
    found = []
    for n in model.graph.node:
        if n.name not in nodes or len(n.input) < 2 or n.input[0] != tensor or n.input[1] not in inits:
            continue
        if n.op_type == "Conv":
            if (len(n.input) < 3 or not n.input[2] or n.input[2] in inits) and all(
                a.name != "group" or a.i == 1 for a in n.attribute
            ):
                found.append(n)
        elif n.op_type == "MatMul" and len(inits[n.input[1]].dims) == 2:
            found.append(n)
    return [n for n in found if n.op_type == found[0].op_type]


def input_channels(node: onnx.NodeProto, weight: np.ndarray) -> int:
    """How many input channels ``node`` (a ``shiftable_readers`` node) reads, from its weight's shape."""
    return int(weight.shape[1] if node.op_type == "Conv" else weight.shape[0])


def apply_shift_scale(
    model: onnx.ModelProto,
    shifts: dict[str, ChannelShift],
    nodes: set[str],
    dtype: DTypeLike | None = np.float16,
) -> tuple[onnx.ModelProto, list[str]]:
    """A copy of ``model`` in which the convolutions and MatMuls among ``nodes`` that read a tensor of ``shifts``
    read it shifted and scaled (see the module docstring); returns it and the nodes changed.

    ``dtype``: the type the plan's variant stores weight scales in (float16 when its INT8 nodes compute in FP16),
    so the bias matches the weights the variant rounds; None leaves the weights unrounded in the bias (then the
    graph computes the same function as ``model``)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    inits = {i.name: i for i in graph.initializer}
    readers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    before: dict[str, list[onnx.NodeProto]] = {}
    after: dict[str, list[onnx.NodeProto]] = {}
    changed: list[str] = []
    for tensor, shift in shifts.items():
        found = [
            n
            for n in shiftable_readers(out, tensor, nodes)
            if input_channels(n, numpy_helper.to_array(inits[n.input[1]])) == shift.shift.size
        ]
        if not found:
            continue
        target = shifted_name(tensor)
        before[found[0].name] = _shift_nodes(graph, tensor, target, shift, found[0].op_type)
        for node in found:
            if node.op_type == "Conv":
                _fold_into_conv(graph, node, target, shift, inits, readers, dtype)
            else:
                after[node.name] = _fold_into_matmul(graph, node, target, shift, inits, readers, dtype)
            changed.append(node.name)
    if before:
        ordered: list[onnx.NodeProto] = []
        for node in graph.node:
            ordered += before.get(node.name, [])
            ordered.append(node)
            ordered += after.get(node.name, [])
        del graph.node[:]
        graph.node.extend(ordered)
    return out, changed


def _shift_nodes(
    graph: onnx.GraphProto, tensor: str, target: str, shift: ChannelShift, op_type: str
) -> list[onnx.NodeProto]:
    """``target = (tensor - shift) * (1 / scale)``, constants shaped [1, channels, 1] for a Conv's input, [channels]
    for a MatMul's."""
    shape = (1, shift.shift.size, 1) if op_type == "Conv" else (shift.shift.size,)
    centre, inverse, centred = f"{target}_shift", f"{target}_inverse_scale", f"{target}_centred"
    graph.initializer.append(numpy_helper.from_array(shift.shift.reshape(shape).astype(np.float32), centre))
    graph.initializer.append(
        numpy_helper.from_array((1.0 / shift.scale).reshape(shape).astype(np.float32), inverse)
    )
    return [
        helper.make_node("Sub", [tensor, centre], [centred], name=centred),
        helper.make_node("Mul", [centred, inverse], [target], name=target),
    ]


def _scaled_weight(
    graph: onnx.GraphProto,
    node: onnx.NodeProto,
    shift: ChannelShift,
    inits: dict[str, onnx.TensorProto],
    readers: dict[str, list[onnx.NodeProto]],
    dtype: DTypeLike | None,
) -> np.ndarray:
    """Give ``node`` its weight scaled per input channel (a new initializer; the old one goes when nothing else
    reads it); returns what the variant computes with (the scaled weight rounded per output channel in ``dtype``,
    or the scaled weight itself when ``dtype`` is None)."""
    weight = numpy_helper.to_array(inits[node.input[1]]).astype(np.float32)
    if node.op_type == "Conv":
        channel: tuple[int, ...] = (1, -1) + (1,) * (weight.ndim - 2)
    else:
        channel = (-1, 1)
    scaled = weight * shift.scale.reshape(channel)
    axis = weight_channel_axis(node.op_type, 1, weight.ndim, {})
    stored = scaled if dtype is None else dequantized_weight(scaled, axis, dtype)
    name = f"{node.name}_weight_shift_scaled"
    graph.initializer.append(numpy_helper.from_array(scaled.astype(np.float32), name))
    if len(readers.get(node.input[1], [])) == 1:  # the original weight has no other reader: it goes
        graph.initializer.remove(inits.pop(node.input[1]))
    node.input[1] = name
    return stored


def _constant_with(
    graph: onnx.GraphProto,
    inits: dict[str, onnx.TensorProto],
    readers: dict[str, list[onnx.NodeProto]],
    name: str,
    values: np.ndarray,
    fallback: str,
) -> str:
    """Put ``values`` in the constant ``name`` when nothing else reads it, else in a new constant ``fallback``;
    returns the name the changed node reads."""
    if len(readers.get(name, [])) == 1:
        inits[name].CopyFrom(numpy_helper.from_array(values, name))
        return name
    graph.initializer.append(numpy_helper.from_array(values, fallback))
    return fallback


def _fold_into_conv(
    graph: onnx.GraphProto,
    conv: onnx.NodeProto,
    target: str,
    shift: ChannelShift,
    inits: dict[str, onnx.TensorProto],
    readers: dict[str, list[onnx.NodeProto]],
    dtype: DTypeLike | None,
) -> None:
    """``conv`` reads ``target`` with its weight scaled per input channel and the shift added to its bias."""
    stored = _scaled_weight(graph, conv, shift, inits, readers, dtype)
    channel = (1, -1) + (1,) * (stored.ndim - 2)
    offset = (stored.astype(np.float64) * (shift.shift / shift.scale).reshape(channel)).reshape(
        stored.shape[0], -1
    )
    add = offset.sum(axis=1)
    conv.input[0] = target
    new = f"{conv.name}_bias_shift_scaled"
    bias_name = conv.input[2] if len(conv.input) > 2 and conv.input[2] else None
    if bias_name is not None:  # a constant (shiftable_readers)
        bias = numpy_helper.to_array(inits[bias_name])
        moved = (add + bias.astype(np.float64)).astype(bias.dtype)
        conv.input[2] = _constant_with(graph, inits, readers, bias_name, moved, new)
        return
    graph.initializer.append(numpy_helper.from_array(add.astype(np.float32), new))
    if len(conv.input) > 2:
        conv.input[2] = new
    else:
        conv.input.append(new)


def _fold_into_matmul(
    graph: onnx.GraphProto,
    matmul: onnx.NodeProto,
    target: str,
    shift: ChannelShift,
    inits: dict[str, onnx.TensorProto],
    readers: dict[str, list[onnx.NodeProto]],
    dtype: DTypeLike | None,
) -> list[onnx.NodeProto]:
    """``matmul`` reads ``target`` with its weight's rows scaled and ``(c / s) @ Q(B')`` added to the bias ``Add``
    that alone reads its output against a constant of the output width; returns the nodes to place after it (a new
    ``Add`` when there is no such bias)."""
    stored = _scaled_weight(graph, matmul, shift, inits, readers, dtype)
    offset = (shift.shift / shift.scale).astype(np.float64) @ stored.astype(np.float64)
    matmul.input[0] = target
    output = matmul.output[0]
    users = readers.get(output, [])
    if len(users) == 1 and users[0].op_type == "Add":
        other = [i for i in users[0].input if i != output]
        if len(other) == 1 and other[0] in inits:
            bias = numpy_helper.to_array(inits[other[0]])
            if bias.shape == offset.shape:
                moved = (bias.astype(np.float64) + offset).astype(bias.dtype)
                name = _constant_with(
                    graph, inits, readers, other[0], moved, f"{matmul.name}_bias_shift_scaled"
                )
                users[0].input[list(users[0].input).index(other[0])] = name
                return []
    raw, constant = f"{output}_before_shift_bias", f"{matmul.name}_shift_bias"
    matmul.output[0] = raw
    graph.initializer.append(numpy_helper.from_array(offset.astype(np.float32), constant))
    return [helper.make_node("Add", [raw, constant], [output], name=f"{matmul.name}_shift_bias_add")]

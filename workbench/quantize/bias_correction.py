"""Bias correction: remove the mean output shift that rounding a layer's weights to INT8 causes.

With the weights quantized, a layer computes ``x @ (W + dW)`` instead of ``x @ W``; over the data its output
moves by ``E[x] @ dW`` on average (Nagel et al., "Data-Free Quantization", 2019, section 4.2). ``E[x]`` per input
channel comes from the calibration pass (``workbench.calibration.channels``), ``dW`` from the same per-channel
quantizer the Q/DQ graph uses (``qdq.dequantized_weight``), and the shift is subtracted from the layer's bias:
the constant of the Add that follows a MatMul, a Gemm's C, a Conv's B (an Add or a B input is created where
the layer has none). Conv shifts ignore the zero padding at the clip edges. Only the nodes a plan puts in
INT8 are corrected, so the corrected graph belongs to one plan.
"""

from __future__ import annotations

import numpy as np
import onnx
from numpy.typing import DTypeLike
from onnx import numpy_helper

from workbench.quantize.qdq import dequantized_weight, weight_channel_axis


def weight_shift(
    node: onnx.NodeProto, weight: np.ndarray, mean: np.ndarray, dtype: DTypeLike
) -> np.ndarray | None:
    """``E[x] @ dW`` per output channel of a MatMul ([in, out]) or Conv ([out, in/groups, k...]); None if unsupported."""
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    weight = weight.astype(np.float32)
    axis = weight_channel_axis(node.op_type, 1, weight.ndim, attrs)
    error = dequantized_weight(weight, axis, dtype) - weight
    mean = np.asarray(mean, np.float64)
    if node.op_type == "MatMul" and weight.ndim == 2 and mean.shape == (weight.shape[0],):
        return (mean @ error).astype(np.float32)
    if node.op_type == "Gemm" and weight.ndim == 2 and not attrs.get("transA", 0):
        error = error.T if attrs.get("transB", 0) else error
        return (mean @ error).astype(np.float32) if mean.shape == (error.shape[0],) else None
    if node.op_type == "Conv":
        groups = int(attrs.get("group", 1))
        out_ch, in_per_group = weight.shape[:2]
        if mean.shape != (in_per_group * groups,):
            return None
        summed = error.reshape(out_ch, in_per_group, -1).sum(axis=2)  # [out, in/groups]
        per_group = out_ch // groups
        shift = np.empty(out_ch, np.float64)
        for g in range(groups):
            rows = slice(g * per_group, (g + 1) * per_group)
            shift[rows] = summed[rows] @ mean[g * in_per_group : (g + 1) * in_per_group]
        return shift.astype(np.float32)
    return None


def correct_biases(
    model: onnx.ModelProto, means: dict[str, np.ndarray], nodes: set[str], dtype: DTypeLike = np.float16
) -> tuple[onnx.ModelProto, dict[str, float]]:
    """A copy of ``model`` with the bias of every node in ``nodes`` (MatMul/Gemm/Conv with a constant weight and
    an input mean in ``means``) lowered by its weight shift; returns it and each corrected node's max |shift|.

    ``dtype``: the type the Q/DQ graph stores weight scales in (float16 when the INT8 nodes compute in FP16).
    """
    out = onnx.ModelProto()
    out.CopyFrom(model)
    inits = {i.name: i for i in out.graph.initializer}
    readers: dict[str, list[onnx.NodeProto]] = {}
    for node in out.graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    record: dict[str, float] = {}
    for node in list(out.graph.node):
        if node.name not in nodes or len(node.input) < 2 or node.input[1] not in inits:
            continue
        mean = means.get(node.input[0])
        if mean is None:
            continue
        shift = weight_shift(node, numpy_helper.to_array(inits[node.input[1]]), mean, dtype)
        if shift is None or not np.all(np.isfinite(shift)):
            continue
        _lower_bias(out, node, shift, inits, readers)
        record[node.name] = float(np.abs(shift).max())
    return out, record


def _lower_bias(
    model: onnx.ModelProto,
    node: onnx.NodeProto,
    shift: np.ndarray,
    inits: dict[str, onnx.TensorProto],
    readers: dict[str, list[onnx.NodeProto]],
) -> None:
    bias = None
    if node.op_type in ("Conv", "Gemm") and len(node.input) > 2 and node.input[2] in inits:
        bias = inits[node.input[2]]
    elif node.op_type == "MatMul":
        after = readers.get(node.output[0], [])
        if len(after) == 1 and after[0].op_type == "Add":
            const = [i for i in after[0].input if i in inits]
            if len(const) == 1 and tuple(inits[const[0]].dims) == shift.shape:
                bias = inits[const[0]]
    if bias is not None and len(readers.get(bias.name, [])) == 1:
        values = numpy_helper.to_array(bias)
        bias.CopyFrom(numpy_helper.from_array((values - shift).astype(values.dtype), bias.name))
        return
    name = f"{node.name}_bias_correction"
    model.graph.initializer.append(numpy_helper.from_array(-shift, name))
    if node.op_type == "Conv" and len(node.input) == 2:
        node.input.append(name)
        return
    if node.op_type == "Conv":  # channel axis 1 of [batch, channels, time]
        shape = [-1] + [1] * (len(numpy_helper.to_array(inits[node.input[1]]).shape) - 2)
        model.graph.initializer[-1].CopyFrom(numpy_helper.from_array((-shift).reshape(shape), name))
    # the Add writes the layer's output tensor, so its readers, a graph output of that name and the ranges
    # calibrated for it stay as they are; the layer itself writes a new name
    output = node.output[0]
    node.output[0] = f"{output}_uncorrected"
    index = list(model.graph.node).index(node)
    model.graph.node.insert(
        index + 1, onnx.helper.make_node("Add", [node.output[0], name], [output], name=name)
    )

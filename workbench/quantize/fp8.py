"""FP8 (E4M3) Q/DQ: a per-layer alternative to FP16 for the layers INT8 breaks, on targets with FP8 tensor cores.

E4M3 keeps 3 mantissa bits over a wide exponent range (largest normal 448), so a long-tailed activation loses
little of its small values where INT8's uniform grid rounds them away. ``to_fp8`` turns the INT8 Q/DQ of
chosen compute nodes of a variant (``qdq.variant_model``) into FP8: per-tensor activation scales become
``amax / 448`` (the INT8 scale times 127 / 448), weights are re-quantized per output channel with
``amax / 448``, zero points are FLOAT8E4M3FN zeros. Opset 19 is the first with FP8 QuantizeLinear /
DequantizeLinear; ONNX Runtime's CPU kernels run them (saturating at 448), so the accuracy of an FP8 plan
is measured here by running it, with no FP8 hardware. An activation Q/DQ pair shared with a reader that is
not converted stays INT8 (the nodes in ``Converted.skipped``).

Support by target (``fp8_supported``): FP8 tensor cores exist from compute capability 8.9: Ada (L4, L40S,
RTX 40), Hopper (H100, H200) and Blackwell; not Turing (T4), not Ampere (A10 8.6, A100 8.0). TensorRT
builds FP8 Q/DQ only for those.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

FP8_MAX = 448.0
FP8_MIN_CAPABILITY = (8, 9)
FP8_OPSET = 19
TARGET_CAPABILITY = {
    "T4": (7, 5),
    "A10": (8, 6),
    "A100": (8, 0),
    "L4": (8, 9),
    "L40S": (8, 9),
    "H100": (9, 0),
    "H200": (9, 0),
    "B200": (10, 0),
}


def fp8_supported(capability: tuple[int, int]) -> bool:
    """Whether a GPU of this compute capability has FP8 (E4M3) tensor cores."""
    return tuple(capability) >= FP8_MIN_CAPABILITY


def to_e4m3(values: np.ndarray) -> np.ndarray:
    """Round float32 values to the nearest E4M3 value, saturating at +-448 (what QuantizeLinear does)."""
    import ml_dtypes

    clipped = np.clip(np.asarray(values, np.float32), -FP8_MAX, FP8_MAX)
    return clipped.astype(ml_dtypes.float8_e4m3fn)


def _fp8_tensor(name: str, values: np.ndarray) -> TensorProto:
    data = to_e4m3(values)
    return helper.make_tensor(
        name, TensorProto.FLOAT8E4M3FN, list(data.shape), data.view(np.uint8).tobytes(), raw=True
    )


@dataclass
class Converted:
    """The FP8 variant and which nodes' inputs were converted (or left INT8, with the shared tensor)."""

    model: onnx.ModelProto
    nodes: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # node -> activation whose Q/DQ pair stays INT8


def to_fp8(variant: onnx.ModelProto, nodes: set[str], source: onnx.ModelProto) -> Converted:
    """A copy of an INT8 Q/DQ ``variant`` (opset >= 19) with the Q/DQ feeding ``nodes`` in FP8 E4M3; weights are
    quantized from the FP32 ``source`` the variant was built from (not from its INT8-rounded weights)."""
    model = onnx.ModelProto()
    model.CopyFrom(variant)
    inits = {i.name: i for i in model.graph.initializer}
    source_inits = {i.name: i for i in source.graph.initializer}
    source_nodes = {n.name: n for n in source.graph.node}
    producer = {o: n for n in model.graph.node for o in n.output}
    readers: dict[str, list[onnx.NodeProto]] = {}
    for node in model.graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    out = Converted(model)
    done: set[str] = set()
    for node in model.graph.node:
        if node.name not in nodes:
            continue
        converted = False
        for slot, name in enumerate(node.input[:2]):
            dq = producer.get(name)
            if dq is None or dq.op_type != "DequantizeLinear" or dq.name in done:
                continue
            if dq.input[0] in inits:  # a weight: quantized again from the FP32 source
                original = source_inits[source_nodes[node.name].input[slot]]
                _weight_to_fp8(model, dq, inits, numpy_helper.to_array(original).astype(np.float32))
                done.add(dq.name)
                converted = True
                continue
            q = producer.get(dq.input[0])
            if q is None or q.op_type != "QuantizeLinear":
                continue
            if any(r.name not in nodes for r in readers.get(dq.output[0], [])):
                out.skipped[node.name] = q.input[0]
                continue
            scale = inits[q.input[1]]
            values = numpy_helper.to_array(scale)
            scale.CopyFrom(
                numpy_helper.from_array(
                    (values.astype(np.float32) * (127.0 / FP8_MAX)).astype(values.dtype), scale.name
                )
            )
            zero = f"{q.name}_fp8_zero_point"
            model.graph.initializer.append(_fp8_tensor(zero, np.zeros((), np.float32)))
            q.input[2] = dq.input[2] = zero
            _retype(model, q.output[0])
            done.add(dq.name)
            converted = True
        if converted:
            out.nodes.append(node.name)
    return out


def _weight_to_fp8(
    model: onnx.ModelProto, dq: onnx.NodeProto, inits: dict[str, TensorProto], weight: np.ndarray
) -> None:
    axis = next((a.i for a in dq.attribute if a.name == "axis"), 1)
    scale_init = inits[dq.input[1]]
    scales = numpy_helper.to_array(scale_init)
    shape = [1] * weight.ndim
    shape[axis] = -1
    reduce_axes = tuple(a for a in range(weight.ndim) if a != axis)
    new_scales = (np.maximum(np.abs(weight).max(axis=reduce_axes), 1e-8) / FP8_MAX).astype(scales.dtype)
    base = dq.input[0]
    fp8_name, zero_name = f"{base}_fp8", f"{base}_fp8_zero_point"
    model.graph.initializer.append(
        _fp8_tensor(fp8_name, weight / new_scales.astype(np.float32).reshape(shape))
    )
    model.graph.initializer.append(_fp8_tensor(zero_name, np.zeros(len(new_scales), np.float32)))
    scale_init.CopyFrom(numpy_helper.from_array(new_scales, scale_init.name))
    dq.input[0], dq.input[2] = fp8_name, zero_name


def _retype(model: onnx.ModelProto, name: str) -> None:
    """The quantized tensor ``name`` is FLOAT8E4M3FN now (shape inference had typed it int8)."""
    for info in model.graph.value_info:
        if info.name == name:
            info.type.tensor_type.elem_type = TensorProto.FLOAT8E4M3FN

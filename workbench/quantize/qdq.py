"""Write a precision variant: Q/DQ pairs (onnx-graphsurgeon) for int8 nodes, Casts for fp16 nodes.

int8 node: every float activation input gets QuantizeLinear/DequantizeLinear with the calibrated
per-tensor symmetric scale (zero point 0); a weight initializer gets per-output-channel symmetric
Q/DQ. fp16 node: inputs are cast to float16 and the output back to float32. fp32: untouched.
Marking comes first; all insertions happen in one pass at the end. Model IO stays float32. The source's
metadata (the model description) is copied onto the variant.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from workbench.artifacts import write_bytes_atomic
from workbench.errors import WorkbenchError
from workbench.quantize.plan import QUANTIZABLE_OPS, PrecisionPlan


def weight_channel_axis(op: str, slot: int, ndim: int, attrs: dict) -> int:
    """Output-channel axis of a constant input: Conv W [out, in, k...] -> 0; MatMul B [.., in, out] -> last;
    Gemm B -> 1, or 0 with transB; a constant left operand (A [rows, in]) -> its row axis."""
    if op == "Conv":
        return 0
    if op == "Gemm":
        if slot == 1:
            return 0 if attrs.get("transB", 0) else 1
        return 1 if attrs.get("transA", 0) else 0
    return ndim - 1 if slot == 1 else max(0, ndim - 2)


def build_variant(fp32_path: Path, amax: dict[str, float], plan: PrecisionPlan, out_path: Path) -> Path:
    """Write the variant of ``fp32_path`` that ``plan`` describes; ``amax`` holds activation ranges.

    Raises WorkbenchError when a node the plan puts in INT8 has an activation without a range.
    """
    model = variant_model(onnx.load(str(fp32_path)), amax, plan, Path(fp32_path).name)
    write_bytes_atomic(out_path, model.SerializeToString())
    return out_path


def variant_model(source: onnx.ModelProto, amax: dict[str, float], plan: PrecisionPlan,
                  label: str = "the model") -> onnx.ModelProto:
    """The variant of an in-memory FP32 model (``source`` is not modified); for many variants of one model."""
    import onnx_graphsurgeon as gs

    unknown = plan.unknown_nodes(source)
    if unknown:
        raise WorkbenchError(f"plan {plan.name!r} names {len(unknown)} node(s) that {label} does not have "
                             f"(e.g. {unknown[0]!r}): a plan must name this model's MatMul/Gemm/Conv nodes; use "
                             "one written by python -m workbench search for this model, or fix the names "
                             "(workbench.quantize.quantizable_nodes lists them)")
    graph = gs.import_onnx(source)
    tensors = graph.tensors()
    int8_acts: dict[str, list] = {}
    int8_weights: list[tuple] = []
    fp16_nodes = []
    missing = []
    for node in graph.nodes:
        if node.op not in QUANTIZABLE_OPS:
            continue
        precision = plan.precision_of(node.name)
        if precision == "fp16":
            fp16_nodes.append(node)
        elif precision == "int8":
            for slot, tensor in enumerate(node.inputs[:2]):
                if isinstance(tensor, gs.Constant):
                    int8_weights.append((node, slot, tensor))
                elif tensor.name in amax:
                    int8_acts.setdefault(tensor.name, []).append((node, slot))
                else:
                    missing.append(tensor.name)
    if missing:
        raise WorkbenchError(f"the calibration cache has no range for {len(missing)} tensors the plan puts in "
                             f"INT8 (e.g. {missing[0]}); it was made for another model — recalibrate")
    # ---- single insertion pass
    for name, uses in int8_acts.items():
        scale = np.float32(max(amax[name], 1e-8) / 127.0)
        src = tensors[name]
        q_out = gs.Variable(f"{name}_quantized", dtype=np.int8)
        dq_out = gs.Variable(f"{name}_dequantized", dtype=np.float32)
        s = gs.Constant(f"{name}_scale", np.array(scale, dtype=np.float32))
        z = gs.Constant(f"{name}_zero_point", np.array(0, dtype=np.int8))
        graph.nodes.append(gs.Node("QuantizeLinear", f"{name}_QuantizeLinear", inputs=[src, s, z], outputs=[q_out]))
        graph.nodes.append(gs.Node("DequantizeLinear", f"{name}_DequantizeLinear", inputs=[q_out, s, z], outputs=[dq_out]))
        for node, slot in uses:
            node.inputs[slot] = dq_out
    for node, slot, weight in int8_weights:
        values = weight.values.astype(np.float32)
        axis = weight_channel_axis(node.op, slot, values.ndim, node.attrs)
        reduce_axes = tuple(a for a in range(values.ndim) if a != axis)
        ch_amax = np.maximum(np.abs(values).max(axis=reduce_axes), 1e-8)
        scales = (ch_amax / 127.0).astype(np.float32)
        shape = [1] * values.ndim
        shape[axis] = -1
        q = np.clip(np.round(values / scales.reshape(shape)), -127, 127).astype(np.int8)
        base = f"{node.name}_w{slot}"
        qw = gs.Constant(f"{base}_int8", q)
        s = gs.Constant(f"{base}_scale", scales)
        z = gs.Constant(f"{base}_zero_point", np.zeros(len(scales), dtype=np.int8))
        dq_out = gs.Variable(f"{base}_dequantized", dtype=np.float32)
        graph.nodes.append(gs.Node("DequantizeLinear", f"{base}_DequantizeLinear", inputs=[qw, s, z],
                                   outputs=[dq_out], attrs={"axis": axis}))
        node.inputs[slot] = dq_out
    for node in fp16_nodes:
        for slot, tensor in enumerate(list(node.inputs)):
            if isinstance(tensor, gs.Constant) and tensor.values.dtype == np.float32:
                node.inputs[slot] = gs.Constant(f"{tensor.name}_fp16_{node.name}", tensor.values.astype(np.float16))
            elif not isinstance(tensor, gs.Constant):
                cast_out = gs.Variable(f"{tensor.name}_to_fp16_{node.name}", dtype=np.float16)
                graph.nodes.append(gs.Node("Cast", f"{node.name}_cast_in{slot}", inputs=[tensor],
                                           outputs=[cast_out], attrs={"to": onnx.TensorProto.FLOAT16}))
                node.inputs[slot] = cast_out
        out = node.outputs[0]
        half = gs.Variable(f"{out.name}_fp16", dtype=np.float16)
        node.outputs[0] = half
        graph.nodes.append(gs.Node("Cast", f"{node.name}_cast_out", inputs=[half], outputs=[out],
                                   attrs={"to": onnx.TensorProto.FLOAT}))
    graph.cleanup().toposort()
    model = gs.export_onnx(graph)
    model.opset_import[0].version = max(model.opset_import[0].version, 17)
    _copy_metadata(source, model)  # the model description travels with every variant
    return model


def _copy_metadata(source: onnx.ModelProto, target: onnx.ModelProto) -> None:
    """Keep the source's ``metadata_props`` (the workbench writes the model description there) on a variant."""
    present = {p.key for p in target.metadata_props}
    for prop in source.metadata_props:
        if prop.key not in present:
            new = target.metadata_props.add()
            new.key, new.value = prop.key, prop.value

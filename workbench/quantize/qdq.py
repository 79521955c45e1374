"""Write a precision variant: Q/DQ pairs (onnx-graphsurgeon) for int8 nodes, float types for the rest.

int8 node: every float activation input gets QuantizeLinear/DequantizeLinear with the calibrated
per-tensor symmetric scale (zero point 0); a weight initializer gets per-output-channel symmetric Q/DQ.
Every node then computes in the float type its placement gives (``PrecisionPlan.placements``): FP16 by
default (the whole graph for the FP16 plan, the graph between the Q/DQ islands for INT8 and mixed plans),
FP32 where the plan or the FP16 guard keeps it. ``float_types.assign_float_types`` stores each tensor in
the type of the node that writes it and puts one Cast where an FP16 region meets an FP32 one; model IO
stays float32 (one Cast in, one out).

Q/DQ in FP16: a DequantizeLinear outputs the type of its scale. At opset 13 (what an opset-17 export uses)
that is float32 only; from opset 19 the scale (and so the output) may be float16. A variant with FP16
Q/DQ is therefore converted to opset 19 (``QDQ_FP16_OPSET``: the lowest opset where ONNX allows it; 21
adds blocked/INT4 quantization this workbench does not use). TensorRT's parser takes FP16 scales and
gives HALF DequantizeLinear outputs (checked with TensorRT-RTX 1.7). Weight scales are rounded up to
float16, and the weights quantized against the rounded scale, so no weight clips. A plan whose float side
is FP32 (``rest="fp32"``, e.g. the ORT-CPU flavour) keeps the source opset and float32 scales.
Marking comes first; all insertions happen in one pass at the end. The source's metadata (the model
description) is copied onto the variant.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from workbench.artifacts import write_bytes_atomic
from workbench.errors import WorkbenchError
from workbench.quantize.float_types import DTYPES, assign_float_types
from workbench.quantize.plan import QUANTIZABLE_OPS, Placement, PrecisionPlan, tensor_types

QDQ_FP16_OPSET = 19
FP16_TINY = np.float16(2.0**-24)  # smallest positive float16 (subnormal)


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


def scales_in(amax: np.ndarray | np.floating, dtype: np.dtype) -> np.ndarray:
    """Symmetric INT8 scales amax / 127 stored in ``dtype``, never below amax / 127 (float16: rounded up)."""
    exact = np.maximum(np.asarray(amax, np.float32), 1e-8) / np.float32(127.0)
    if dtype == np.float32:
        return np.asarray(exact, np.float32)
    stored = np.maximum(exact.astype(np.float16), FP16_TINY)
    low = stored.astype(np.float32) < exact
    return np.asarray(np.where(low, np.nextafter(stored, np.float16(np.inf)), stored), np.float16)


def opset_of(model: onnx.ModelProto) -> int:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)


def with_opset(model: onnx.ModelProto, version: int) -> onnx.ModelProto:
    """``model`` at opset ``version`` or later (ONNX's version converter; the same graph when already there)."""
    if opset_of(model) >= version:
        return model
    from onnx import version_converter

    try:
        return _copy_metadata(model, version_converter.convert_version(model, version))
    except Exception as exc:  # the converter raises bare RuntimeErrors for ops it cannot adapt
        raise WorkbenchError(
            f"cannot convert the model to opset {version} for FP16 Q/DQ ({exc}); give a plan "
            '"rest": "fp32" (FP32 between the Q/DQ islands) or export at opset >= '
            f"{version}"
        ) from exc


def build_variant(
    fp32_path: Path, amax: dict[str, float], plan: PrecisionPlan, out_path: Path, with_plan: bool = False
) -> Path:
    """Write the variant of ``fp32_path`` that ``plan`` describes; ``amax`` holds activation ranges. With
    ``with_plan`` the plan goes beside it (``<variant>.plan.json``: every node's precision, FP32 reasons).

    Raises WorkbenchError when a node the plan puts in INT8 has an activation without a range.
    """
    source = onnx.load(str(fp32_path))
    model = variant_model(source, amax, plan, Path(fp32_path).name)
    write_bytes_atomic(out_path, model.SerializeToString())
    if with_plan:
        plan.save(plan_path(out_path), source)
    return out_path


def plan_path(variant: Path) -> Path:
    """Where ``build_variant(..., with_plan=True)`` puts a variant's plan."""
    return Path(variant).with_suffix(".plan.json")


def variant_model(
    source: onnx.ModelProto, amax: dict[str, float], plan: PrecisionPlan, label: str = "the model"
) -> onnx.ModelProto:
    """The variant of an in-memory FP32 model (``source`` is not modified); for many variants of one model.

    Steps: check the plan's node names, add the FP16 guard, place every node (converting to the FP16 Q/DQ
    opset when needed), mark the INT8 sites, insert activation Q/DQ and weight DQ in one pass, then assign
    float types and finish the model (opset, metadata, shapes)."""
    import onnx_graphsurgeon as gs

    from workbench.quantize.guard import constant_guard

    _check_plan_nodes(source, plan, label)
    if plan.is_fp32:
        out = onnx.ModelProto()
        out.CopyFrom(source)
        return out
    plan = plan.with_guard(constant_guard(source))
    types = tensor_types(source)
    placements = plan.placements(source, types)
    if any(p.precision == "int8" and p.compute_type == "fp16" for p in placements):
        source = with_opset(source, QDQ_FP16_OPSET)
        types = tensor_types(source)
    compute_types = {p.node: p.compute_type for p in placements if p.compute_type}
    graph = gs.import_onnx(source)
    sites = _int8_sites(graph, placements, amax)
    _insert_activation_qdq(graph, sites.activations, amax, compute_types)
    _insert_weight_dq(graph, sites.weights, compute_types)
    assign_float_types(graph, compute_types, types)
    return _finished_model(source, gs.export_onnx(graph))


def _check_plan_nodes(source: onnx.ModelProto, plan: PrecisionPlan, label: str) -> None:
    """Refuse a plan that names nodes ``source`` does not have."""
    unknown = plan.unknown_nodes(source)
    if unknown:
        raise WorkbenchError(
            f"plan {plan.name!r} names {len(unknown)} node(s) that {label} does not have "
            f"(e.g. {unknown[0]!r}): a plan must name this model's MatMul/Gemm/Conv nodes (and "
            "keep_fp32 any of its nodes); use one written by python -m workbench search for this "
            "model, or fix the names (workbench.quantize.quantizable_nodes lists them)"
        )


@dataclass
class _Int8Sites:
    """What the plan puts in INT8: activations by (tensor, float side) with the (node, input slot) reading
    them, and weight constants as (node, input slot, constant, float side)."""

    activations: dict[tuple[str, str], list[tuple[Any, int]]] = field(default_factory=dict)
    weights: list[tuple[Any, int, Any, str]] = field(default_factory=list)


def _int8_sites(graph: Any, placements: list[Placement], amax: dict[str, float]) -> _Int8Sites:
    """Mark the inputs of every INT8 node (nothing inserted yet); an activation without a range is refused."""
    import onnx_graphsurgeon as gs

    sites = _Int8Sites()
    missing = []
    by_name = {p.node: p for p in placements}
    for node in graph.nodes:
        place = by_name.get(node.name)
        if node.op not in QUANTIZABLE_OPS or place is None or place.precision != "int8":
            continue
        ctype = place.compute_type or "fp32"  # an INT8 placement always names its float side
        for slot, tensor in enumerate(node.inputs[:2]):
            if isinstance(tensor, gs.Constant):
                sites.weights.append((node, slot, tensor, ctype))
            elif tensor.name in amax:
                sites.activations.setdefault((tensor.name, ctype), []).append((node, slot))
            else:
                missing.append(tensor.name)
    if missing:
        raise WorkbenchError(
            f"the calibration cache has no range for {len(missing)} tensors the plan puts in "
            f"INT8 (e.g. {missing[0]}); it was made for another model — recalibrate"
        )
    return sites


def _insert_activation_qdq(
    graph: Any,
    activations: dict[tuple[str, str], list[tuple[Any, int]]],
    amax: dict[str, float],
    compute_types: dict[str, str],
) -> None:
    """One QuantizeLinear/DequantizeLinear pair per (activation, float side), per-tensor symmetric scale."""
    import onnx_graphsurgeon as gs

    tensors = graph.tensors()
    for (name, ctype), uses in activations.items():
        dtype = DTYPES[ctype]
        base = name if (name, "fp32" if ctype == "fp16" else "fp16") not in activations else f"{name}_{ctype}"
        src = tensors[name]
        q_out = gs.Variable(f"{base}_quantized", dtype=np.int8)
        dq_out = gs.Variable(f"{base}_dequantized", dtype=dtype)
        s = gs.Constant(f"{base}_scale", scales_in(np.float32(amax[name]), dtype).reshape(()))
        z = gs.Constant(f"{base}_zero_point", np.array(0, dtype=np.int8))
        graph.nodes.append(
            gs.Node("QuantizeLinear", f"{base}_QuantizeLinear", inputs=[src, s, z], outputs=[q_out])
        )
        graph.nodes.append(
            gs.Node("DequantizeLinear", f"{base}_DequantizeLinear", inputs=[q_out, s, z], outputs=[dq_out])
        )
        compute_types[f"{base}_QuantizeLinear"] = compute_types[f"{base}_DequantizeLinear"] = ctype
        for node, slot in uses:
            node.inputs[slot] = dq_out


def _insert_weight_dq(
    graph: Any, weights: list[tuple[Any, int, Any, str]], compute_types: dict[str, str]
) -> None:
    """Each INT8 weight stored as int8 with per-output-channel symmetric scales, read through one DQ."""
    import onnx_graphsurgeon as gs

    for node, slot, weight, ctype in weights:
        dtype = DTYPES[ctype]
        values = weight.values.astype(np.float32)
        axis = weight_channel_axis(node.op, slot, values.ndim, node.attrs)
        reduce_axes = tuple(a for a in range(values.ndim) if a != axis)
        scales = scales_in(np.abs(values).max(axis=reduce_axes), dtype)
        shape = [1] * values.ndim
        shape[axis] = -1
        q = np.clip(np.round(values / scales.astype(np.float32).reshape(shape)), -127, 127).astype(np.int8)
        base = f"{node.name}_w{slot}"
        qw = gs.Constant(f"{base}_int8", q)
        s = gs.Constant(f"{base}_scale", scales)
        z = gs.Constant(f"{base}_zero_point", np.zeros(len(scales), dtype=np.int8))
        dq_out = gs.Variable(f"{base}_dequantized", dtype=dtype)
        graph.nodes.append(
            gs.Node(
                "DequantizeLinear",
                f"{base}_DequantizeLinear",
                inputs=[qw, s, z],
                outputs=[dq_out],
                attrs={"axis": axis},
            )
        )
        compute_types[f"{base}_DequantizeLinear"] = ctype
        node.inputs[slot] = dq_out


def _finished_model(source: onnx.ModelProto, model: onnx.ModelProto) -> onnx.ModelProto:
    """The exported variant at opset 17 or later, with the source's metadata and freshly inferred shapes."""
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx"):
            entry.version = max(entry.version, 17)
    _copy_metadata(source, model)  # the model description travels with every variant
    # the stale types go; shapes and types inferred again (with data propagation) are kept: ONNX Runtime folds
    # the shape arithmetic and fuses SkipLayerNormalization only with them (FP16 demo model: 395 nodes after
    # its optimizer instead of 487)
    del model.graph.value_info[:]
    try:
        return onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception:
        return model


def _copy_metadata(source: onnx.ModelProto, target: onnx.ModelProto) -> onnx.ModelProto:
    """Keep the source's ``metadata_props`` (the workbench writes the model description there) on ``target``
    (a variant, or the source converted to another opset); returns ``target``."""
    present = {p.key for p in target.metadata_props}
    for prop in source.metadata_props:
        if prop.key not in present:
            new = target.metadata_props.add()
            new.key, new.value = prop.key, prop.value
    return target

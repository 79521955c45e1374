"""ONNX Runtime CPU flavour of a Q/DQ variant: the same arithmetic, laid out so ORT's CPU kernels fuse it.

``build_variant`` writes the TensorRT-bound graph (symmetric INT8 Q/DQ on the inputs of MatMul/Gemm/Conv,
one DequantizeLinear per activation shared by its consumers, per-channel weight DQ). ONNX Runtime's CPU
execution provider runs that graph slower than it could (measured on Wav2Vec2-base, see
benchmarks/inference.py and the issue-9 notes):

- a DQ whose output feeds several nodes is not fused (ORT's QDQ selectors want one consumer per DQ), so
  the q/k/v projections, which share their input, stay float MatMuls with a DequantizeLinear of their
  weights on every run;
- ``DQ -> Conv`` without a QuantizeLinear on the output has no integer kernel (QLinearConv needs a
  quantized output, ConvInteger is several times slower than the float Conv), so the feature encoder,
  about 40 % of the time, runs in float with its weights dequantized on every run;
- x86 integer GEMMs in MLAS are U8S8; ORT rewrites S8 activations to U8 only for a plain Q -> DQ pair.

``cpu_flavour`` rewrites the graph without changing what it computes (up to float rounding order):

1. activation Q/DQ pairs become uint8 with zero point ``zp + 128`` (same rounding and clipping range);
2. a 1-D Conv (group 1, no padding, no dilation) whose input and weight are quantized becomes an im2col in
   the uint8 domain (Transpose, strided Slices, Concat) and a DQ -> MatMul, which ORT fuses into
   MatMulIntegerToFloat; a Transpose restores the [batch, channels, frames] layout;
3. every shared activation DQ is duplicated so each consumer has its own (ORT's "dedicated QDQ pair");
4. a constant weight DQ that still feeds a float Conv (grouped or padded convolutions) is folded into a
   float initializer holding exactly the dequantized values;
5. with ``weights="u8"`` (the default) the remaining int8 weights are stored as uint8 with zero point
   ``zp + 128``: the same values, so ORT picks its U8U8 GEMMs. Its U8S8 GEMMs (int8 weights) are faster on
   x86 CPUs with VNNI but *saturate* on x86 CPUs without it (``workbench.backends.cpu_int8``): ``s8`` is
   only right for a file that runs on a VNNI (or non-x86) CPU. The weight type and why are written into
   the model's metadata (``METADATA_WEIGHTS``, ``METADATA_REASON``) and the rewrite counts.

The TensorRT-bound graph is not touched: this is a separate, explicit step (``build_cpu_variant``), made
from the plan with FP32 between the Q/DQ islands (``rest="fp32"``): the CPU has no fast FP16 arithmetic, and
ONNX Runtime's integer kernels take float32 scales. A calibration made with accuracy recovery gives it the same
recovered source as the TensorRT-bound variant (``cpu_source``: the smoothed graph its ranges belong to, bias
correction for the plan's INT8 nodes).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from workbench.artifacts import write_bytes_atomic
from workbench.quantize.metadata import set_metadata
from workbench.quantize.plan import PrecisionPlan
from workbench.quantize.recovered import RecoveredSource

INT64_MAX = np.iinfo(np.int64).max
# An integer GEMM needs a deep enough reduction (in_channels * kernel) to beat the float Conv: Wav2Vec2's
# first conv (1 channel, kernel 10) ran 2.4x slower as im2col + MatMulIntegerToFloat than as a float Conv.
MIN_REDUCTION = 64
WEIGHT_TYPES: tuple[str, ...] = ("u8", "s8")
METADATA_WEIGHTS = "workbench.ort_cpu.weights"
METADATA_REASON = "workbench.ort_cpu.weights_reason"


class _Graph:
    """Index of one ONNX graph: initializers, producers, consumers; helpers to add initializers."""

    def __init__(self, model: onnx.ModelProto) -> None:
        self.model = model
        self.graph = model.graph
        self.inits = {i.name: i for i in self.graph.initializer}
        self._names: set[str] = (
            set(self.inits)
            | {o for n in self.graph.node for o in n.output}
            | {i.name for i in self.graph.input}
        )
        self.reindex()

    def reindex(self) -> None:
        self.producer = {o: n for n in self.graph.node for o in n.output}
        self.consumers: dict[str, list[onnx.NodeProto]] = defaultdict(list)
        for node in self.graph.node:
            for name in node.input:
                if name:
                    self.consumers[name].append(node)
        self.outputs = {o.name for o in self.graph.output}

    def set_nodes(self, nodes: list[onnx.NodeProto]) -> None:
        """Replace the graph's node list (in this order) and rebuild the index."""
        del self.graph.node[:]
        self.graph.node.extend(nodes)
        self.reindex()

    def unique(self, base: str) -> str:
        name, i = base, 1
        while name in self._names:
            name, i = f"{base}_{i}", i + 1
        self._names.add(name)
        return name

    def const(self, base: str, value: np.ndarray) -> str:
        name = self.unique(base)
        tensor = numpy_helper.from_array(np.asarray(value), name)
        self.graph.initializer.append(tensor)
        self.inits[name] = tensor
        return name

    def array(self, name: str) -> np.ndarray | None:
        return numpy_helper.to_array(self.inits[name]) if name in self.inits else None

    def constant(self, name: str) -> np.ndarray:
        """The values of initializer ``name`` (the caller has checked it is one)."""
        return numpy_helper.to_array(self.inits[name])


def _attr(node: onnx.NodeProto, name: str, default=None):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _is_weight_dq(g: _Graph, node: onnx.NodeProto | None) -> bool:
    return node is not None and node.op_type == "DequantizeLinear" and node.input[0] in g.inits


def _activation_dq(g: _Graph, node: onnx.NodeProto | None) -> bool:
    """DQ of a tensor made by a QuantizeLinear (not a constant)."""
    return (
        node is not None
        and node.op_type == "DequantizeLinear"
        and node.input[0] not in g.inits
        and node.input[0] in g.producer
        and g.producer[node.input[0]].op_type == "QuantizeLinear"
    )


# ---------------------------------------------------------------- 1. uint8 activations
def _activations_to_uint8(g: _Graph) -> int:
    """Int8 activation Q -> DQ pairs become uint8 with zero point + 128; returns how many Q nodes changed."""
    changed = 0
    for q in list(g.graph.node):
        if q.op_type != "QuantizeLinear" or q.input[0] in g.inits or len(q.input) < 3:
            continue
        zp = g.array(q.input[2])
        if zp is None or zp.dtype != np.int8 or zp.size != 1:
            continue
        users = g.consumers.get(q.output[0], [])
        if not users or any(u.op_type != "DequantizeLinear" for u in users) or q.output[0] in g.outputs:
            continue
        new_zp = g.const(f"{q.input[2]}_u8", (zp.astype(np.int16) + 128).astype(np.uint8).reshape(zp.shape))
        q.input[2] = new_zp
        for dq in users:
            while len(dq.input) < 3:
                dq.input.append("")
            dq.input[2] = new_zp
        for info in g.graph.value_info:
            if info.name == q.output[0]:
                info.type.tensor_type.elem_type = TensorProto.UINT8
        changed += 1
    g.reindex()
    return changed


# ---------------------------------------------------------------- 2. quantized Conv1d -> im2col + MatMul
def _convertible_conv(g: _Graph, conv: onnx.NodeProto) -> bool:
    if conv.op_type != "Conv" or len(conv.input) < 2:
        return False
    x_dq, w_dq = g.producer.get(conv.input[0]), g.producer.get(conv.input[1])
    if x_dq is None or w_dq is None or not (_activation_dq(g, x_dq) and _is_weight_dq(g, w_dq)):
        return False
    weight = g.array(w_dq.input[0])
    if weight is None or weight.ndim != 3 or weight.dtype != np.int8:
        return False
    _out_ch, in_ch, kernel = weight.shape
    if in_ch * kernel < MIN_REDUCTION:
        return False
    scale = g.array(w_dq.input[1])
    if scale is None or (scale.size > 1 and _attr(w_dq, "axis", 1) != 0):
        return False
    if len(w_dq.input) > 2 and w_dq.input[2] and np.any(g.array(w_dq.input[2]) != 0):
        return False
    if _attr(conv, "group", 1) != 1 or _attr(conv, "auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        return False
    if any(_attr(conv, "pads", [0])) or any(d != 1 for d in _attr(conv, "dilations", [1])):
        return False
    return not (len(conv.input) > 2 and conv.input[2] and conv.input[2] not in g.inits)


def _conv_to_matmul(g: _Graph, conv: onnx.NodeProto) -> list[onnx.NodeProto]:
    """Nodes computing ``conv`` as uint8 im2col + DQ -> MatMul; ``conv``'s output name is kept."""
    x_dq, w_dq = g.producer[conv.input[0]], g.producer[conv.input[1]]
    weight = g.constant(w_dq.input[0])
    out_ch, in_ch, kernel = weight.shape
    stride = int(_attr(conv, "strides", [1])[0])
    base = conv.name or conv.output[0]
    # column index k * in_ch + c, output channel last: [K * Cin, Cout]
    w2 = np.ascontiguousarray(np.transpose(weight, (2, 1, 0)).reshape(kernel * in_ch, out_ch))
    w_scale = g.constant(w_dq.input[1]).astype(np.float32).reshape(-1)
    w_scale = np.broadcast_to(w_scale, (out_ch,)).copy()
    nodes: list[onnx.NodeProto] = []
    xt = g.unique(f"{base}_im2col_frames")
    nodes.append(
        helper.make_node(
            "Transpose", [x_dq.input[0]], [xt], name=g.unique(f"{base}_im2col_transpose"), perm=[0, 2, 1]
        )
    )
    axes, steps = (
        g.const(f"{base}_im2col_axes", np.array([1], np.int64)),
        g.const(f"{base}_im2col_steps", np.array([stride], np.int64)),
    )
    taps = []
    for k in range(kernel):
        end = INT64_MAX if k == kernel - 1 else -(kernel - 1 - k)
        tap = g.unique(f"{base}_im2col_tap{k}")
        nodes.append(
            helper.make_node(
                "Slice",
                [
                    xt,
                    g.const(f"{base}_im2col_start{k}", np.array([k], np.int64)),
                    g.const(f"{base}_im2col_end{k}", np.array([end], np.int64)),
                    axes,
                    steps,
                ],
                [tap],
                name=g.unique(f"{base}_im2col_slice{k}"),
            )
        )
        taps.append(tap)
    cols = g.unique(f"{base}_im2col_columns")
    nodes.append(helper.make_node("Concat", taps, [cols], name=g.unique(f"{base}_im2col_concat"), axis=2))
    cols_dq = g.unique(f"{base}_im2col_dequantized")
    nodes.append(
        helper.make_node(
            "DequantizeLinear",
            [cols, *x_dq.input[1:]],
            [cols_dq],
            name=g.unique(f"{base}_im2col_DequantizeLinear"),
        )
    )
    w_deq = g.unique(f"{base}_w_matmul_dequantized")
    nodes.append(
        helper.make_node(
            "DequantizeLinear",
            [
                g.const(f"{base}_w_matmul_int8", w2),
                g.const(f"{base}_w_matmul_scale", w_scale),
                g.const(f"{base}_w_matmul_zero_point", np.zeros(out_ch, np.int8)),
            ],
            [w_deq],
            name=g.unique(f"{base}_w_matmul_DequantizeLinear"),
            axis=1,
        )
    )
    mm = g.unique(f"{base}_matmul_output")
    nodes.append(helper.make_node("MatMul", [cols_dq, w_deq], [mm], name=g.unique(f"{base}_as_MatMul")))
    if len(conv.input) > 2 and conv.input[2]:
        biased = g.unique(f"{base}_matmul_biased")
        nodes.append(
            helper.make_node("Add", [mm, conv.input[2]], [biased], name=g.unique(f"{base}_bias_Add"))
        )
        mm = biased
    nodes.append(
        helper.make_node(
            "Transpose", [mm], [conv.output[0]], name=g.unique(f"{base}_output_transpose"), perm=[0, 2, 1]
        )
    )
    return nodes


def _convs_to_matmul(g: _Graph) -> int:
    replaced = 0
    new_nodes: list[onnx.NodeProto] = []
    for node in g.graph.node:
        if _convertible_conv(g, node):
            new_nodes.extend(_conv_to_matmul(g, node))
            replaced += 1
        else:
            new_nodes.append(node)
    g.set_nodes(new_nodes)
    return replaced


# ---------------------------------------------------------------- 3. one DQ per consumer
def _dedicate_dq(g: _Graph) -> int:
    added = 0
    new_nodes: list[onnx.NodeProto] = []
    for node in g.graph.node:
        new_nodes.append(node)
        if node.op_type != "DequantizeLinear" or node.output[0] in g.outputs:
            continue
        users = g.consumers.get(node.output[0], [])
        for user in users[1:]:
            copy = onnx.NodeProto()
            copy.CopyFrom(node)
            copy.name = g.unique(f"{node.name}_for_{user.name}")
            copy.output[0] = g.unique(f"{node.output[0]}_for_{user.name}")
            for i, name in enumerate(user.input):
                if name == node.output[0]:
                    user.input[i] = copy.output[0]
            new_nodes.append(copy)
            added += 1
    g.set_nodes(new_nodes)
    return added


# ---------------------------------------------------------------- 4. fold weight DQ of float Convs
def _fold_conv_weight_dq(g: _Graph) -> int:
    folded = 0
    drop: set[int] = set()
    done: dict[tuple, str] = {}  # copies of one weight DQ (dedicated per consumer) share one float tensor
    for node in g.graph.node:
        if node.op_type != "Conv":
            continue
        dq = g.producer.get(node.input[1])
        if (
            dq is None
            or not _is_weight_dq(g, dq)
            or len(g.consumers[dq.output[0]]) != 1
            or dq.output[0] in g.outputs
        ):
            continue
        key = (*dq.input, _attr(dq, "axis", 1))
        if key in done:
            node.input[1] = done[key]
            drop.add(id(dq))
            folded += 1
            continue
        q = g.constant(dq.input[0]).astype(np.float32)
        scale = g.constant(dq.input[1]).astype(np.float32)
        zp = (
            g.constant(dq.input[2]).astype(np.float32) if len(dq.input) > 2 and dq.input[2] else np.float32(0)
        )
        if scale.size > 1:
            shape = [1] * q.ndim
            shape[_attr(dq, "axis", 1) % q.ndim] = -1
            scale, zp = scale.reshape(shape), np.broadcast_to(zp, scale.shape).reshape(shape)
        node.input[1] = done[key] = g.const(f"{dq.input[0]}_folded", ((q - zp) * scale).astype(np.float32))
        drop.add(id(dq))
        folded += 1
    g.set_nodes([n for n in g.graph.node if id(n) not in drop])
    return folded


# ---------------------------------------------------------------- 5. uint8 weights (U8U8 GEMMs)
def _weights_to_uint8(g: _Graph) -> int:
    """Constant int8 weights of the remaining DQs become uint8 with zero point + 128; returns how many DQs."""
    renamed: dict[str, str] = {}

    def shifted(name: str, base: str, shape: tuple[int, ...] | None = None) -> str:
        if name not in renamed:
            value = g.constant(name) if name else np.zeros(shape if shape is not None else (), np.int8)
            renamed[name] = g.const(f"{name or base}_u8", (value.astype(np.int16) + 128).astype(np.uint8))
        return renamed[name]

    changed = 0
    for dq in g.graph.node:
        if not _is_weight_dq(g, dq) or g.inits[dq.input[0]].data_type != TensorProto.INT8:
            continue
        zp = dq.input[2] if len(dq.input) > 2 else ""
        if zp and g.inits.get(zp) is None:
            continue  # a zero point computed at run time: leave it
        scale_shape = g.constant(dq.input[1]).shape
        dq.input[0] = shifted(dq.input[0], dq.name)
        while len(dq.input) < 3:
            dq.input.append("")
        dq.input[2] = (
            shifted(zp, f"{dq.input[0]}_zero_point", scale_shape)
            if zp
            else g.const(f"{dq.input[0]}_zero_point", np.full(scale_shape, 128, np.uint8))
        )
        changed += 1
    g.reindex()
    return changed


def _drop_unused(g: _Graph) -> None:
    """Remove nodes whose outputs nobody reads and initializers nobody uses (after the rewrites)."""
    g.reindex()
    while True:
        dead = {
            id(n)
            for n in g.graph.node
            if all(not o or (o not in g.consumers and o not in g.outputs) for o in n.output)
        }
        if not dead:
            break
        g.set_nodes([n for n in g.graph.node if id(n) not in dead])
    used = {name for n in g.graph.node for name in n.input} | g.outputs
    kept_inits = [i for i in g.graph.initializer if i.name in used]
    del g.graph.initializer[:]
    g.graph.initializer.extend(kept_inits)
    g.inits = {i.name: i for i in g.graph.initializer}


def cpu_flavour(
    model: onnx.ModelProto, weights: str = "u8", reason: str = ""
) -> tuple[onnx.ModelProto, dict[str, int | str]]:
    """The ORT-CPU flavour of a Q/DQ variant (``model`` is not modified) and counts of each rewrite.

    ``weights``: "u8" (uint8 weights, exact with ORT on every CPU) or "s8" (int8 weights: faster on x86 CPUs
    with VNNI, saturating on x86 CPUs without; ``workbench.backends.cpu_int8.int8_weight_type`` chooses);
    ``reason`` (why this type) is stored with it in the model's metadata.
    """
    if weights not in WEIGHT_TYPES:
        raise ValueError(f"weights must be one of {WEIGHT_TYPES}, got {weights!r}")
    out = onnx.ModelProto()
    out.CopyFrom(model)
    g = _Graph(out)
    stats: dict[str, int | str] = {
        "uint8_activations": _activations_to_uint8(g),
        "conv_as_matmul": _convs_to_matmul(g),
    }
    stats["dedicated_dq"] = _dedicate_dq(g)
    stats["folded_conv_weights"] = _fold_conv_weight_dq(g)
    _drop_unused(g)
    stats["uint8_weights"] = _weights_to_uint8(g) if weights == "u8" else 0
    stats["weights"] = weights
    _drop_unused(g)
    set_metadata(out, {METADATA_WEIGHTS: weights, METADATA_REASON: reason})
    onnx.checker.check_model(out)
    return out, stats


def build_cpu_variant(
    fp32_path: Path,
    amax: dict[str, float],
    plan: PrecisionPlan,
    out_path: Path,
    trt_path: Path | None = None,
    weights: str = "u8",
    reason: str = "",
    metadata: dict[str, str] | None = None,
    recovered: RecoveredSource | None = None,
) -> Path:
    """``build_variant`` of ``plan`` with FP32 between the islands (written to ``trt_path`` when given), then
    ``cpu_flavour``; ``metadata`` entries are added to the written model's (provenance). ``recovered``: the
    recovered source of the calibration ``amax`` comes from (``cpu_source``; None: the export ``fp32_path``)."""
    import tempfile

    from workbench.quantize.qdq import build_variant

    plan = replace(plan, rest="fp32")
    source = cpu_source(onnx.load(str(fp32_path)), plan, recovered) if recovered is not None else fp32_path
    if trt_path is None:
        with tempfile.TemporaryDirectory(prefix="cpu-variant-") as tmp:
            model = onnx.load(str(build_variant(source, amax, plan, Path(tmp) / "trt.onnx")))
    else:
        model = onnx.load(str(build_variant(source, amax, plan, trt_path)))
    flavoured, _ = cpu_flavour(model, weights, reason)
    set_metadata(flavoured, metadata or {})
    write_bytes_atomic(out_path, flavoured.SerializeToString())
    return out_path


def cpu_source(export: onnx.ModelProto, plan: PrecisionPlan, recovered: RecoveredSource) -> onnx.ModelProto:
    """The FP32 graph the CPU flavour of ``plan`` is built from: the recovered source (the smoothed graph, else
    ``export``) with bias correction for the plan's INT8 nodes when it is on, corrected for the weight scales the
    flavour stores (float32: FP32 between the islands), as the TensorRT-bound variant is for its own."""
    graph, _ = recovered.for_plan(replace(plan, rest="fp32"), recovered.source(export))
    return graph

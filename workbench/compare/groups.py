"""Layer groups: which MatMul/Gemm/Conv nodes are quantized together in the sensitivity ranking and search.

Granularity ``group`` (default) follows the structure of the supported architectures:

- every architecture: each feature-encoder conv layer, the feature projection, the LM (CTC) head;
- transformer layers (Wav2Vec2, HuBERT, WavLM, Data2VecAudio): the q/k/v projections, the two
  activation-by-activation attention MatMuls (QKᵀ, A·V) as ``scores``, the output projection, the
  feed-forward block; the positional conv embedding (Data2VecAudio's five conv layers together);
- WavLM: the gate of its gated relative position bias (``gru_rel_pos_linear``) as ``rel_pos_bias``; its
  attention runs through one fused call, so q/k/v, scores and output projection are told apart by their
  inputs (a weight or two activations) and op (the output projection is the Gemm);
- conformer layers (Wav2Vec2-Conformer): the two half-step feed-forward blocks ``ffn1``/``ffn2``, the q/k/v
  projections, the relative position projection ``linear_pos`` as ``pos_proj``, the attention MatMuls
  (with the position term) as ``scores``, the output projection, and the convolution module
  (pointwise, depthwise, pointwise) as ``conv_module``.

Nodes of any other module form a group named after that module. Granularity ``node`` puts every
node in its own group.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import onnx

from workbench.errors import WorkbenchError
from workbench.model.export import module_of
from workbench.quantize.plan import QUANTIZABLE_OPS, PrecisionPlan

GRANULARITIES = ("group", "node")
_LAYER = r"encoder\.layers\.\d+"
_ATTENTION = rf"{_LAYER}\.(?:attention|self_attn)"

_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^(feature_extractor\.conv_layers\.\d+)(\..*)?$"), r"\1"),
    (re.compile(rf"^({_ATTENTION})\.(?:[qkv]_proj|linear_[qkv])$"), r"\1.qkv_proj"),
    (re.compile(rf"^({_ATTENTION})\.(?:out_proj|linear_out)$"), r"\1.out_proj"),
    (re.compile(rf"^({_ATTENTION})\.linear_pos$"), r"\1.pos_proj"),
    (re.compile(rf"^({_ATTENTION})\.gru_rel_pos_linear$"), r"\1.rel_pos_bias"),
    (re.compile(rf"^({_LAYER}\.(?:feed_forward|ffn1|ffn2|conv_module))(\..*)?$"), r"\1"),
    (re.compile(r"^(feature_projection)(\..*)?$"), r"\1"),
    (re.compile(r"^(encoder\.pos_conv_embed)(\..*)?$"), r"\1"),
    (re.compile(r"^(lm_head)(\..*)?$"), r"\1"),
)
_FUSED_ATTENTION = re.compile(rf"^{_ATTENTION}$")


def group_of(node_name: str, granularity: str = "group", op: str = "MatMul", weighted: bool = False) -> str:
    """The group a quantizable node belongs to; ``weighted``: one of its inputs is a constant weight."""
    if granularity == "node":
        return node_name
    module = module_of(node_name)
    if _FUSED_ATTENTION.match(module):  # MatMuls of the attention module itself
        if not weighted:
            return f"{module}.scores"
        return f"{module}.out_proj" if op == "Gemm" else f"{module}.qkv_proj"  # WavLM's fused attention call
    for pattern, repl in _RULES:
        if pattern.match(module):
            return pattern.sub(repl, module)
    return module


@dataclass(frozen=True)
class Group:
    """A named set of quantizable nodes; ``index`` is its position in graph order."""

    name: str
    nodes: tuple[str, ...]
    index: int

    @property
    def modules(self) -> list[str]:
        return sorted({module_of(n) for n in self.nodes})


def _constants(model: onnx.ModelProto) -> set[str]:
    """Tensors that are weights: initializers and outputs of Constant nodes (and Identity of either)."""
    consts = {i.name for i in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Constant" or (
            node.op_type == "Identity" and node.input and node.input[0] in consts
        ):
            consts.update(node.output)
    return consts


def group_names(model: onnx.ModelProto, granularity: str = "group") -> dict[str, str]:
    """Node name -> group, for every node of the graph (graph order)."""
    consts = _constants(model)
    return {
        node.name: group_of(node.name, granularity, node.op_type, any(i in consts for i in node.input[:2]))
        for node in model.graph.node
    }


def node_groups(model: onnx.ModelProto, granularity: str = "group") -> list[Group]:
    """Groups of the quantizable nodes, in graph order (by their first node)."""
    if granularity not in GRANULARITIES:
        raise WorkbenchError(f"granularity must be one of {GRANULARITIES}, not {granularity!r}")
    names = group_names(model, granularity)
    members: dict[str, list[str]] = {}
    for node in model.graph.node:
        if node.op_type in QUANTIZABLE_OPS:
            members.setdefault(names[node.name], []).append(node.name)
    if not members:
        raise WorkbenchError("the model has no MatMul/Gemm/Conv node; there is nothing to rank")
    return [Group(name, tuple(nodes), i) for i, (name, nodes) in enumerate(members.items())]


def plan_for(name: str, groups: list[Group], inside: str, outside: str, selected: set[str]) -> PrecisionPlan:
    """A plan giving the ``selected`` groups precision ``inside`` and every other node ``outside``."""
    overrides = {n: inside for g in groups if g.name in selected for n in g.nodes}
    return PrecisionPlan(name, outside, {} if inside == outside else overrides)

"""Layer groups: which MatMul/Gemm/Conv nodes are quantized together in the sensitivity ranking and search.

Granularity ``group`` (default) follows the Wav2Vec2 structure: each feature-encoder conv layer, the
feature projection, the positional conv, per transformer layer the q/k/v projections, the two
activation-by-activation attention MatMuls (QKᵀ, A·V), the output projection and the feed-forward
block, and the LM head. Nodes of any other module form a group named after that module. Granularity
``node`` puts every node in its own group.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import onnx

from workbench.errors import WorkbenchError
from workbench.model.export import module_of
from workbench.quantize.plan import PrecisionPlan, quantizable_nodes

GRANULARITIES = ("group", "node")

_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^(feature_extractor\.conv_layers\.\d+)(\..*)?$"), r"\1"),
    (re.compile(r"^(encoder\.layers\.\d+\.attention)\.[qkv]_proj$"), r"\1.qkv_proj"),
    (re.compile(r"^(encoder\.layers\.\d+\.attention)$"), r"\1.scores"),
    (re.compile(r"^(encoder\.layers\.\d+\.attention\.out_proj)$"), r"\1"),
    (re.compile(r"^(encoder\.layers\.\d+\.feed_forward)(\..*)?$"), r"\1"),
    (re.compile(r"^(feature_projection)(\..*)?$"), r"\1"),
    (re.compile(r"^(encoder\.pos_conv_embed)(\..*)?$"), r"\1"),
    (re.compile(r"^(lm_head)(\..*)?$"), r"\1"),
)


def group_of(node_name: str, granularity: str = "group") -> str:
    """The group a quantizable node belongs to."""
    if granularity == "node":
        return node_name
    module = module_of(node_name)
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


def node_groups(model: onnx.ModelProto, granularity: str = "group") -> list[Group]:
    """Groups in graph order (by their first node)."""
    if granularity not in GRANULARITIES:
        raise WorkbenchError(f"granularity must be one of {GRANULARITIES}, not {granularity!r}")
    members: dict[str, list[str]] = {}
    for node in quantizable_nodes(model):
        members.setdefault(group_of(node, granularity), []).append(node)
    if not members:
        raise WorkbenchError("the model has no MatMul/Gemm/Conv node; there is nothing to rank")
    return [Group(name, tuple(nodes), i) for i, (name, nodes) in enumerate(members.items())]


def plan_for(name: str, groups: list[Group], inside: str, outside: str, selected: set[str]) -> PrecisionPlan:
    """A plan giving the ``selected`` groups precision ``inside`` and every other node ``outside``."""
    overrides = {n: inside for g in groups if g.name in selected for n in g.nodes}
    return PrecisionPlan(name, outside, {} if inside == outside else overrides)

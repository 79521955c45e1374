"""What the search maximises among the plans that pass: a small pluggable piece.

An ``Objective`` scores a precision plan (larger is better) and says what it counts. The default is the INT8
share of multiply-accumulates at the engine profile's opt length (``workbench.quantize.macs``): compute is
what INT8 saves, and nodes differ in it by orders of magnitude. The INT8 share of MatMul/Gemm/Conv nodes is
kept as the other objective and reported beside it. Another objective (a measured latency, say) plugs in
by giving ``name``, ``description`` and ``score``.

The order in which the search keeps groups in FP16 follows the objective too (``order_by_damage_per_unit``): the
sensitivity ranking's damage of each group divided by what the objective counts of it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from workbench.compare.groups import Group
from workbench.config import SEARCH_OBJECTIVES
from workbench.errors import WorkbenchError
from workbench.quantize.macs import NodeMacs
from workbench.quantize.plan import PrecisionPlan

OBJECTIVES = SEARCH_OBJECTIVES


@dataclass(frozen=True)
class Objective:
    """A plan's score the search maximises (larger is better)."""

    name: str
    description: str
    score: Callable[[PrecisionPlan], float]

    def __call__(self, plan: PrecisionPlan) -> float:
        return self.score(plan)

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "description": self.description}


def macs_objective(macs: NodeMacs) -> Objective:
    seconds = macs.samples / 16000
    return Objective(
        "int8_macs_share",
        f"INT8 share of the MatMul/Gemm/Conv multiply-accumulates at {seconds:.2f} s of audio (the engine "
        f"profile's opt length; {macs.total / 1e6:.1f} M MACs in all)",
        macs.int8_share,
    )


def node_objective(nodes: Sequence[str]) -> Objective:
    listed = list(nodes)
    return Objective(
        "int8_node_share",
        f"INT8 share of the {len(listed)} MatMul/Gemm/Conv nodes",
        lambda plan: plan.int8_share(listed),
    )


def group_sizes(name: str, macs: NodeMacs, groups: Sequence[Group]) -> dict[str, float]:
    """What the objective called ``name`` counts of each group: its multiply-accumulates or its node count."""
    if name == "macs":
        return {g.name: float(macs.of_nodes(g.nodes)) for g in groups}
    return {g.name: float(len(g.nodes)) for g in groups}


def order_by_damage_per_unit(
    ranking: Sequence[str], damage: dict[str, float], size: dict[str, float]
) -> list[str]:
    """The groups by damage per unit of what the objective counts, most first, ties in ``ranking``'s order: the
    order of a greedy knapsack, so the k groups the search keeps in FP16 remove the most damage for the least
    of the objective (a conv with few multiply-accumulates and a high KL goes before a large feed-forward block
    with a slightly higher one). A group that counts nothing goes first when it does any damage."""
    position = {g: i for i, g in enumerate(ranking)}

    def per_unit(group: str) -> float:
        hurt = max(0.0, damage.get(group, 0.0))
        return hurt / size[group] if size.get(group, 0.0) > 0 else (float("inf") if hurt > 0 else 0.0)

    return sorted(ranking, key=lambda g: (-per_unit(g), position[g]))


def make_objective(name: str, macs: NodeMacs, nodes: Sequence[str]) -> Objective:
    """The objective called ``name`` (``macs`` or ``nodes``)."""
    if name == "macs":
        return macs_objective(macs)
    if name == "nodes":
        return node_objective(nodes)
    raise WorkbenchError(f"--objective must be one of {', '.join(OBJECTIVES)}, not {name!r}")

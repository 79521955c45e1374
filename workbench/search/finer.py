"""Finer search groups: when a layer group fails in INT8, try keeping only one of its parts in FP16.

A group of the sensitivity ranking (``compare.groups``, granularity ``group``) bundles nodes that usually fail
together: the q/k/v projections of one attention block, the two attention MatMuls, a feed-forward block's
two dense layers, the positional conv embedding's convolutions. ``parts_of`` splits such a group by module
(q_proj / k_proj / v_proj, intermediate_dense / output_dense) or, within one module, into single nodes
(QKᵀ and A·V). ``narrow`` then asks the caller's evaluation, part by part in the order given (most sensitive
first when the caller knows), whether the plan with only that part in FP16 passes; the first that passes is
kept in FP16 and the rest of the group goes to INT8, else the group stays whole. It costs at most one
evaluation per part and never more than the group's own decision: the search calls it after a group
failed, with its own evaluator.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from workbench.compare.groups import Group
from workbench.model.export import module_of


def parts_of(group: Group) -> list[Group]:
    """The group's parts: one per module when it spans several, else one per node; [] for a single node."""
    if len(group.nodes) < 2:
        return []
    modules: dict[str, list[str]] = {}
    for node in group.nodes:
        modules.setdefault(module_of(node), []).append(node)
    if len(modules) > 1:
        return [
            Group(f"{group.name}[{m.rsplit('.', 1)[-1]}]", tuple(ns), group.index)
            for m, ns in modules.items()
        ]
    return [Group(f"{group.name}[{n.rsplit('/', 1)[-1]}]", (n,), group.index) for n in group.nodes]


@dataclass(frozen=True)
class Narrowed:
    """What ``narrow`` decided for one failing group: the nodes kept in FP16 and the parts tried."""

    group: str
    kept_fp16: tuple[str, ...]
    tried: tuple[tuple[str, bool], ...]  # (part, passed) in the order evaluated

    @property
    def narrowed(self) -> bool:
        return bool(self.tried) and any(passed for _, passed in self.tried)


def narrow(group: Group, passes: Callable[[Group], bool], order: Sequence[Group] | None = None) -> Narrowed:
    """Keep the first part (in ``order``, default graph order) whose FP16-only plan ``passes``; else the group."""
    tried = []
    for part in order if order is not None else parts_of(group):
        ok = passes(part)
        tried.append((part.name, ok))
        if ok:
            return Narrowed(group.name, part.nodes, tuple(tried))
    return Narrowed(group.name, group.nodes, tuple(tried))

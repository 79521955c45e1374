"""The search strategies (bisect, gallop, greedy refinement) against a cheap evaluator: a plain function that
passes a plan when it keeps a chosen set of groups out of INT8, so every path of the search is exercised
without a model. The real evaluator is tested in test_compare.py."""

from __future__ import annotations

import math

import pytest

from workbench.compare.groups import Group
from workbench.errors import WorkbenchError
from workbench.evaluate.accuracy import GroupScore
from workbench.evaluate.bootstrap import Interval
from workbench.quantize.plan import PrecisionPlan
from workbench.search.evaluator import Evaluation
from workbench.search.strategies import STRATEGIES, search_plan

GROUPS = [Group(f"g{i}", (f"/g{i}/MatMul", f"/g{i}/Conv"), i) for i in range(12)]
RANKING = [g.name for g in sorted(GROUPS, key=lambda g: (g.index * 7) % 12)]  # not graph order


def _interval(value: float) -> Interval:
    return Interval(value, value - 0.01, value + 0.01, 0.95, 200, "utterance", 10)


class NeedsKept:
    """Passes a plan when every group in ``needed`` is kept out of INT8 (more FP16 never hurts); counts calls."""

    def __init__(self, needed: set[str]) -> None:
        self.needed = needed
        self.plans: list[PrecisionPlan] = []

    def __call__(self, plan: PrecisionPlan) -> Evaluation:
        self.plans.append(plan)
        int8 = {g.name for g in GROUPS if plan.precision_of(g.nodes[0]) == "int8"}
        missing = self.needed & int8
        delta = 0.01 * len(missing)
        score = GroupScore("overall", "all", 10, 100, 0, 0, 0, _interval(0.1 + delta), _interval(delta))
        return Evaluation(plan, not missing, [f"{g} in INT8" for g in sorted(missing)], score, {}, 1.0, 10)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("k", [0, 1, 2, 5, 11, 12])
def test_each_strategy_finds_the_smallest_passing_prefix(strategy: str, k: int) -> None:
    evaluate = NeedsKept(set(RANKING[:k]))
    result = search_plan(RANKING, GROUPS, evaluate, refine=0, strategy=strategy)
    assert result.found is not None and result.found.passed and result.found.kept == frozenset(RANKING[:k])
    assert result.bisection_k == k and result.int8_everywhere_passes == (k == 0)
    assert len(evaluate.plans) == result.evaluations == len(result.candidates)  # every evaluation recorded
    if k == 0:
        assert result.evaluations == 1
    elif strategy == "bisect":  # k = 0, k = all, then bisection over 12 groups
        assert result.evaluations <= 2 + math.ceil(math.log2(len(GROUPS)))
    else:  # k = 0, then 1, 2, 4, ... up to the first pass, then bisection below it
        assert result.evaluations <= 2 + 2 * math.ceil(math.log2(k + 1))
    kept_nodes = {n for g in GROUPS if g.name in result.found.kept for n in g.nodes}
    plan = result.found.evaluation.plan
    assert all(
        plan.precision_of(n) == ("fp16" if n in kept_nodes else "int8") for g in GROUPS for n in g.nodes
    )


def test_gallop_is_cheaper_than_bisect_when_few_groups_must_stay_fp16() -> None:
    costs = {
        s: search_plan(RANKING, GROUPS, NeedsKept({RANKING[0]}), refine=0, strategy=s).evaluations
        for s in STRATEGIES
    }
    assert costs["gallop"] < costs["bisect"]


def test_refinement_moves_kept_groups_back_to_int8_when_the_ranking_was_wrong() -> None:
    # the ranking's 2nd group matters, the 1st does not: bisection keeps both, refinement drops the 1st
    evaluate = NeedsKept({RANKING[1]})
    plain = search_plan(RANKING, GROUPS, NeedsKept({RANKING[1]}), refine=0)
    refined = search_plan(RANKING, GROUPS, evaluate, refine=2)
    assert plain.found.kept == frozenset(RANKING[:2])
    assert refined.found.kept == frozenset({RANKING[1]}) and refined.found.phase == "refine"
    assert [c.phase for c in refined.candidates].count("refine") <= 2


def test_no_plan_when_even_all_fp16_fails() -> None:
    def never(plan: PrecisionPlan) -> Evaluation:
        score = GroupScore("overall", "all", 10, 100, 0, 0, 0, _interval(0.5), _interval(0.4))
        return Evaluation(plan, False, ["always fails"], score, {}, 1.0, 10)

    for strategy in STRATEGIES:
        result = search_plan(RANKING, GROUPS, never, strategy=strategy)
        assert (
            result.found is None and result.bisection_k is None and result.one_at_a_time_evaluations is None
        )


@pytest.mark.parametrize(
    "kwargs, message",
    [({"strategy": "random"}, "strategy"), ({"keep": "int4"}, "--keep"), ({"refine": -1}, "--refine")],
)
def test_bad_options_are_user_errors(kwargs: dict, message: str) -> None:
    with pytest.raises(WorkbenchError, match=message):
        search_plan(RANKING, GROUPS, NeedsKept(set()), **kwargs)


def test_a_ranking_of_other_groups_is_refused() -> None:
    with pytest.raises(WorkbenchError, match="does not cover"):
        search_plan(RANKING[:-1] + ["elsewhere"], GROUPS, NeedsKept(set()))


def test_the_objective_picks_the_passing_plan_with_the_most_int8_compute() -> None:
    """Refinement passes two plans; the objective (here: compute in the one heavy group) picks between them,
    and a failing plan is never returned however high it scores."""
    heavy = RANKING[1]
    evaluate = NeedsKept({RANKING[0]})

    def compute(plan: PrecisionPlan) -> float:
        return sum(
            (100.0 if g.name == heavy else 1.0) for g in GROUPS if plan.precision_of(g.nodes[0]) == "int8"
        )

    plain = search_plan(RANKING, GROUPS, evaluate, refine=0)
    assert plain.found is not None and plain.found.kept == frozenset(RANKING[:1])
    scored = search_plan(RANKING, GROUPS, NeedsKept({RANKING[0]}), refine=0, objective=compute)
    assert scored.found is not None and scored.found.passed
    passing = [c for c in scored.candidates if c.passed]
    assert compute(scored.found.evaluation.plan) == max(compute(c.evaluation.plan) for c in passing)
    assert all(compute(c.evaluation.plan) <= compute(scored.found.evaluation.plan) for c in passing)
    failing = [c for c in scored.candidates if not c.passed]
    assert failing and max(compute(c.evaluation.plan) for c in failing) > compute(
        scored.found.evaluation.plan
    )


class NeedsNodes:
    """Passes a plan when every node in ``needed`` stays out of INT8: one part of a group suffices."""

    def __init__(self, needed: set[str]) -> None:
        self.needed = needed
        self.plans: list[PrecisionPlan] = []

    def __call__(self, plan: PrecisionPlan) -> Evaluation:
        self.plans.append(plan)
        missing = {n for n in self.needed if plan.precision_of(n) == "int8"}
        delta = 0.01 * len(missing)
        score = GroupScore("overall", "all", 10, 100, 0, 0, 0, _interval(0.1 + delta), _interval(delta))
        return Evaluation(plan, not missing, sorted(missing), score, {}, 1.0, 10)


def test_finer_steps_keep_only_the_part_that_needs_fp16() -> None:
    needed_groups = RANKING[:3]
    needed = {f"/{g}/Conv" for g in needed_groups}  # the MatMul of each needed group survives INT8
    evaluate = NeedsNodes(needed)
    result = search_plan(RANKING, GROUPS, evaluate, refine=0, finer=6)
    found = result.found
    assert found is not None and found.passed
    plan = found.evaluation.plan
    fp16 = {n for g in GROUPS for n in g.nodes if plan.precision_of(n) == "fp16"}
    assert fp16 == needed  # each kept group narrowed to its Conv: 2 tries per group, 6 in all
    assert [c.phase for c in result.candidates].count("finer") == 6
    assert all(len(c.evaluation.plan.overrides) <= 6 for c in result.candidates if c.phase == "finer")


def test_finer_budget_bounds_the_evaluations_and_zero_changes_nothing() -> None:
    needed = {f"/{g}/Conv" for g in RANKING[:3]}
    plain = search_plan(RANKING, GROUPS, NeedsNodes(needed), refine=0)
    limited = search_plan(RANKING, GROUPS, NeedsNodes(needed), refine=0, finer=1)
    assert [c.phase for c in plain.candidates].count("finer") == 0
    assert [c.phase for c in limited.candidates].count("finer") == 1
    assert limited.evaluations == plain.evaluations + 1
    with pytest.raises(WorkbenchError, match="--finer"):
        search_plan(RANKING, GROUPS, NeedsNodes(needed), finer=-1)


def test_the_order_puts_the_most_damage_per_unit_first_and_keeps_ties_in_ranking_order() -> None:
    from workbench.search.objective import order_by_damage_per_unit

    ranking = ["ffn", "conv0", "conv1", "attn", "free", "harmless"]  # by damage, most first
    damage = {"ffn": 0.010, "conv0": 0.008, "conv1": 0.004, "attn": 0.002, "free": 0.001, "harmless": 0.0}
    size = {"ffn": 1000.0, "conv0": 10.0, "conv1": 40.0, "attn": 200.0, "free": 0.0, "harmless": 0.0}
    # per unit: conv0 8e-4, conv1 1e-4, ffn 1e-5, attn 1e-5 (a tie: ranking order), free first (counts nothing)
    assert order_by_damage_per_unit(ranking, damage, size) == [
        "free",
        "conv0",
        "conv1",
        "ffn",
        "attn",
        "harmless",
    ]


def test_group_sizes_count_what_the_objective_counts() -> None:
    from workbench.compare.groups import Group
    from workbench.quantize.macs import NodeMacs
    from workbench.search.objective import group_sizes

    groups = [Group("a", ("n1", "n2"), 0), Group("b", ("n3",), 1)]
    macs = NodeMacs(16000, {"n1": 100, "n2": 50, "n3": 7})
    assert group_sizes("macs", macs, groups) == {"a": 150.0, "b": 7.0}
    assert group_sizes("nodes", macs, groups) == {"a": 2.0, "b": 1.0}

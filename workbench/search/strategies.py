"""Search strategies: the plan with the most INT8 whose dev-set WER stays within the budget.

Candidates keep the k most sensitive groups (by the sensitivity ranking) in FP16 and put the rest in
INT8. k = 0 (INT8 everywhere) is tried first. Strategy ``bisect`` (default) then tries k = all groups
and bisects between the last failing and the first passing k: 2 + ceil(log2(groups)) evaluations
whatever k turns out to be. Strategy ``gallop`` doubles k (1, 2, 4, ...) until a pass and then bisects:
cheaper when few groups need FP16. Both assume that more FP16 does not hurt; the plan returned is always
one that was evaluated and passed. Optional greedy refinement then tries to move kept groups back to
INT8, least sensitive first. Optional finer steps (``finer``, an evaluation budget) then split the kept groups,
least sensitive first, into their parts (``workbench.search.finer``: q/k/v projections, FFN in/out, single
nodes) and keep only the first part whose FP16-only plan passes, the rest of the group going to INT8. With an
objective (``workbench.search.objective``; by default the INT8 share of
multiply-accumulates) the plan returned is the passing candidate it scores highest. Every evaluated candidate
is recorded. A one-at-a-time fallback in ranking
order needs k + 1 evaluations to reach the same k; evaluating every group on its own needs one per group.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from workbench.compare.groups import Group, plan_for
from workbench.errors import WorkbenchError
from workbench.quantize.plan import PrecisionPlan
from workbench.search.evaluator import Evaluation
from workbench.search.finer import narrow, parts_of

logger = logging.getLogger(__name__)

STRATEGIES = ("bisect", "gallop")


def describe(strategy: str, keep: str, refine: int, finer: int = 0) -> str:
    """One sentence for the search record."""
    first = (
        "then k = all groups, then bisection"
        if strategy == "bisect"
        else "then k = 1, 2, 4, ... until a pass, then bisection"
    )
    return (
        f"keep the first k groups of the order in {keep.upper()}, the rest INT8: k = 0 first, {first} to the "
        f"smallest passing k, then up to {refine} greedy refinement steps (move kept groups back to INT8, "
        "least sensitive first)"
        + (
            f", then up to {finer} finer steps (a kept group keeps only its first part that passes in "
            f"{keep.upper()}, least sensitive group first)"
            if finer
            else ""
        )
    )


@dataclass
class Candidate:
    step: int
    phase: str
    k: int | None
    kept: frozenset[str]
    evaluation: Evaluation

    @property
    def passed(self) -> bool:
        return self.evaluation.passed


@dataclass
class SearchResult:
    ranking: list[str]
    groups: list[Group]
    candidates: list[Candidate]
    found: Candidate | None
    bisection_k: int | None

    @property
    def evaluations(self) -> int:
        return len(self.candidates)

    @property
    def one_at_a_time_evaluations(self) -> int | None:
        return None if self.bisection_k is None else self.bisection_k + 1

    @property
    def int8_everywhere_passes(self) -> bool:
        return bool(self.candidates) and self.candidates[0].k == 0 and self.candidates[0].passed


def search_plan(
    ranking: list[str],
    groups: list[Group],
    evaluate: Callable[[PrecisionPlan], Evaluation],
    keep: str = "fp16",
    refine: int = 2,
    name: str = "mixed",
    strategy: str = "bisect",
    objective: Callable[[PrecisionPlan], float] | None = None,
    finer: int = 0,
) -> SearchResult:
    """Search as described in the module docstring; ``evaluate`` runs one WER evaluation. With ``objective``
    the plan returned is the passing candidate it scores highest (ties: the earlier one)."""
    known = {g.name for g in groups}
    if sorted(ranking) != sorted(known):
        raise WorkbenchError(
            "the sensitivity ranking does not cover exactly this model's groups (made for "
            "another model or granularity); recompute it"
        )
    if keep not in ("fp16", "fp32"):
        raise WorkbenchError(f"--keep must be fp16 or fp32, not {keep!r}")
    if strategy not in STRATEGIES:
        raise WorkbenchError(f"search strategy must be one of {STRATEGIES}, not {strategy!r}")
    if refine < 0:
        raise WorkbenchError("--refine must be >= 0")
    if finer < 0:
        raise WorkbenchError("--finer must be >= 0")
    total = len(ranking)
    done: dict[frozenset[str], Candidate] = {}
    order: list[Candidate] = []
    plan_groups = list(groups)  # grows by the parts that finer steps try

    def trial(kept: frozenset[str], phase: str, k: int | None) -> Candidate:
        if kept in done:
            return done[kept]
        label = f"{name}-k{k}" if k is not None else f"{name}-r{len(order) + 1}"
        plan = plan_for(label, plan_groups, keep, "int8", set(kept))
        evaluation = evaluate(plan)
        cand = Candidate(len(order) + 1, phase, k, kept, evaluation)
        done[kept] = cand
        order.append(cand)
        if logger.isEnabledFor(logging.INFO):
            d = evaluation.overall.delta
            judged = evaluation.judged.get("overall")
            shown = (
                f", judged {judged:+.2f}"
                if judged is not None and d is not None and abs(judged - d.high * 100) > 1e-9
                else ""
            )
            delta = (
                f"delta {d.estimate * 100:+.2f} pts (CI high {d.high * 100:+.2f}{shown})"
                if d is not None
                else ""
            )
            logger.info(
                f"[{cand.step}] {phase:>15} k={k if k is not None else '-'}: {'PASS' if cand.passed else 'FAIL'} "
                f"WER {evaluation.overall.wer.estimate * 100:.2f}% {delta} on {evaluation.utterances} utt"
                + (f": {evaluation.failure}" if evaluation.failure else "")
            )
        return cand

    def top(k: int) -> frozenset[str]:
        return frozenset(ranking[:k])

    first = trial(top(0), "int8-everywhere", 0)
    if first.passed:
        return SearchResult(ranking, groups, order, first, 0)
    lo, hi, k = 0, None, total if strategy == "bisect" else 1
    while hi is None:
        k = min(k, total)
        if trial(top(k), "all-" + keep if k == total else "gallop", k).passed:
            hi = k
        elif k == total:
            return SearchResult(ranking, groups, order, None, None)
        else:
            lo, k = k, k * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if trial(top(mid), "bisect", mid).passed:
            hi = mid
        else:
            lo = mid
    best = done[top(hi)]
    for group in reversed(ranking[:hi]):
        kept = best.kept - {group}
        if kept in done:  # e.g. the top k-1 groups: bisection already saw it fail
            continue
        if refine <= 0:
            break
        refine -= 1
        cand = trial(kept, "refine", None)
        if cand.passed:
            best = cand
    best = _finer_steps(best, ranking, groups, plan_groups, trial, finer)
    return SearchResult(ranking, groups, order, best_of(order, objective) or best, hi)


def _finer_steps(
    best: Candidate,
    ranking: list[str],
    groups: list[Group],
    plan_groups: list[Group],
    trial: Callable[[frozenset[str], str, int | None], Candidate],
    budget: int,
) -> Candidate:
    """Narrow ``best``'s kept groups, least sensitive first, to one part each while ``budget`` lasts."""
    by_name = {g.name: g for g in groups}
    for group_name in reversed(ranking):
        if budget <= 0:
            break
        if group_name not in best.kept:
            continue
        parts = parts_of(by_name[group_name])
        plan_groups.extend(p for p in parts if p not in plan_groups)

        def passes(part: Group, group_name: str = group_name) -> bool:
            nonlocal budget, best
            if budget <= 0:
                return False
            budget -= 1
            cand = trial((best.kept - {group_name}) | {part.name}, "finer", None)
            if cand.passed:
                best = cand
            return cand.passed

        narrow(by_name[group_name], passes, parts)
    return best


def best_of(
    candidates: list[Candidate], objective: Callable[[PrecisionPlan], float] | None
) -> Candidate | None:
    """The passing candidate ``objective`` scores highest (the earliest of equals); None without one."""
    if objective is None:
        return None
    ranked = ranked_passing(candidates, objective)
    return ranked[0] if ranked else None


def ranked_passing(
    candidates: Sequence[Candidate], objective: Callable[[PrecisionPlan], float]
) -> list[Candidate]:
    """The passing candidates, the one ``objective`` scores highest first (the earlier of equals first)."""
    return sorted((c for c in candidates if c.passed), key=lambda c: (-objective(c.evaluation.plan), c.step))

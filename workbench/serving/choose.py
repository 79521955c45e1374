"""The serving gate and the winner by serving capacity.

Gate (``serving_check``): with ``serving.qps``, the candidate's p99 at that offered load meets
``serving.p99_ms``; without it, some offered load meets it (capacity above zero). Verdict
(``decide_by_capacity``): when the serving benchmark ran on the deployment target, the winner among the
candidates passing every gate is the one with the highest capacity (the highest offered load of the shared
sweep whose p99 met the target); candidates of equal capacity are ranked by the latency verdict's tie rule.
Serving measured elsewhere picks nothing, as latency measured elsewhere does not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from workbench.evaluate.gates import CandidateVerdict, Check
from workbench.evaluate.verdict import NONE, SHIP, Candidate, SignoffDecision
from workbench.inputs.serving import ServingConfig
from workbench.serving.measure import CandidateServing

RULE = (
    "serving capacity = the highest offered load (Poisson arrivals, dynamic batcher) whose p99 meets the "
    "serving target, over the same offered loads for every candidate; the highest capacity among the passing "
    "candidates wins"
)


def serving_check(result: CandidateServing | None, config: ServingConfig) -> Check:
    """The serving gate of one candidate (see the module docstring)."""
    target = config.p99_ms
    if result is None or result.sweep is None:
        why = result.note if result is not None and result.note else "not measured"
        return Check("serving", None, target, False, f"serving: {why}")
    if config.qps is not None:
        point = result.sweep.at(config.qps)
        if point is None:
            return Check("serving", None, target, False, f"serving: no measurement at {config.qps:g} QPS")
        ok = point.meets_target
        shown = (
            f"{point.p99_ms:.1f} ms" if point.p99_ms is not None else "unbounded (requests left unanswered)"
        )
        return Check(
            "serving",
            point.p99_ms,
            target,
            ok,
            f"serving: p99 {shown} at {config.qps:g} QPS {'<=' if ok else '>'} {target:g} ms "
            f"({point.requests} requests)",
        )
    capacity = result.sweep.capacity_qps
    detail = (
        f"serving: capacity {capacity:g} QPS with p99 <= {target:g} ms"
        if capacity is not None
        else f"serving: no offered load met p99 <= {target:g} ms"
    )
    return Check("serving", capacity, target, capacity is not None, detail)


def add_serving_checks(
    verdicts: Sequence[CandidateVerdict], serving: Mapping[str, CandidateServing], config: ServingConfig
) -> None:
    for verdict in verdicts:
        verdict.add(serving_check(serving.get(verdict.candidate), config))


def decide_by_capacity(
    decision: SignoffDecision,
    serving: Mapping[str, CandidateServing],
    candidates: Sequence[Candidate],
    measured_on: str,
) -> SignoffDecision:
    """``decision`` replaced by the capacity winner when serving ran on its target (see the module docstring);
    otherwise ``decision`` with a reason saying why serving picked nothing."""
    if decision.mode == NONE:
        return decision
    if measured_on != decision.target:
        decision.reasons.append(
            f"serving was measured on {measured_on}, not on the deployment target {decision.target}: its "
            "capacity picks nothing"
        )
        return decision
    capacity = {
        n: c.sweep.capacity_qps
        for n, c in serving.items()
        if n in decision.passing and c.sweep is not None and c.sweep.capacity_qps is not None
    }
    if not capacity:
        decision.reasons.append("no passing candidate met the serving target at any offered load")
        return decision
    best = max(capacity.values())
    equal = [n for n in decision.passing if capacity.get(n) == best]
    info = {c.name: c for c in candidates}
    order = {c.name: i for i, c in enumerate(candidates)}
    ranked = sorted(equal, key=lambda n: info.get(n, Candidate(n)).tie_key(order.get(n, len(order))))
    choice = ranked[0]
    shown = ", ".join(f"{n} {q:g} QPS" for n, q in capacity.items())
    reasons = [f"serving capacity at p99 target: {shown}"]
    if len(equal) == 1:
        reasons.append(f"{choice} serves the highest load within the p99 target")
    else:
        reasons.append(f"equal capacity: {', '.join(equal)}; tie broken by the stated rule")
    return SignoffDecision(
        SHIP,
        choice,
        f"SHIP {choice} (serving capacity {best:g} QPS)",
        decision.target,
        measured_on,
        decision.passing,
        decision.ratios,
        equal,
        reasons + decision.reasons,
        RULE,
    )

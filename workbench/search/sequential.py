"""Sequential evidence: a candidate is judged on a first block of the dev set, and more blocks are added only
while its judged interval straddles the gate.

The dev set is put in an order whose every prefix is balanced (``balanced_order``: round robin over the
conditions, and within a condition over the speakers, so a first block already has many speakers of every
condition) and cut into ``blocks`` blocks (``block_ends``). After each block the evaluator judges the
prefix (the predicted sign-off interval of every check, as ``workbench.search.evaluator`` judges the whole
set) and says on which side of the gate it lies (``side_of_gate``):

- ``pass``: every check's judged upper end is within its gate;
- ``fail``: some check's point estimate is already above its gate (so even the narrowest interval the whole
  dev set could give around it, its half-width times sqrt(utterances judged / dev utterances), ends above
  the gate); a check whose estimate is within the gate is never failed early, since with few speakers per
  condition the estimate itself still moves by more than the interval narrows (the demo's all-FP16 plan
  reads +0.29 on noisy speech with an upper end of +1.62 after 150 of 300 utterances, and passes on all 300);
- ``futile`` (only with a futility level, ``search --futility``; off by default): the whole dev set is unlikely
  to pass it (``pass_chance``: the predictive chance, given the prefix, that the whole set's judged upper end of
  some check ends within its gate is below the level). A plan whose estimate sits near zero but whose
  transcripts change so often that even the whole set's interval would stay wider than the gate stops here
  instead of buying every block. The chance assumes the rest of the set behaves like the prefix, which a
  balanced order does not give (the last blocks hold the speakers with many utterances);
- ``straddles``: none of these; the next block is added.

The whole dev set is the last look, judged as before. A pass at an earlier look is judged at a stricter
confidence (``interim_confidence``: the chance of a wrong pass, 1 - confidence, shared out over the
looks), so looking early buys cost, not a looser test; an early fail (or a futile one) only costs the
candidate (the search never ships a plan that failed): a futility level of 5 % would give up about one in
twenty plans that the whole dev set passes if the blocks were exchangeable, and more when they are not. ``run_sequential`` applies the rule to any ``look`` function,
which is how the tests check it on a cheap evaluator.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Generic, TypeVar

from workbench.errors import WorkbenchError

T = TypeVar("T")
SEQUENTIAL_RULE = (
    "judge the first block; add blocks while the judged interval of a check straddles its gate; stop at "
    "pass (every judged upper end within its gate), fail (a point estimate already above its gate), futile "
    "(the predictive chance that the whole dev set passes a check is below the futility level) or at the "
    "whole dev set; earlier looks judge a pass at confidence 1 - (1 - confidence) / blocks"
)
SIDES = ("pass", "fail", "futile", "straddles")


def block_ends(total: int, blocks: int) -> list[int]:
    """Cumulative sizes of ``blocks`` near-equal blocks of ``total`` utterances (the last is ``total``)."""
    if total < 1:
        raise WorkbenchError("the dev set has no utterances")
    if blocks < 1:
        raise WorkbenchError(f"--dev-blocks must be at least 1, not {blocks}")
    blocks = min(blocks, total)
    return sorted({round(total * (b + 1) / blocks) for b in range(blocks)})


def covering_ends(ends: Sequence[int], conditions: Sequence[str], min_block: int) -> list[int]:
    """``ends`` without the looks that would judge a prefix lacking a condition of the set (in the given
    order) or holding fewer than ``min_block`` utterances; the whole set is always kept."""
    seen: set[str] = set()
    every = set(conditions)
    covered = len(conditions)
    for i, cond in enumerate(conditions):
        seen.add(cond)
        if seen == every:
            covered = i + 1
            break
    first = max(covered, min_block)
    kept = [e for e in ends if e >= first]
    return kept if kept and kept[-1] == len(conditions) else [*kept, len(conditions)]


def balanced_order(conditions: Sequence[str], speakers: Sequence[str | None]) -> list[int]:
    """Indices of the utterances in an order whose every prefix is balanced: round robin over the conditions,
    each condition's utterances round robin over its speakers (first appearance order), so the first block
    holds as many speakers of each condition as it can."""
    if len(conditions) != len(speakers):
        raise ValueError("conditions and speakers differ in length")
    by_condition: dict[str, dict[str, list[int]]] = {}
    for i, (cond, spk) in enumerate(zip(conditions, speakers)):
        by_condition.setdefault(str(cond), {}).setdefault(str(spk) if spk else f"utt{i}", []).append(i)
    queues: list[list[int]] = []
    for cond in sorted(by_condition):
        per_speaker = list(by_condition[cond].values())
        queue: list[int] = []
        depth = max(len(v) for v in per_speaker)
        for level in range(depth):
            queue += [v[level] for v in per_speaker if level < len(v)]
        queues.append(queue)
    order: list[int] = []
    # interleave the conditions in proportion to their sizes
    positions = sorted(((k + 0.5) / len(q), c, k) for c, q in enumerate(queues) for k in range(len(q)))
    for _, c, k in positions:
        order.append(queues[c][k])
    return order


def interim_confidence(confidence: float, looks: int) -> float:
    """The confidence an earlier look's pass is judged at: 1 - (1 - confidence) / looks (Bonferroni share)."""
    if looks <= 1:
        return confidence
    return 1.0 - (1.0 - confidence) / looks


def pass_chance(estimate: float, se: float, final_span: float, gate: float, fraction: float) -> float:
    """The predictive chance that a check passes on the whole dev set, judged after ``fraction`` of it.

    ``estimate`` and ``se``: the prefix's delta and its standard error (points); ``final_span``: how far above
    the whole set's estimate its judged upper end will lie (the judged half-span narrowed by sqrt(fraction)).
    With a flat prior the whole set's estimate is normal around the prefix's with standard deviation
    ``se * sqrt(1 - fraction)`` (the rest of the set is new evidence on the same effect); the check passes
    when that estimate plus ``final_span`` is within ``gate``."""
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    room = gate - final_span - estimate
    spread = se * math.sqrt(1.0 - fraction)
    if spread <= 0.0 or not math.isfinite(spread):
        return 1.0 if room >= 0.0 else 0.0
    return NormalDist().cdf(room / spread)


def side_of_gate(
    intervals: dict[str, tuple[float, float, float]],
    shrink: float = 1.0,
    chances: dict[str, float] | None = None,
    futility: float = 0.0,
) -> str:
    """``pass``, ``fail``, ``futile`` or ``straddles`` from each check's judged (estimate, upper end, gate), in
    points.

    ``shrink``: the most the judged half-width can still narrow by the whole dev set, sqrt(utterances judged /
    dev utterances) (1 at the last look). At the last look a check whose upper end is above its gate fails;
    at an earlier look only a check whose point estimate is above its gate does (only moving the estimate
    could pass it), and a check whose chance of passing on the whole set (``chances``, from ``pass_chance``)
    is below ``futility`` makes the look ``futile``."""
    if all(high <= gate for _, high, gate in intervals.values()):
        return "pass"
    if shrink >= 1.0 or any(est > gate for est, _, gate in intervals.values()):
        return "fail"
    if futility > 0.0 and chances and min(chances.values()) < futility:
        return "futile"
    return "straddles"


@dataclass(frozen=True)
class Look:
    """One look: the utterances judged, the confidence a pass was judged at, the side of the gate."""

    utterances: int
    confidence: float
    side: str

    def to_json(self) -> dict[str, object]:
        return {"utterances": self.utterances, "confidence": self.confidence, "side": self.side}


@dataclass(frozen=True)
class Stopping(Generic[T]):
    """Where a sequential evaluation stopped, why, and the last look's result."""

    result: T
    utterances: int
    blocks_used: int
    blocks: int
    reason: str
    looks: list[Look] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return {
            "utterances": self.utterances,
            "blocks_used": self.blocks_used,
            "blocks": self.blocks,
            "stopped": self.reason,
            "looks": [look.to_json() for look in self.looks],
        }


def run_sequential(
    look: Callable[[int, float], tuple[T, str]], ends: Sequence[int], confidence: float
) -> Stopping[T]:
    """Judge growing prefixes (``ends``) with ``look(utterances, confidence) -> (result, side)`` until a side
    of the gate is reached or the whole set was judged (the last look at ``confidence``, earlier ones at
    ``interim_confidence``)."""
    if not ends:
        raise WorkbenchError("the dev set has no utterances")
    interim = interim_confidence(confidence, len(ends))
    looks: list[Look] = []
    for number, end in enumerate(ends, 1):
        last = number == len(ends)
        level = confidence if last else interim
        result, side = look(end, level)
        if side not in SIDES:
            raise ValueError(f"side must be one of {SIDES}, not {side!r}")
        looks.append(Look(end, level, side))
        if last:
            reason = f"whole dev set ({end} utterances): {'pass' if side == 'pass' else 'fail'}"
            if number > 1:
                reason += "; earlier blocks straddled the gate"
            return Stopping(result, end, number, len(ends), reason, looks)
        if side == "futile":
            return Stopping(
                result,
                end,
                number,
                len(ends),
                f"fail after block {number} of {len(ends)} ({end} utterances): futile, the whole dev set is "
                "unlikely to pass it (its predictive chance of passing is below the futility level)",
                looks,
            )
        if side != "straddles":
            where = "within" if side == "pass" else "above"
            return Stopping(
                result,
                end,
                number,
                len(ends),
                f"{side} after block {number} of {len(ends)} ({end} utterances): judged interval {where} "
                "the gate",
                looks,
            )
    raise AssertionError("unreachable")

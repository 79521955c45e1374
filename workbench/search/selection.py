"""Selection rules: how the search accounts for choosing one plan among many read on the same dev set.

The search keeps the passing plan with the most INT8, so it favours plans whose dev reading came out low. Rules
(``search --selection``):

- ``as-read``: every plan is judged on its dev reading as it is (the sign-off forecast at ``--confidence``).
- ``shrink``: a winner's-curse correction. Each plan must pass with its dev estimate moved up by the expected
  maximum of ``m`` standard normal errors (``workbench.search.forecast.expected_max``), ``m`` the evaluations the
  strategy plans to make (``planned_evaluations``): the judged confidence becomes
  ``Phi(z(confidence) + E[max of m])``. Costs no extra transcription; keeps less INT8.
- ``confirm``: the choice is made on part of the dev speakers and confirmed on the rest (``workbench.search.confirm``;
  ``--confirm SHARE``, default ``SearchConfig.confirm_share``). Costs up to ``MAX_CONFIRMATIONS`` evaluations on
  the held-back speakers and leaves fewer speakers to choose on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

from workbench.config import SEARCH_SELECTIONS as SELECTIONS
from workbench.errors import WorkbenchError
from workbench.search.forecast import expected_max


def planned_evaluations(strategy: str, groups: int, refine: int, finer: int) -> int:
    """The evaluations a search plans (the plans its choice is made among): INT8 everywhere, every group kept,
    the bisection (gallop: the doubling, then the bisection), the refinement and the finer steps."""
    steps = max(1, math.ceil(math.log2(max(2, groups))))
    search = 2 + steps if strategy == "bisect" else 1 + 2 * steps
    return search + max(0, refine) + max(0, finer)


@dataclass(frozen=True)
class Selection:
    """A rule and what it does to the judged confidence and the confirmation share."""

    rule: str
    confidence: float  # the confidence the search asks for
    judged_confidence: (
        float  # the confidence each plan is judged at (shrink: raised for the planned comparisons)
    )
    compared: int  # plans the choice is made among (planned)
    confirm: float  # share of dev speakers held back (confirm; 0 otherwise unless --confirm was given)

    def to_json(self) -> dict[str, object]:
        return {
            "rule": self.rule,
            "confidence": self.confidence,
            "judged_confidence": self.judged_confidence,
            "planned_evaluations": self.compared,
            "winners_curse_shift_se": round(expected_max(self.compared), 4) if self.rule == "shrink" else 0.0,
            "confirm_share": self.confirm,
            "description": DESCRIPTIONS[self.rule],
        }


DESCRIPTIONS = {
    "as-read": "each plan judged on its dev reading as it is",
    "shrink": "each plan judged with its dev estimate moved up by E[max of m standard normals] standard errors, m the "
    "evaluations the strategy plans (a winner's-curse correction)",
    "confirm": "the choice made on part of the dev speakers, the passing plans judged again on the held-back rest, "
    "best first; the first that passes there is the found plan",
}


def select(
    rule: str,
    confidence: float,
    strategy: str,
    groups: int,
    refine: int,
    finer: int,
    confirm: float,
    confirm_default: float,
) -> Selection:
    """The settings ``rule`` gives a search of ``groups`` groups (see the module docstring)."""
    if rule not in SELECTIONS:
        raise WorkbenchError(f"--selection must be one of {', '.join(SELECTIONS)}, not {rule!r}")
    m = planned_evaluations(strategy, groups, refine, finer)
    judged = confidence
    if rule == "shrink":
        judged = min(NormalDist().cdf(NormalDist().inv_cdf(confidence) + expected_max(m)), 0.9999)
    share = confirm or (confirm_default if rule == "confirm" else 0.0)
    return Selection(rule, confidence, judged, m, share)

"""Confirmation of the found plan on dev speakers the choice was not made on (``search --confirm SHARE``).

The search judges several plans on one dev set and keeps the passing one with the most INT8, so it keeps a plan
whose dev estimate came out low: over eight searches on the demo model the found plan read 0.04-0.38 points lower
on the dev set than in its sign-off (``benchmarks/results/search_selection.json``). With ``--confirm SHARE`` that
share of each condition's dev speakers is held back: the search chooses on the rest, then the passing plans are
judged again on the held-back speakers alone, best first by the objective, and the first that passes there is the
found plan (at most ``MAX_CONFIRMATIONS`` evaluations; none passing: no plan). The held-back speakers never
steered the choice, so their judgement of the plan is not selected; it is judged by the same rule (widened to the
sign-off set's speakers, moved out for the confidence), on fewer speakers, so it asks for a larger lead.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from workbench.errors import WorkbenchError
from workbench.quantize.plan import PrecisionPlan
from workbench.search.evaluator import Evaluation
from workbench.search.strategies import Candidate, ranked_passing
from workbench.speech.records import Clip

MAX_CONFIRMATIONS = 3


def split_speakers(clips: Sequence[Clip], share: float) -> tuple[list[Clip], list[Clip]]:
    """``clips`` split into (chosen on, held back): per condition, about ``share`` of its speakers held back (at least
    one where the condition has two or more), picked by a hash of the speaker name, so the split is the same on
    every run; clips without a speaker count as speakers of their own."""
    if not 0.0 < share < 1.0:
        raise WorkbenchError(f"--confirm must be a share between 0 and 1 (exclusive), not {share}")
    speakers: dict[str, set[str]] = {}
    for clip in clips:
        speakers.setdefault(clip.condition, set()).add(_speaker(clip))
    held: set[tuple[str, str]] = set()
    for condition, names in speakers.items():
        if len(names) < 2:
            continue
        order = sorted(names, key=lambda n: (zlib.crc32(f"{condition}/{n}".encode()), n))
        count = min(len(order) - 1, max(1, round(share * len(order))))
        held.update((condition, n) for n in order[:count])
    chosen = [c for c in clips if (c.condition, _speaker(c)) not in held]
    back = [c for c in clips if (c.condition, _speaker(c)) in held]
    if not back or not chosen:
        raise WorkbenchError(
            "--confirm needs dev conditions with at least two speakers each, so some can be held back"
        )
    return chosen, back


def _speaker(clip: Clip) -> str:
    return clip.utterance.speaker or f"utterance {clip.utterance.id}"


@dataclass(frozen=True)
class Confirmation:
    """The plans judged on the held-back speakers (best first) and the one that passed there (None: none did)."""

    tried: tuple[tuple[Candidate, Evaluation], ...]
    found: Candidate | None
    chosen_on: int  # dev utterances the choice was made on
    held_back: int  # dev utterances held back

    def to_json(self) -> dict[str, Any]:
        return {
            "chosen_on_utterances": self.chosen_on,
            "held_back_utterances": self.held_back,
            "found": self.found.evaluation.plan.name if self.found is not None else None,
            "tried": [
                {
                    "name": cand.evaluation.plan.name,
                    "dev_delta": _points(cand.evaluation),
                    "held_back_delta": _points(ev),
                    "held_back_judged": ev.judged,
                    "passed": ev.passed,
                    "reasons": ev.reasons,
                }
                for cand, ev in self.tried
            ],
        }


def _points(evaluation: Evaluation) -> float | None:
    delta = evaluation.overall.delta
    return None if delta is None else round(delta.estimate * 100, 3)


def confirm(
    candidates: Sequence[Candidate],
    evaluate: Callable[[PrecisionPlan], Evaluation],
    score: Callable[[PrecisionPlan], float],
    chosen_on: int,
    held_back: int,
) -> Confirmation:
    """Judge the passing ``candidates`` on the held-back speakers (``evaluate``), best ``score`` first (the earlier
    of equals), until one passes or ``MAX_CONFIRMATIONS`` were tried."""
    passing = ranked_passing(candidates, score)
    tried: list[tuple[Candidate, Evaluation]] = []
    for cand in passing[:MAX_CONFIRMATIONS]:
        evaluation = evaluate(cand.evaluation.plan)
        tried.append((cand, evaluation))
        if evaluation.passed:
            return Confirmation(tuple(tried), cand, chosen_on, held_back)
    return Confirmation(tuple(tried), None, chosen_on, held_back)

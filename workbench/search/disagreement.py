"""Disagreement with FP32 on unlabelled dev audio as the search's criterion (``search --dev-criterion disagreement``).

With ``--dev-criterion wer`` (the default) a plan passes when its WER delta vs FP32 on the labelled dev set,
judged as the sign-off's interval it predicts (``workbench.search.evaluator``), is within the gates. With
``--dev-criterion disagreement`` a plan is judged instead on audio without transcripts (``--unlabelled-dev-set``):
FP32's own transcripts are the references, so a plan's "WER" there is its disagreement with FP32 (word edit
distance over FP32's words, ``workbench.evaluate.agreement``), judged by the same evaluator with the same rules
(speaker-block bootstrap, widened to the sign-off set, moved out for the search's confidence, held back by the
margin, bought block by block) against a disagreement budget instead of the WER gates.

Disagreement bounds the WER loss (``|WER delta| <= disagreement``, edit distance is a metric) but lies far above it:
a gate of 0.3 points read as a disagreement budget would keep every plan in FP16. The budget is therefore scaled:

- given (``--max-disagreement P``): P points of FP32's words overall; each condition's budget is P times the
  gates' ratio (condition gate / overall gate);
- calibrated (the default): INT8 everywhere is read on the labelled dev set twice, its WER delta against the
  labels and its disagreement against FP32, both judged whole-set as the search judges (the same prediction of the
  sign-off's upper end). ``ratio`` = judged WER delta / judged disagreement; each budget is its gate / ratio. The
  budget assumes that a plan's judged WER delta is at most ``ratio`` times its judged disagreement. Nothing
  guarantees it, and the record states it: a plan with few changes has a WER-delta interval that is wide for its
  changes, so its ratio of upper ends can exceed INT8 everywhere's (docs/compare-and-search.md has the demo's).

Refused, in one ``error:`` line before any plan is judged: the criterion's options given with the other criterion, a
labelled set or the calibration set as the unlabelled dev set, a set FP32 transcribes no word of, a dev set whose
INT8-everywhere reading gives no positive ratio (give ``--max-disagreement``), and combinations the criterion does
not support (``--selection confirm``/``--confirm``, ``--ray``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from workbench.config import SEARCH_DEV_CRITERIA
from workbench.errors import WorkbenchError
from workbench.evaluate.gates import GateConfig
from workbench.quantize.plan import PrecisionPlan
from workbench.search.evaluator import DevEvaluator, Evaluation
from workbench.speech.store import SpeechSet
from workbench.speech.unlabelled import require_unlabelled

DISAGREEMENT = "disagreement"

RULE = (
    "a plan passes when its disagreement with FP32 on the unlabelled dev set (word edits to FP32's transcripts over "
    "FP32's words, speaker-block bootstrap), judged as the search judges a WER delta (upper end of the sign-off's "
    "interval as the dev interval predicts it, margin held back), is within the disagreement budget overall and per "
    "condition"
)
ASSUMPTION = (
    "a plan's judged WER delta is at most the calibration ratio times its judged disagreement; nothing guarantees "
    "it: a plan with few changes can have a larger ratio of upper ends than INT8 everywhere, which it is measured on"
)
SCORED_AGAINST = (
    "FP32's transcripts of the unlabelled dev set: every candidate's wer and delta in this record (and the CSV's wer "
    "columns) are its disagreement with FP32 (fractions of FP32's words; FP32's own is 0), judged_delta_high and "
    "budget.judged_against in points of FP32's words"
)


@dataclass(frozen=True)
class DisagreementBudget:
    """How much disagreement (points of FP32's words, on the judged upper end) a plan may reach, and where it came
    from: ``given`` (``--max-disagreement``) or ``calibrated`` on the labelled dev set (``calibration``)."""

    overall: float
    condition: float
    source: str
    calibration: dict[str, Any] | None = None

    def gates(self, gates: GateConfig) -> GateConfig:
        """``gates`` with the error-rate gates replaced by the budget (the margin is held back by the evaluator)."""
        return replace(
            gates, max_wer_delta_points=self.overall, max_condition_wer_delta_points=self.condition
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "max_disagreement_points": self.overall,
            "max_condition_disagreement_points": self.condition,
            "source": self.source,
            "calibration": self.calibration,
        }


def reads_labelled_dev(criterion: str, max_disagreement: float | None) -> bool:
    """Whether the search reads the labelled dev set: the WER criterion judges on it, a calibrated disagreement
    budget is made on it; a given budget (``--max-disagreement``) reads none."""
    return criterion != DISAGREEMENT or max_disagreement is None


def check_options(
    criterion: str,
    unlabelled_dev_set: object | None,
    max_disagreement: float | None,
    *,
    selection: str,
    confirm: float,
    ray: str | None,
    dev_options: list[str] | None = None,
) -> None:
    """The criterion's options, before any set is read: no option of one criterion given with the other.
    ``dev_options``: the labelled dev set's options the user gave (``--dev-set``, ``--dev-per-condition``), which
    a given budget leaves unread."""
    if criterion not in SEARCH_DEV_CRITERIA:
        raise WorkbenchError(
            f"--dev-criterion must be one of {', '.join(SEARCH_DEV_CRITERIA)}, not {criterion!r}"
        )
    if criterion != DISAGREEMENT:
        given = [
            flag
            for flag, value in (
                ("--unlabelled-dev-set", unlabelled_dev_set),
                ("--max-disagreement", max_disagreement),
            )
            if value is not None
        ]
        if given:
            raise WorkbenchError(
                f"{' and '.join(given)} judge plans by disagreement with FP32; add --dev-criterion {DISAGREEMENT} "
                f"(the search judges the WER delta on --dev-set with --dev-criterion {criterion})"
            )
        return
    if unlabelled_dev_set is None:
        raise WorkbenchError(
            f"--dev-criterion {DISAGREEMENT} judges plans on audio without transcripts: give --unlabelled-dev-set "
            "NAME (a set imported with data import --role unlabelled)"
        )
    if max_disagreement is not None and not (math.isfinite(max_disagreement) and max_disagreement > 0):
        raise WorkbenchError(
            f"--max-disagreement is points of FP32's words: give a number above 0, not {max_disagreement:g}"
        )
    if max_disagreement is not None and dev_options:
        raise WorkbenchError(
            f"{' and '.join(dev_options)} name the labelled dev set the disagreement budget is calibrated on; "
            "--max-disagreement gives the budget, so it would go unread: drop one or the other"
        )
    if selection == "confirm" or confirm:
        raise WorkbenchError(
            f"--dev-criterion {DISAGREEMENT} does not combine with --selection confirm or --confirm; use "
            "--selection as-read or shrink"
        )
    if ray is not None:
        raise WorkbenchError(f"--dev-criterion {DISAGREEMENT} runs without --ray; drop --ray")


def check_unlabelled_dev(speech_set: SpeechSet, calib_set: SpeechSet | None) -> SpeechSet:
    """The unlabelled dev set: refused when it carries transcripts or is the calibration set."""
    require_unlabelled(speech_set, "--unlabelled-dev-set")
    if calib_set is not None and speech_set.content_hash == calib_set.content_hash:
        raise WorkbenchError(
            f"--unlabelled-dev-set {speech_set.name} is the calibration set, whose clips set the scales the search "
            "judges; give audio the model was not calibrated on"
        )
    return speech_set


def require_words(evaluator: DevEvaluator, set_name: str) -> DevEvaluator:
    """Refuse audio on which FP32 transcribes no word: disagreement would have nothing to count."""
    if evaluator.baseline.overall.reference_words == 0:
        raise WorkbenchError(
            f"FP32 transcribes no word of {set_name} ({len(evaluator.utterances)} clips): silent or unintelligible "
            "audio gives disagreement nothing to count; give audio with speech"
        )
    return evaluator


def given_budget(points: float, gates: GateConfig) -> DisagreementBudget:
    """``--max-disagreement``: ``points`` overall, each condition's budget scaled as the gates scale."""
    scale = (
        gates.max_condition_wer_delta_points / gates.max_wer_delta_points
        if gates.max_wer_delta_points > 0
        else 1.0
    )
    return DisagreementBudget(points, points * scale, "given")


def calibrated_budget(
    wer: Evaluation, disagreement: Evaluation, gates: GateConfig, dev_name: str
) -> DisagreementBudget:
    """The budget from INT8 everywhere's whole-set readings on the labelled dev set: ``wer`` (against the labels)
    and ``disagreement`` (against FP32); each gate divided by judged WER delta / judged disagreement."""
    wer_high, dis_high = wer.judged.get("overall"), disagreement.judged.get("overall")
    advice = "give the budget with --max-disagreement POINTS, or a dev set on which INT8 everywhere loses"
    if dis_high is None or not math.isfinite(dis_high) or dis_high <= 0:
        raise WorkbenchError(
            f"INT8 everywhere changes none of FP32's words on the dev set {dev_name}: no ratio of WER delta to "
            f"disagreement to calibrate the budget with; {advice}"
        )
    if wer_high is None or not math.isfinite(wer_high) or wer_high <= 0:
        shown = "none" if wer_high is None or not math.isfinite(wer_high) else f"{wer_high:+.2f} points"
        raise WorkbenchError(
            f"INT8 everywhere's judged WER delta on the dev set {dev_name} is {shown}: no positive ratio of WER delta "
            f"to disagreement to calibrate the budget with; {advice}"
        )
    ratio = wer_high / dis_high
    delta, dis = wer.overall.delta, disagreement.overall.delta
    calibration = {
        "plan": wer.plan.name,
        "dev_set": dev_name,
        "utterances": wer.utterances,
        "judged_wer_delta_high": wer_high,
        "judged_disagreement_high": dis_high,
        "wer_delta": None if delta is None else delta.estimate * 100.0,
        "disagreement": None if dis is None else dis.estimate * 100.0,
        "ratio": ratio,
        "rule": "each budget = its gate / ratio, ratio = judged WER delta / judged disagreement of INT8 everywhere "
        "on the labelled dev set (whole set, the search's confidence and sign-off widening)",
        "assumption": ASSUMPTION,
    }
    return DisagreementBudget(
        gates.max_wer_delta_points / ratio,
        gates.max_condition_wer_delta_points / ratio,
        "calibrated",
        calibration,
    )


def calibrate(
    make: Callable[[bool], DevEvaluator], int8_everywhere: PrecisionPlan, gates: GateConfig, dev_name: str
) -> DisagreementBudget:
    """Read ``int8_everywhere`` on the labelled dev set with ``make(False)`` (WER vs the labels) and ``make(True)``
    (disagreement vs FP32; each evaluator judges the whole set), and calibrate the budget from the two."""
    wer = make(False).evaluate(int8_everywhere)
    disagreement = require_words(make(True), f"the dev set {dev_name}").evaluate(int8_everywhere)
    return calibrated_budget(wer, disagreement, gates, dev_name)


def criterion_json(
    budget: DisagreementBudget | None,
    unlabelled: SpeechSet | None = None,
    evaluator: DevEvaluator | None = None,
) -> dict[str, Any]:
    """What the search record says of its criterion (``{"criterion": "wer"}`` without a budget)."""
    if budget is None or unlabelled is None:
        return {"criterion": "wer"}
    speakers = len({u.speaker for u in evaluator.utterances}) if evaluator is not None else None
    return {
        "criterion": DISAGREEMENT,
        "unlabelled_dev_set": {
            "name": unlabelled.name,
            "path": str(unlabelled.path),
            "content_hash": unlabelled.content_hash,
            "utterances": len(evaluator.utterances) if evaluator is not None else len(unlabelled.utterances),
            "speakers": speakers,
            "fp32_words": evaluator.baseline.overall.reference_words if evaluator is not None else None,
        },
        "budget": budget.to_json(),
        "rule": RULE,
        "scored_against": SCORED_AGAINST,
        "signoff_forecast": "not made: the pass-chance forecast needs WER deltas, and disagreement is not one",
    }


def budget_line(budget: DisagreementBudget, evaluator: DevEvaluator, set_name: str) -> str:
    """The criterion and budget in one log line."""
    held = evaluator.gates
    source = (
        f"calibrated: ratio {budget.calibration['ratio']:.3f} of INT8 everywhere's judged WER delta to its judged "
        f"disagreement on {budget.calibration['dev_set']}"
        if budget.calibration
        else "given by --max-disagreement"
    )
    return (
        f"criterion: disagreement with FP32 on the unlabelled dev set {set_name} ({len(evaluator.utterances)} clips, "
        f"{evaluator.baseline.overall.reference_words} FP32 words); budget {budget.overall:.2f} points of FP32's words "
        f"overall, {budget.condition:.2f} per condition ({source}), judged against {held.max_wer_delta_points:.2f} / "
        f"{held.max_condition_wer_delta_points:.2f} on the upper end of the sign-off's interval as the dev interval "
        "predicts it"
    )


def summary_line(criterion: dict[str, Any]) -> str:
    """The search summary's line for a record judged by disagreement (``criterion_json``'s output)."""
    budget, unlabelled = criterion["budget"], criterion["unlabelled_dev_set"]
    calibration = budget.get("calibration")
    source = (
        f"calibrated on {calibration['dev_set']}: INT8 everywhere judged {calibration['judged_wer_delta_high']:+.2f} "
        f"WER points at {calibration['judged_disagreement_high']:.2f} disagreement points, ratio "
        f"{calibration['ratio']:.3f}"
        if calibration
        else "given"
    )
    return (
        f"judged on disagreement with FP32 on the unlabelled dev set {unlabelled['name']} ({unlabelled['utterances']} "
        f"clips): budget {budget['max_disagreement_points']:.2f} points of FP32's words overall, "
        f"{budget['max_condition_disagreement_points']:.2f} per condition ({source})"
    )

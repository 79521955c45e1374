"""Whether an evaluation set holds enough evidence for a PASS: speakers and reference words per judged group.

The error-rate gates judge the upper end of a speaker-block bootstrap interval. On a handful of speakers that
interval collapses (a third of the resamples leave out any one speaker, so one end lands on 0.00) and a plan passes
on no evidence. So a candidate passes only where each judged group (overall and every condition) holds at least
``EvidenceConfig.min_speakers`` speakers and ``EvidenceConfig.min_reference_words`` reference words, and where its
paired interval did not collapse to zero width while its errors differ from the baseline's on some utterance. A candidate that
fails nothing but this rule is ``insufficient evidence`` (never PASS); its checks say how many speakers and words
are missing. With no speaker known the bootstrap resamples utterances, and the rule counts utterances in their place
(the record says so).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from workbench.config import EVIDENCE, EvidenceConfig
from workbench.evaluate.accuracy import AccuracyComparison, GroupScore
from workbench.evaluate.bootstrap import UNKNOWN_SPEAKERS
from workbench.evaluate.gates import CandidateVerdict, Check
from workbench.speech.records import Utterance

RULE = (
    "a PASS needs, overall and in every condition, at least {speakers} speakers and {words} reference {unit} "
    "(utterances count as speakers where none is known), and a paired interval that did not collapse to zero width "
    "while the candidate's errors differ from the baseline's; below that the verdict is insufficient evidence"
)


def rule_text(config: EvidenceConfig = EVIDENCE, unit: str = "wer") -> str:
    """The rule in words, for the record and the report."""
    return RULE.format(
        speakers=config.min_speakers,
        words=config.min_reference_words,
        unit="characters" if unit == "cer" else "words",
    )


@dataclass(frozen=True)
class GroupEvidence:
    """What one judged group holds: speakers (utterances where none is known), reference words, utterances."""

    group: str
    speakers: int
    speakers_known: bool
    reference_words: int
    utterances: int

    def missing(self, config: EvidenceConfig) -> tuple[int, int]:
        """(speakers, reference words) short of the minimums."""
        return (
            max(0, config.min_speakers - self.speakers),
            max(0, config.min_reference_words - self.reference_words),
        )


def group_evidence(utterances: Sequence[Utterance], accuracy: AccuracyComparison) -> dict[str, GroupEvidence]:
    """Per check name (``overall``, ``condition <name>``, as ``workbench.evaluate.gates.judge`` names them) what the
    evaluation set holds, read from the baseline's scores and the utterances' speakers and conditions."""
    base = accuracy.candidates[accuracy.baseline]
    groups: dict[str, list[int]] = {"overall": list(range(len(utterances)))}
    for i, u in enumerate(utterances):
        groups.setdefault(f"condition {u.condition or '-'}", []).append(i)
    out = {}
    for check, idx in groups.items():
        speakers, known = speakers_of([utterances[i] for i in idx])
        out[check] = GroupEvidence(
            check, speakers, known, int(sum(base.scores[i].reference_words for i in idx)), len(idx)
        )
    return out


def speakers_of(utterances: Sequence[Utterance]) -> tuple[int, bool]:
    """How many speakers the rule counts in ``utterances`` and whether they are known (else: the utterances)."""
    speakers = [u.speaker for u in utterances]
    known = bool(speakers) and not any((s or "").strip().lower() in UNKNOWN_SPEAKERS for s in speakers)
    return (len(set(speakers)) if known else len(utterances)), known


def check_groups(utterances: Sequence[Utterance]) -> dict[str, list[Utterance]]:
    """The judged groups of a set, named as the gate checks are (``overall``, ``condition <name>``)."""
    groups: dict[str, list[Utterance]] = {"overall": list(utterances)}
    for u in utterances:
        groups.setdefault(f"condition {u.condition or '-'}", []).append(u)
    return groups


def _collapsed(score: GroupScore) -> bool:
    delta = score.delta
    return delta is not None and math.isfinite(delta.low) and delta.high - delta.low <= 1e-12


def _differs(accuracy: AccuracyComparison, name: str, utterances: Sequence[Utterance], check: str) -> bool:
    base, cand = accuracy.candidates[accuracy.baseline].scores, accuracy.candidates[name].scores
    return any(
        (check == "overall" or check == f"condition {u.condition or '-'}")
        and cand[i].errors != base[i].errors
        for i, u in enumerate(utterances)
    )


def evidence_check(
    evidence: GroupEvidence, collapsed: bool, config: EvidenceConfig = EVIDENCE, unit: str = "wer"
) -> Check:
    """The evidence check of one judged group: passes when the group meets the minimums and its interval did not
    collapse; otherwise it is marked ``insufficient`` and says what would settle it."""
    speakers_short, words_short = evidence.missing(config)
    words = "characters" if unit == "cer" else "words"
    who = "speakers" if evidence.speakers_known else "utterances (no speaker known)"
    held = f"{evidence.speakers} {who}, {evidence.reference_words:,} reference {words}"
    if not speakers_short and not words_short and not collapsed:
        return Check(
            f"evidence {evidence.group}",
            float(evidence.speakers),
            config.min_speakers,
            True,
            f"evidence {evidence.group}: {held}",
        )
    needs = []
    if speakers_short:
        needs.append(f"{speakers_short} more {who.split(' ')[0]}")
    if words_short:
        per = evidence.reference_words / evidence.utterances if evidence.utterances else 0.0
        more = f" (about {math.ceil(words_short / per):,} more utterances)" if per > 0 else ""
        needs.append(f"{words_short:,} more reference {words}{more}")
    if collapsed:
        needs.append("more speakers (the interval collapsed to zero width although the errors differ)")
    needed = None
    if words_short and evidence.utterances:
        needed = evidence.utterances + math.ceil(
            words_short / (evidence.reference_words / evidence.utterances or 1)
        )
    return Check(
        f"evidence {evidence.group}",
        float(evidence.speakers),
        config.min_speakers,
        False,
        f"evidence {evidence.group}: insufficient, {held} (a PASS needs at least {config.min_speakers} and "
        f"{config.min_reference_words:,}); would be settled by {', '.join(needs)}",
        needed,
        insufficient=True,
        missing={"speakers": speakers_short, "reference_words": words_short, "collapsed": collapsed},
    )


def add_evidence_checks(
    verdicts: Sequence[CandidateVerdict],
    accuracy: AccuracyComparison,
    utterances: Sequence[Utterance],
    config: EvidenceConfig = EVIDENCE,
) -> dict[str, GroupEvidence]:
    """Add each judged group's evidence check to every candidate's verdict but the baseline's; returns what each
    group holds (for the record)."""
    held = group_evidence(utterances, accuracy)
    for verdict in verdicts:
        if verdict.candidate == accuracy.baseline or verdict.candidate not in accuracy.candidates:
            continue
        cand = accuracy.candidates[verdict.candidate]
        scores = {"overall": cand.overall, **{f"condition {c}": g for c, g in cand.by("condition").items()}}
        for check, evidence in held.items():
            score = scores.get(check)
            collapsed = (
                score is not None
                and _collapsed(score)
                and _differs(accuracy, verdict.candidate, utterances, check)
            )
            verdict.add(evidence_check(evidence, collapsed, config, accuracy.unit))
    return held

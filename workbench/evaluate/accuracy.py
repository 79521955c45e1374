"""The core accuracy comparison: error rate per candidate, overall and per group, with paired deltas vs baseline.

The error rate is WER or CER (``Scoring.unit``, from the model's vocabulary or ``--error-unit``); the
fields keep the name ``wer`` and ``reference_words`` whatever the unit, and ``unit`` says which it is.

``compare_accuracy`` is the one function; it returns an ``AccuracyComparison`` holding every
per-utterance score, every group's WER interval and every paired delta interval. Report, gates and
dashboard only read its fields.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from workbench.evaluate.bootstrap import Interval, blocks_for, paired_delta_interval, wer_interval
from workbench.evaluate.wer import DEFAULT_SCORING, Scoring, UtteranceErrors, score_utterances
from workbench.speech.records import Utterance

GROUP_KINDS: tuple[str, ...] = ("condition", "accent", "voice")


@dataclass(frozen=True)
class GroupScore:
    """One candidate's WER on one group of utterances (``kind`` overall/condition/accent/voice)."""

    kind: str
    group: str
    utterances: int
    reference_words: int
    substitutions: int
    deletions: int
    insertions: int
    wer: Interval
    delta: Interval | None  # vs the baseline; None for the baseline itself


@dataclass
class CandidateAccuracy:
    name: str
    scores: list[UtteranceErrors]
    overall: GroupScore
    groups: dict[str, dict[str, GroupScore]]  # kind -> group -> score

    def by(self, kind: str) -> dict[str, GroupScore]:
        return self.groups.get(kind, {})


@dataclass
class AccuracyComparison:
    baseline: str
    candidates: dict[str, CandidateAccuracy]
    normalisation: str = DEFAULT_SCORING.normalisation
    level: float = 0.95
    resamples: int = 2000
    seed: int = 0
    bootstrap_unit: str = "utterance"
    notes: list[str] = field(default_factory=list)
    unit: str = "wer"  # error unit: wer (words) or cer (characters)

    @property
    def label(self) -> str:
        return self.unit.upper()

    def to_json(self) -> dict:
        """A plain-JSON view (no per-utterance texts beyond id/ref/hyp/counts)."""

        def group(g: GroupScore) -> dict:
            return {
                "kind": g.kind,
                "group": g.group,
                "utterances": g.utterances,
                "reference_words": g.reference_words,
                "substitutions": g.substitutions,
                "deletions": g.deletions,
                "insertions": g.insertions,
                "wer": g.wer.to_json(),
                "delta": None if g.delta is None else g.delta.to_json(),
            }

        return {
            "baseline": self.baseline,
            "unit": self.unit,
            "normalisation": self.normalisation,
            "level": self.level,
            "resamples": self.resamples,
            "seed": self.seed,
            "bootstrap_unit": self.bootstrap_unit,
            "notes": list(self.notes),
            "candidates": {
                name: {
                    "overall": group(c.overall),
                    "groups": {k: {n: group(g) for n, g in v.items()} for k, v in c.groups.items()},
                    "utterances": [
                        {
                            "id": s.id,
                            "ref": s.reference,
                            "hyp": s.hypothesis,
                            "S": s.substitutions,
                            "D": s.deletions,
                            "I": s.insertions,
                            "N": s.reference_words,
                        }
                        for s in c.scores
                    ],
                }
                for name, c in self.candidates.items()
            },
        }


def _group_score(
    kind: str,
    name: str,
    idx: np.ndarray,
    scores: list[UtteranceErrors],
    base: list[UtteranceErrors] | None,
    speakers: list[str],
    level: float,
    resamples: int,
    seed: int,
) -> GroupScore:
    sel = [scores[i] for i in idx]
    errs = np.array([s.errors for s in sel], dtype=np.float64)
    words = np.array([s.reference_words for s in sel], dtype=np.float64)
    blocks, unit = blocks_for([speakers[i] for i in idx])
    wer = wer_interval(errs, words, blocks, unit=unit, level=level, resamples=resamples, seed=seed)
    delta = None
    if base is not None:
        base_errs = np.array([base[i].errors for i in idx], dtype=np.float64)
        delta = paired_delta_interval(
            base_errs, errs, words, blocks, unit=unit, level=level, resamples=resamples, seed=seed
        )
    return GroupScore(
        kind,
        name,
        len(sel),
        int(words.sum()),
        sum(s.substitutions for s in sel),
        sum(s.deletions for s in sel),
        sum(s.insertions for s in sel),
        wer,
        delta,
    )


def compare_accuracy(
    utterances: Sequence[Utterance],
    hypotheses: Mapping[str, Sequence[str]],
    baseline: str,
    *,
    level: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    group_kinds: Sequence[str] = GROUP_KINDS,
    scoring: Scoring = DEFAULT_SCORING,
) -> AccuracyComparison:
    """Score every candidate's hypotheses against the utterances' texts (normalised and counted by ``scoring``).

    ``hypotheses`` maps candidate name -> one transcript per utterance (same order). The baseline
    (usually FP32) must be one of them; every other candidate gets paired deltas against it, resampled
    with the same blocks (speakers when known) and the same seed.
    """
    if baseline not in hypotheses:
        raise ValueError(f"baseline {baseline!r} is not among the candidates {sorted(hypotheses)}")
    ids = [u.id for u in utterances]
    refs = [u.text for u in utterances]
    speakers = [u.speaker for u in utterances]
    scored = {name: score_utterances(ids, refs, list(hyps), scoring) for name, hyps in hypotheses.items()}
    base_scores = scored[baseline]
    group_index: dict[str, dict[str, np.ndarray]] = {}
    for kind in group_kinds:
        values = [str(getattr(u, kind) or "-") for u in utterances]
        group_index[kind] = {
            v: np.array([i for i, x in enumerate(values) if x == v]) for v in sorted(set(values))
        }
    everything = np.arange(len(utterances))
    _, unit = blocks_for(speakers)
    out: dict[str, CandidateAccuracy] = {}
    for name, scores in scored.items():
        base = None if name == baseline else base_scores
        overall = _group_score("overall", "all", everything, scores, base, speakers, level, resamples, seed)
        groups = {
            kind: {
                g: _group_score(kind, g, idx, scores, base, speakers, level, resamples, seed)
                for g, idx in index.items()
            }
            for kind, index in group_index.items()
        }
        out[name] = CandidateAccuracy(name, scores, overall, groups)
    notes = []
    if unit == "speaker":
        notes.append(
            f"intervals resample whole speakers ({len(set(speakers))} speakers); groups with one "
            "speaker fall back to utterances"
        )
    return AccuracyComparison(
        baseline, out, scoring.normalisation, level, resamples, seed, unit, notes, scoring.unit
    )

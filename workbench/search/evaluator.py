"""Full WER evaluation of a precision plan on a dev set, judged against the WER budget.

The FP32 transcripts of the dev set are made once; each plan's variant is built in memory, transcribed
(greedy CTC, batch 1), scored with ``compare_accuracy`` (paired bootstrap deltas vs FP32 per condition)
and judged by the sign-off gates on the upper end of the paired interval. The dev set must not be the
sign-off evaluation set, so the search does not select on the data that later judges it.

Two corrections make "passes on the dev set" predict "passes the sign-off":

- widening: with ``signoff`` (the sign-off set's utterances; only their speakers and conditions are
  read) each delta interval is judged with its half-widths scaled by sqrt(dev blocks / sign-off
  blocks), per check (overall, each condition). Blocks are what the bootstrap resamples: speakers when
  known, else utterances; a dev set with more speakers than the sign-off set gives narrower intervals
  than the sign-off will see, whatever the utterance counts (never narrowed).
- margin: a share of each gate held back (``SearchConfig.margin``): the candidate passes when the
  judged upper end is within (1 - margin) x the gate, because the dev and sign-off sets are different
  samples and the search keeps the passing candidate with the most INT8.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Sequence

from tqdm import tqdm

from workbench.compare.sensitivity import VariantRunner
from workbench.evaluate.accuracy import CandidateAccuracy, GroupScore, compare_accuracy
from workbench.evaluate.bootstrap import Interval, blocks_for
from workbench.evaluate.gates import GateConfig, judge
from workbench.evaluate.transcribe import transcribe
from workbench.evaluate.wer import Scoring
from workbench.model.description import ModelDescription
from workbench.quantize.plan import PrecisionPlan
from workbench.speech.records import Clip, Utterance

BASELINE = "fp32"


@dataclass
class Evaluation:
    """One plan's WER on the dev set (overall and per condition, with deltas) and its verdict."""

    plan: PrecisionPlan
    passed: bool
    reasons: list[str]
    overall: GroupScore
    per_condition: dict[str, GroupScore]
    mean_ms_per_utterance: float
    utterances: int
    judged: dict[str, float | None] = field(default_factory=dict)  # check -> delta upper end judged (points)

    def wer_json(self) -> dict:
        return {"overall": self.overall.wer.to_json(),
                "per_condition": {c: g.wer.to_json() for c, g in sorted(self.per_condition.items())}}

    def delta_json(self) -> dict | None:
        if self.overall.delta is None:
            return None
        return {"overall": self.overall.delta.to_json(),
                "per_condition": {c: g.delta.to_json() for c, g in sorted(self.per_condition.items())
                                  if g.delta is not None}}

    def latency_json(self) -> dict:
        return {"mean_ms_per_utterance": self.mean_ms_per_utterance, "batch": 1, "utterances": self.utterances,
                "backend": "onnxruntime-cpu"}


def widen_interval(interval: Interval | None, factor: float) -> Interval | None:
    if interval is None or factor == 1.0:
        return interval
    return replace(interval, low=interval.estimate - (interval.estimate - interval.low) * factor,
                   high=interval.estimate + (interval.high - interval.estimate) * factor)


def widened(cand: CandidateAccuracy, factors: dict[str, float]) -> CandidateAccuracy:
    """The candidate with its delta intervals' half-widths multiplied by the factor of their check (``overall``,
    ``condition <name>``; a check not named keeps its interval)."""
    if all(f == 1.0 for f in factors.values()):
        return cand

    def one(g: GroupScore, check: str) -> GroupScore:
        return replace(g, delta=widen_interval(g.delta, factors.get(check, 1.0)))

    groups = {kind: {name: one(g, f"{kind} {name}") for name, g in by.items()} for kind, by in cand.groups.items()}
    return CandidateAccuracy(cand.name, cand.scores, one(cand.overall, "overall"), groups)


def block_counts(utterances: Sequence[Utterance]) -> dict[str, int]:
    """Bootstrap blocks per gate check (``overall``, ``condition <name>``), counted as the sign-off counts them:
    speakers when at least two are known, else utterances."""
    def count(group: Sequence[Utterance]) -> int:
        blocks, _ = blocks_for([u.speaker for u in group])
        return len(set(blocks.tolist()))

    conditions = sorted({str(u.condition or "-") for u in utterances})
    return {"overall": count(utterances),
            **{f"condition {c}": count([u for u in utterances if str(u.condition or "-") == c]) for c in conditions}}


def widening_factors(dev: Sequence[Utterance], signoff: Sequence[Utterance]) -> dict[str, float]:
    """Per check: sqrt(dev blocks / sign-off blocks), at least 1; checks the sign-off set lacks are not widened."""
    dev_blocks, signoff_blocks = block_counts(dev), block_counts(signoff)
    return {check: max(1.0, math.sqrt(n / signoff_blocks[check])) if signoff_blocks.get(check) else 1.0
            for check, n in dev_blocks.items()}


def held_back(gates: GateConfig, margin: float) -> GateConfig:
    """The gates the search judges against: each error-rate gate times (1 - margin), no latency gate."""
    return replace(gates, max_latency_ms=None, max_wer_delta_points=gates.max_wer_delta_points * (1.0 - margin),
                   max_condition_wer_delta_points=gates.max_condition_wer_delta_points * (1.0 - margin))


class DevEvaluator:
    """Evaluates plans on ``clips`` against the FP32 transcripts of the same clips."""

    def __init__(self, variants: VariantRunner, clips: list[Clip], gates: GateConfig, resamples: int = 1000,
                 seed: int = 0, progress: bool = True, signoff: Sequence[Utterance] | None = None, *,
                 model: ModelDescription, margin: float = 0.0) -> None:
        if not 0.0 <= margin < 1.0:
            raise ValueError(f"margin must be in [0, 1), got {margin}")
        self.variants = variants
        self.model = model  # features, vocabulary, text normaliser and error unit
        self.scoring = Scoring.for_model(model)
        self.clips = clips
        self.utterances = [c.utterance for c in clips]
        # judge as if on the sign-off set: per check, interval half-widths x sqrt(dev blocks / sign-off blocks)
        self.widening = widening_factors(self.utterances, signoff) if signoff else {}
        self.widen = self.widening.get("overall", 1.0)
        self.margin = margin
        self.gates = held_back(gates, margin)  # the search judges WER; latency is recorded
        self.resamples = resamples
        self.seed = seed
        self.progress = progress
        self.count = 0
        self.baseline_texts, self.baseline_seconds = self._transcribe(PrecisionPlan(BASELINE))
        self.baseline = self._score(PrecisionPlan(BASELINE), self.baseline_texts, self.baseline_seconds,
                                    count=False)

    def _transcribe(self, plan: PrecisionPlan) -> tuple[list[str], float]:
        audios = tqdm((c.audio for c in self.clips), total=len(self.clips), desc=f"WER {plan.name}",
                      unit="utt", leave=False, disable=not self.progress)
        result = transcribe(self.variants.runner(plan), audios, self.model, plan.name)
        return result.texts, result.seconds

    def _score(self, plan: PrecisionPlan, texts: list[str], seconds: float, count: bool = True) -> Evaluation:
        name = plan.name
        hyps = {BASELINE: self.baseline_texts} if name == BASELINE else {BASELINE: self.baseline_texts, name: texts}
        accuracy = compare_accuracy(self.utterances, hyps, BASELINE, resamples=self.resamples, seed=self.seed,
                                    group_kinds=("condition",), scoring=self.scoring)
        cand = accuracy.candidates[name]
        judged = replace(accuracy, candidates={**accuracy.candidates, name: widened(cand, self.widening)})
        verdict = next(v for v in judge(judged, None, self.gates) if v.candidate == name)
        if count:
            self.count += 1
        return Evaluation(plan, verdict.passed, verdict.reasons, cand.overall, dict(cand.by("condition")),
                          1000.0 * seconds / max(1, len(self.clips)), len(self.clips),
                          {c.name: c.value for c in verdict.checks})

    def evaluate(self, plan: PrecisionPlan) -> Evaluation:
        """One full WER evaluation (counted in ``count``)."""
        if plan.name == BASELINE:
            plan = replace(plan, name=f"{BASELINE}-plan")
        plan = plan.with_guard(self.variants.guard)  # recorded with the FP32 nodes the variant really has
        texts, seconds = self._transcribe(plan)
        return self._score(plan, texts, seconds)

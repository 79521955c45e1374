"""Full WER evaluation of a precision plan on a dev set, judged against the WER budget.

The FP32 transcripts of the dev set are made once; each plan's variant is built in memory, transcribed
(greedy CTC, batch 1), scored with ``compare_accuracy`` (paired bootstrap deltas vs FP32 per condition)
and judged by the sign-off gates on the upper end of the paired interval. The dev set must not be the
sign-off evaluation set (default: the calibration set), so the search does not select on the data that
later judges it. The dev set is usually larger than the sign-off set, so its intervals are narrower;
with ``signoff_utterances`` the delta intervals are judged with their half-widths scaled by
sqrt(dev utterances / sign-off utterances) (an approximation of the interval the sign-off will see),
so that a plan passing here has a fair chance of passing there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from tqdm import tqdm

from workbench.compare.sensitivity import VariantRunner
from workbench.evaluate.accuracy import CandidateAccuracy, GroupScore, compare_accuracy
from workbench.evaluate.bootstrap import Interval
from workbench.evaluate.gates import GateConfig, judge
from workbench.evaluate.transcribe import transcribe
from workbench.evaluate.wer import Scoring
from workbench.model.description import ModelDescription
from workbench.quantize.plan import PrecisionPlan
from workbench.speech.records import Clip

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


def widened(cand: CandidateAccuracy, factor: float) -> CandidateAccuracy:
    """The candidate with every delta interval's half-widths multiplied by ``factor`` (1: unchanged)."""
    if factor == 1.0:
        return cand

    def one(g: GroupScore) -> GroupScore:
        return replace(g, delta=widen_interval(g.delta, factor))

    groups = {kind: {name: one(g) for name, g in by.items()} for kind, by in cand.groups.items()}
    return CandidateAccuracy(cand.name, cand.scores, one(cand.overall), groups)


class DevEvaluator:
    """Evaluates plans on ``clips`` against the FP32 transcripts of the same clips."""

    def __init__(self, variants: VariantRunner, clips: list[Clip], gates: GateConfig, resamples: int = 1000,
                 seed: int = 0, progress: bool = True, signoff_utterances: int | None = None, *,
                 model: ModelDescription) -> None:
        self.variants = variants
        self.model = model  # features, vocabulary, text normaliser and error unit
        self.scoring = Scoring.for_model(model)
        # judge as if on a set of ``signoff_utterances``: interval half-widths x sqrt(dev size / that size)
        self.widen = max(1.0, math.sqrt(len(clips) / signoff_utterances)) if signoff_utterances else 1.0
        self.clips = clips
        self.utterances = [c.utterance for c in clips]
        self.gates = replace(gates, max_latency_ms=None)  # the search judges WER; latency is recorded
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
        judged = replace(accuracy, candidates={**accuracy.candidates, name: widened(cand, self.widen)})
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

"""Full WER evaluation of a precision plan on a dev set, judged against the WER budget.

The FP32 transcripts of the dev set are made once; each plan's variant is built in memory, transcribed
(length-bucketed batches, chunked and decoded as the ``InferenceConfig`` says: greedy CTC by default), scored
with ``compare_accuracy`` (paired bootstrap deltas vs FP32 per condition) and judged by the sign-off gates on
the upper end of the paired interval. With ``blocks`` > 1 the evidence is bought sequentially
(``workbench.search.sequential``): a plan is judged on a first block of the dev set and more blocks are
transcribed only while its judged interval straddles the gate. The dev set must not be the
sign-off evaluation set, so the search does not select on the data that later judges it. With ``against_fp32`` the
references are FP32's own transcripts of the clips (audio without labels): a plan's "WER" is then its disagreement
with FP32 (``workbench.search.disagreement``).

The search keeps the plan with the most INT8 that passes, so "passes on the dev set" must predict
"passes the sign-off", which judges the same gates on another set (other speakers and texts). Each
check (overall, each condition) is judged on the dev interval turned into a prediction of the
sign-off's interval:

- widening: with ``signoff`` (the sign-off set's utterances; only their speakers and conditions are
  read) the half-widths are scaled by sqrt(dev blocks / sign-off blocks), never narrowed. Blocks are
  what the bootstrap resamples: speakers when known, else utterances; a dev set with more speakers
  than the sign-off set gives narrower intervals than the sign-off will see.
- shift for a sign-off pass with probability ``confidence`` (``SearchConfig.confidence``): the
  sign-off's estimate is another sample, off the dev estimate by a normal error with standard error
  ``se_dev * sqrt(1 + dev blocks / sign-off blocks)`` (``se_dev`` from the dev interval's width), so
  both ends move out by ``z(confidence)`` times that. A plan that changes many transcripts (a wide
  interval) needs a larger lead than one that changes few, however close its estimate is to zero.
  Without ``signoff`` the sign-off set is taken to be like the dev set (ratio 1, no widening).
- margin: an optional share of each gate held back on top (``SearchConfig.margin``, default 0).

On the demo (session 5) a plan judged with the widening and a fixed margin of 1/3 of the gate passed
the sign-off in one run of two; docs/compare-and-search.md has the runs.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass, field, replace
from statistics import NormalDist

from tqdm import tqdm

from workbench.compare.sensitivity import VariantRunner
from workbench.config import SEARCH
from workbench.evaluate.accuracy import CandidateAccuracy, GroupScore, compare_accuracy
from workbench.evaluate.bootstrap import Interval, blocks_for
from workbench.evaluate.gates import GateConfig, judge
from workbench.evaluate.inference import GREEDY, InferenceConfig
from workbench.evaluate.transcribe import transcribe
from workbench.evaluate.wer import Scoring
from workbench.model.description import ModelDescription
from workbench.quantize.plan import PrecisionPlan
from workbench.search.failure_words import why_it_fails
from workbench.search.sequential import (
    balanced_order,
    block_ends,
    covering_ends,
    pass_chance,
    run_sequential,
    side_of_gate,
)
from workbench.search.transcripts import PlanSession, TranscriptCache, clip_key
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
    evidence: dict = field(
        default_factory=dict
    )  # sequential evidence: utterances used, looks, why it stopped
    batch_size: int = 1
    # the predictive chance that the whole dev set passes every check, as the last look saw it (None: futility off,
    # or the last look judged the whole set)
    whole_set_chance: float | None = None
    failure: str = ""  # why it fails, in words (``failure_words.why_it_fails``); empty when it passes

    def wer_json(self) -> dict:
        return {
            "overall": self.overall.wer.to_json(),
            "per_condition": {c: g.wer.to_json() for c, g in sorted(self.per_condition.items())},
        }

    def delta_json(self) -> dict | None:
        if self.overall.delta is None:
            return None
        return {
            "overall": self.overall.delta.to_json(),
            "per_condition": {
                c: g.delta.to_json() for c, g in sorted(self.per_condition.items()) if g.delta is not None
            },
        }

    def latency_json(self) -> dict:
        return {
            "mean_ms_per_utterance": self.mean_ms_per_utterance,
            "batch": self.batch_size,
            "utterances": self.utterances,
            "backend": "onnxruntime-cpu",
        }


def predicted_interval(interval: Interval | None, ratio: float, z_pass: float) -> Interval | None:
    """The sign-off's interval as the dev ``interval`` predicts it: half-widths times max(1, sqrt(ratio)), then
    both ends moved out by ``z_pass`` standard errors of the difference between the two sets' estimates
    (``ratio``: dev bootstrap blocks / sign-off blocks)."""
    if interval is None or not (math.isfinite(interval.low) and math.isfinite(interval.high)):
        return interval
    if ratio == 1.0 and z_pass == 0.0:
        return interval
    spread = max(1.0, math.sqrt(ratio))
    z_level = NormalDist().inv_cdf(0.5 + interval.level / 2.0)
    shift = z_pass * (interval.high - interval.low) / (2.0 * z_level) * math.sqrt(1.0 + ratio)
    return replace(
        interval,
        low=interval.estimate - (interval.estimate - interval.low) * spread - shift,
        high=interval.estimate + (interval.high - interval.estimate) * spread + shift,
    )


def predicted(cand: CandidateAccuracy, ratios: dict[str, float], z_pass: float) -> CandidateAccuracy:
    """The candidate with each delta interval replaced by its predicted sign-off interval (``ratios`` per
    check: ``overall``, ``condition <name>``; a check not named has ratio 1)."""
    if z_pass == 0.0 and all(r == 1.0 for r in ratios.values()):
        return cand

    def one(g: GroupScore, check: str) -> GroupScore:
        return replace(g, delta=predicted_interval(g.delta, ratios.get(check, 1.0), z_pass))

    groups = {
        kind: {name: one(g, f"{kind} {name}") for name, g in by.items()} for kind, by in cand.groups.items()
    }
    return CandidateAccuracy(cand.name, cand.scores, one(cand.overall, "overall"), groups)


def whole_set_span(interval: Interval, ratio: float, z_pass: float, fraction: float) -> tuple[float, float]:
    """``(se, span)`` in points: the standard error a prefix's ``interval`` implies and how far above its estimate
    the whole dev set's judged upper end will lie (``predicted_interval``'s upper half-span at the search's
    confidence, narrowed by sqrt(``fraction``), the prefix's share of the dev set)."""
    z_level = NormalDist().inv_cdf(0.5 + interval.level / 2.0)
    se = (interval.high - interval.low) / (2.0 * z_level) * 100.0
    upper = (interval.high - interval.estimate) * 100.0
    span = upper * max(1.0, math.sqrt(ratio)) + z_pass * se * math.sqrt(1.0 + ratio)
    return se, span * math.sqrt(fraction)


def block_counts(utterances: Sequence[Utterance]) -> dict[str, int]:
    """Bootstrap blocks per gate check (``overall``, ``condition <name>``), counted as the sign-off counts them:
    speakers when at least two are known, else utterances."""

    def count(group: Sequence[Utterance]) -> int:
        blocks, _ = blocks_for([u.speaker for u in group])
        return len(set(blocks.tolist()))

    conditions = sorted({str(u.condition or "-") for u in utterances})
    return {
        "overall": count(utterances),
        **{
            f"condition {c}": count([u for u in utterances if str(u.condition or "-") == c])
            for c in conditions
        },
    }


def block_ratios(dev: Sequence[Utterance], signoff: Sequence[Utterance]) -> dict[str, float]:
    """Per check: dev blocks / sign-off blocks; checks the sign-off set lacks get 1."""
    dev_blocks, signoff_blocks = block_counts(dev), block_counts(signoff)
    return {
        check: n / signoff_blocks[check] if signoff_blocks.get(check) else 1.0
        for check, n in dev_blocks.items()
    }


def widening_factors(ratios: dict[str, float]) -> dict[str, float]:
    """Per check: the half-width factor max(1, sqrt(ratio))."""
    return {check: max(1.0, math.sqrt(r)) for check, r in ratios.items()}


def pass_quantile(confidence: float) -> float:
    """z such that a normal error stays below z standard errors with probability ``confidence`` (0 at 0.5)."""
    if not 0.5 <= confidence < 1.0:
        raise ValueError(f"confidence must be in [0.5, 1), got {confidence}")
    return NormalDist().inv_cdf(confidence)


def held_back(gates: GateConfig, margin: float) -> GateConfig:
    """The gates the search judges against: each error-rate gate times (1 - margin), no latency gate."""
    return replace(
        gates,
        max_latency_ms=None,
        max_wer_delta_points=gates.max_wer_delta_points * (1.0 - margin),
        max_condition_wer_delta_points=gates.max_condition_wer_delta_points * (1.0 - margin),
    )


class DevEvaluator:
    """Evaluates plans on ``clips`` against the FP32 transcripts of the same clips."""

    def __init__(
        self,
        variants: VariantRunner,
        clips: list[Clip],
        gates: GateConfig,
        resamples: int = 1000,
        seed: int = 0,
        progress: bool = True,
        signoff: Sequence[Utterance] | None = None,
        *,
        model: ModelDescription,
        margin: float = 0.0,
        confidence: float = 0.5,
        blocks: int = 1,
        batch_size: int = 1,
        inference: InferenceConfig = GREEDY,
        transcriber: Callable[[PrecisionPlan, Sequence[int]], list[str]] | None = None,
        futility: float = 0.0,
        transcripts: TranscriptCache | None = None,
        against_fp32: bool = False,
    ) -> None:
        if not 0.0 <= margin < 1.0:
            raise ValueError(f"margin must be in [0, 1), got {margin}")
        if not 0.0 <= futility < 0.5:
            raise ValueError(f"futility must be in [0, 0.5), got {futility}")
        self.futility = futility  # give up on a candidate whose whole-set pass chance falls below this
        self.z_pass = pass_quantile(confidence)
        self.variants = variants
        self.model = model  # features, vocabulary, text normaliser and error unit
        self.inference = inference  # chunking and decoder, as the sign-off will judge
        self.scoring = Scoring.for_model(model)
        self.batch_size = batch_size
        # every prefix balanced over conditions and speakers, cut into blocks bought one at a time
        order = balanced_order(
            [str(c.utterance.condition or "-") for c in clips], [c.utterance.speaker for c in clips]
        )
        self.order = order  # the evaluator's clip k is ``clips[order[k]]``
        self.clips = [clips[i] for i in order]
        # (plan, indices into ``clips``) -> texts, e.g. on a Ray cluster (``workbench.cluster.search``); None: here
        self.transcriber = transcriber
        # transcripts shared with the caller's other evaluators (``workbench.search.transcripts``): one-clip batches
        if transcripts is not None and (transcriber is not None or batch_size != 1):
            raise ValueError(
                "a transcript cache needs one-clip batches transcribed here (batch 1, no transcriber)"
            )
        self.transcripts = transcripts
        self._clip_keys = [clip_key(c.audio) for c in self.clips] if transcripts is not None else []
        self.utterances = [c.utterance for c in self.clips]
        # a look judges every condition the set has, on at least SEARCH.min_block utterances
        self.ends = covering_ends(
            block_ends(len(self.clips), blocks),
            [str(u.condition or "-") for u in self.utterances],
            SEARCH.min_block if blocks > 1 else 1,
        )
        self.signoff = list(signoff) if signoff else None
        self._prefix_ratios: dict[int, dict[str, float]] = {}
        # judge the sign-off interval each dev interval predicts: per check, half-widths x sqrt(dev blocks /
        # sign-off blocks) (at least 1), then moved out for a sign-off pass with probability ``confidence``
        self.ratios = block_ratios(self.utterances, signoff) if signoff else {}
        self.widening = widening_factors(self.ratios)
        self.widen = self.widening.get("overall", 1.0)
        self.margin = margin
        self.confidence = confidence
        self.gates = held_back(gates, margin)  # the search judges WER; latency is recorded
        self.resamples = resamples
        self.seed = seed
        self.progress = progress
        self.count = 0
        self.baseline_texts, self.baseline_seconds = self._transcribe_blocks(PrecisionPlan(BASELINE))
        # ``against_fp32``: FP32's own transcripts are the references (audio without labels), so a plan's "WER" is its
        # disagreement with FP32 and FP32's is 0 (``workbench.search.disagreement``)
        self.against_fp32 = against_fp32
        if against_fp32:
            self.utterances = [replace(u, text=t) for u, t in zip(self.utterances, self.baseline_texts)]
        self.baseline = self._score(
            PrecisionPlan(BASELINE), self.baseline_texts, self.baseline_seconds, count=False
        )

    def _session(self, plan: PrecisionPlan) -> PlanSession:
        """``plan``'s variant for one evaluation: its runner opened when a clip is not in the transcript cache."""
        settings = {
            "model": self.model.record(),
            "inference": self.inference.to_json(),
            "batch": self.batch_size,
        }
        return PlanSession(self.variants, plan, self.transcripts, settings)

    def _transcribe(
        self, plan: PrecisionPlan, session: PlanSession | None = None, start: int = 0, end: int | None = None
    ) -> tuple[list[str], float]:
        if self.transcriber is not None:
            began = time.perf_counter()
            texts = self.transcriber(plan, self.order[start:end])
            return texts, time.perf_counter() - began
        end = len(self.clips) if end is None else end
        with ExitStack() as stack:
            session = session or stack.enter_context(self._session(plan))
            if self.transcripts is None or session.key is None:
                return self._run(session, range(start, end))
            cache, key = self.transcripts, session.key
            found = [cache.get(key, self._clip_keys[i]) for i in range(start, end)]
            missing = [start + k for k, entry in enumerate(found) if entry is None]
            if missing:
                texts, seconds = self._run(session, missing)
                for i, text in zip(missing, texts):
                    cache.put(key, self._clip_keys[i], text, seconds / len(missing))
                    found[i - start] = (text, seconds / len(missing))
            entries = [entry for entry in found if entry is not None]
            return [text for text, _ in entries], sum(spent for _, spent in entries)

    def _run(self, session: PlanSession, indices: Sequence[int]) -> tuple[list[str], float]:
        """The plan's transcripts of the clips at ``indices`` (in that order) and the seconds they took."""
        plan = session.plan
        audios = tqdm(
            (self.clips[i].audio for i in indices),
            total=len(indices),
            desc=f"WER {plan.name}",
            unit="utt",
            leave=False,
            disable=not self.progress,
        )
        result = transcribe(
            session.runner(), audios, self.model, plan.name, self.inference, batch_size=self.batch_size
        )
        return result.texts, result.seconds

    def _transcribe_blocks(self, plan: PrecisionPlan) -> tuple[list[str], float]:
        """``plan`` on the whole dev set, one block (``self.ends``) at a time, as ``evaluate`` transcribes a
        candidate: the batches a block is cut into depend on the clips handed over together, and a model without an
        attention mask (GroupNorm encoders) gives a padded clip other logits, so the baseline's batches must be the
        candidates' for a delta to measure precision rather than batching."""
        texts: list[str] = []
        seconds = 0.0
        with nullcontext(None) if self.transcriber is not None else self._session(plan) as session:
            start = 0
            for end in self.ends:
                more, spent = self._transcribe(plan, session, start, end)
                texts.extend(more)
                seconds += spent
                start = end
        return texts, seconds

    def ratios_for(self, n: int) -> dict[str, float]:
        """Dev blocks / sign-off blocks per check for the first ``n`` dev utterances ({} without a sign-off set)."""
        return self._ratios(n)

    def _ratios(self, n: int) -> dict[str, float]:
        """Dev blocks / sign-off blocks per check for the first ``n`` dev utterances."""
        if not self.signoff:
            return {}
        if n not in self._prefix_ratios:
            self._prefix_ratios[n] = block_ratios(self.utterances[:n], self.signoff)
        return self._prefix_ratios[n]

    def _score(
        self,
        plan: PrecisionPlan,
        texts: list[str],
        seconds: float,
        count: bool = True,
        z_pass: float | None = None,
    ) -> Evaluation:
        """Score ``texts`` (the first ``len(texts)`` dev utterances) against FP32 and judge them."""
        evaluation, _ = self._judge(plan, texts, seconds, count, z_pass)
        return evaluation

    def _judge(
        self,
        plan: PrecisionPlan,
        texts: list[str],
        seconds: float,
        count: bool = True,
        z_pass: float | None = None,
    ) -> tuple[Evaluation, str]:
        name = plan.name
        n = len(texts)
        z = self.z_pass if z_pass is None else z_pass
        baseline = self.baseline_texts[:n]
        hyps = {BASELINE: baseline} if name == BASELINE else {BASELINE: baseline, name: texts}
        accuracy = compare_accuracy(
            self.utterances[:n],
            hyps,
            BASELINE,
            resamples=self.resamples,
            seed=self.seed,
            group_kinds=("condition",),
            scoring=self.scoring,
        )
        cand = accuracy.candidates[name]
        forecast = predicted(cand, self._ratios(n), z)
        judged = replace(accuracy, candidates={**accuracy.candidates, name: forecast})
        verdict = next(
            v for v in judge(judged, None, self.gates, advise_evidence=False) if v.candidate == name
        )
        if count:
            self.count += 1
        fraction = n / len(self.clips)
        chances = self._whole_set_chances(cand, fraction) if fraction < 1.0 and self.futility > 0.0 else {}
        evaluation = Evaluation(
            plan,
            verdict.passed,
            verdict.reasons,
            cand.overall,
            dict(cand.by("condition")),
            1000.0 * seconds / max(1, n),
            n,
            {c.name: c.value for c in verdict.checks},
            batch_size=self.batch_size,
            whole_set_chance=min(chances.values()) if chances else None,
            failure=why_it_fails(
                verdict.checks,
                {k: None if d is None else d.estimate * 100 for k, (d, _) in self._checks(forecast).items()},
            ),
        )
        return evaluation, self._side(forecast, math.sqrt(fraction), chances)

    def _checks(self, cand: CandidateAccuracy) -> dict[str, tuple[Interval | None, float]]:
        """Each gate check's delta interval and gate (points): ``overall`` and ``condition <name>``."""
        checks: dict[str, tuple[Interval | None, float]] = {
            "overall": (cand.overall.delta, self.gates.max_wer_delta_points)
        }
        for cond, group in cand.by("condition").items():
            checks[f"condition {cond}"] = (group.delta, self.gates.max_condition_wer_delta_points)
        return checks

    def _whole_set_chances(self, cand: CandidateAccuracy, fraction: float) -> dict[str, float]:
        """Per check, the predictive chance that the whole dev set passes it (``pass_chance``), from the prefix's
        raw dev interval judged as the last look will judge it (the search's confidence, the whole set's
        block ratios)."""
        chances = {}
        for check, (delta, gate) in self._checks(cand).items():
            if delta is None or not (math.isfinite(delta.low) and math.isfinite(delta.high)):
                continue
            se, span = whole_set_span(delta, self.ratios.get(check, 1.0), self.z_pass, fraction)
            chances[check] = pass_chance(delta.estimate * 100.0, se, span, gate, fraction)
        return chances

    def _side(
        self, forecast: CandidateAccuracy, shrink: float = 1.0, chances: dict[str, float] | None = None
    ) -> str:
        """Where the judged intervals lie against the gates (``workbench.search.sequential.side_of_gate``)."""
        if forecast.overall.delta is None:
            return "pass"
        points: dict[str, tuple[float, float, float]] = {}
        for check, (delta, gate) in self._checks(forecast).items():
            if delta is None:
                continue
            estimate, high = delta.estimate * 100.0, delta.high * 100.0
            if not (math.isfinite(estimate) and math.isfinite(high)):
                return "straddles"
            points[check] = (estimate, high, gate)
        return side_of_gate(points, shrink, chances, self.futility)

    def evaluate(self, plan: PrecisionPlan) -> Evaluation:
        """One WER evaluation (counted in ``count``), bought block by block while the judged interval
        straddles the gate; ``Evaluation.evidence`` says how many utterances it used and why it stopped."""
        if plan.name == BASELINE:
            plan = replace(plan, name=f"{BASELINE}-plan")
        plan = plan.with_guard(self.variants.guard)  # recorded with the FP32 nodes the variant really has
        texts: list[str] = []
        spent = [0.0]
        with nullcontext(None) if self.transcriber is not None else self._session(plan) as session:

            def look(end: int, confidence: float) -> tuple[Evaluation, str]:
                more, seconds = self._transcribe(plan, session, len(texts), end)
                texts.extend(more)
                spent[0] += seconds
                return self._judge(plan, list(texts), spent[0], count=False, z_pass=pass_quantile(confidence))

            stopping = run_sequential(look, self.ends, self.confidence)
        self.count += 1
        evaluation = stopping.result
        evaluation.evidence = {
            **stopping.to_json(),
            "block_ratio_per_check": self._ratios(stopping.utterances),  # what the last look was judged with
            "futility": self.futility,
            "whole_set_pass_chance": evaluation.whole_set_chance,  # as the last look saw it
        }
        return evaluation

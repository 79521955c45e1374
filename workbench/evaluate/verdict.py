"""The verdict: which candidate may ship, with latency judged by its uncertainty and on the deployment target.

Latency is compared as each candidate's ratio to the baseline over the paired rounds of an interleaved
measurement (``workbench.evaluate.latency.measure_interleaved``): per (batch, bucket) point the median of the
per-round ratios ``candidate / baseline``, the geometric mean over the buckets at the gate batch, and a
percentile-bootstrap interval (rounds resampled within each point, ``VerdictConfig``). The baseline's ratio is
exactly 1.

Rule (``RULE``): among the candidates that pass the accuracy gates, the *leader* is the one whose ratio
interval has the lowest upper end; every passing candidate whose interval reaches down to that upper end
(intervals overlap) is *equally fast*. One equally fast candidate is the winner; several are a tie, broken by
``TIE_BREAK``: fewest compute layers (MatMul/Gemm/Conv) outside INT8 (FP32 + FP16), then fewest FP32 compute
layers, then the smallest candidate file (weight memory), then the order the candidates were given.

A candidate that fails only the evidence rule (``workbench.evaluate.evidence``: too few speakers or reference words
in a judged group, or a collapsed interval) is never PASS; when no candidate but the baseline passes and some are
short of evidence, the verdict is ``insufficient-evidence`` (never a PASS) with what would settle it.

When latency was not measured, or was measured on a backend other than the deployment target
(``--target``, TensorRT by default), no winner is picked: the verdict is an accuracy sign-off that lists the
candidates passing the WER gates and says that latency on the target is not measured.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from workbench.config import VERDICT, VerdictConfig
from workbench.evaluate.gates import CandidateVerdict
from workbench.evaluate.latency import LatencyResult

RULE = (
    "latency = each candidate's ratio to the baseline (median of paired interleaved rounds per point, "
    "geometric mean over buckets at the gate batch) with a {level:.0%} percentile-bootstrap interval; "
    "candidates whose intervals overlap the leader's (lowest upper end) are equally fast"
)
TIE_BREAK = (
    "equally fast candidates are ranked by fewest FP32+FP16 compute layers (MatMul/Gemm/Conv not in "
    "INT8), then fewest FP32 compute layers, then smallest candidate file (weight memory), then the "
    "order given"
)

SHIP, ACCURACY, NONE = "ship", "accuracy-signoff", "no-pass"
# no candidate but the baseline passes and some failed only the evidence rule (workbench.evaluate.evidence)
INSUFFICIENT = "insufficient-evidence"


@dataclass(frozen=True)
class Ratio:
    """A candidate's latency ratio to the baseline (below 1: faster) and its interval."""

    candidate: str
    estimate: float
    low: float
    high: float
    batch: int
    points: int  # (batch, bucket) points it is built from
    rounds: int  # paired rounds, fewest over those points

    def overlaps(self, other: Ratio) -> bool:
        return self.low <= other.high and other.low <= self.high


@dataclass(frozen=True)
class Candidate:
    """What the tie-break reads: compute-layer precision counts of the candidate and its file size."""

    name: str
    precisions: Mapping[str, int] = field(default_factory=dict)  # int8 / fp16 / fp32 -> compute layers
    file_bytes: int = 0

    def tie_key(self, order: int) -> tuple[int, int, int, int]:
        floating = self.precisions.get("fp32", 0) + self.precisions.get("fp16", 0)
        return floating, self.precisions.get("fp32", 0), self.file_bytes, order


@dataclass
class SignoffDecision:
    """The verdict of a sign-off: ``mode`` ship / accuracy-signoff / no-pass, the recommendation (ship mode
    only), the rule and every number it was decided on."""

    mode: str
    recommendation: str | None
    line: str
    target: str
    measured_on: str | None
    passing: list[str]
    ratios: dict[str, Ratio] = field(default_factory=dict)
    equally_fast: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    rule: str = ""
    tie_break: str = TIE_BREAK
    evidence_rule: str = ""  # the least evidence a PASS needs (workbench.evaluate.evidence)
    insufficient: list[str] = field(default_factory=list)  # candidates that failed only the evidence rule

    def to_json(self) -> dict:
        return {
            "mode": self.mode,
            "recommendation": self.recommendation,
            "line": self.line,
            "target": self.target,
            "measured_on": self.measured_on,
            "passing": list(self.passing),
            "ratios": {n: asdict(r) for n, r in self.ratios.items()},
            "equally_fast": list(self.equally_fast),
            "reasons": list(self.reasons),
            "rule": self.rule,
            "tie_break": self.tie_break,
            "evidence_rule": self.evidence_rule,
            "insufficient_evidence": list(self.insufficient),
        }


def _paired_log_ratios(base: LatencyResult, cand: LatencyResult, batch: int) -> list[np.ndarray]:
    """Per point at ``batch`` (all points when none is at it): log(candidate / baseline) per paired round."""
    chosen = [p for p in base.points if p.batch == batch] or list(base.points)
    out = []
    for point in chosen:
        other = cand.point(point.batch, point.bucket)
        if other is None or not point.samples_ms or not other.samples_ms:
            continue
        n = min(len(point.samples_ms), len(other.samples_ms))
        b = np.asarray(point.samples_ms[:n], dtype=np.float64)
        c = np.asarray(other.samples_ms[:n], dtype=np.float64)
        keep = (b > 0) & (c > 0)
        if keep.any():
            out.append(np.log(c[keep]) - np.log(b[keep]))
    return out


def latency_ratio(
    base: LatencyResult, cand: LatencyResult, batch: int = 1, config: VerdictConfig = VERDICT
) -> Ratio | None:
    """``cand``'s latency ratio to ``base`` with its bootstrap interval; None without paired samples."""
    logs = _paired_log_ratios(base, cand, batch)
    if not logs:
        return None
    rng = np.random.default_rng(config.seed)
    estimate = float(np.mean([np.median(d) for d in logs]))
    boots = np.zeros(config.resamples)
    for d in logs:
        idx = rng.integers(0, d.size, size=(config.resamples, d.size))
        boots += np.median(d[idx], axis=1)
    boots /= len(logs)
    alpha = (1.0 - config.level) / 2.0
    low, high = np.quantile(boots, [alpha, 1.0 - alpha])
    used_batch = batch if any(p.batch == batch for p in base.points) else base.points[0].batch
    return Ratio(
        cand.candidate,
        math.exp(estimate),
        math.exp(float(low)),
        math.exp(float(high)),
        used_batch,
        len(logs),
        min(d.size for d in logs),
    )


def latency_ratios(
    latencies: Mapping[str, LatencyResult], baseline: str, batch: int = 1, config: VerdictConfig = VERDICT
) -> dict[str, Ratio]:
    """Every timed candidate's ratio to ``baseline`` (the baseline's is exactly 1)."""
    if baseline not in latencies:
        return {}
    out = {}
    for name, result in latencies.items():
        if name == baseline:
            points = [p for p in result.points if p.batch == batch] or list(result.points)
            rounds = min((len(p.samples_ms or []) for p in points), default=0)
            used = (
                batch
                if any(p.batch == batch for p in result.points)
                else points[0].batch
                if points
                else batch
            )
            out[name] = Ratio(name, 1.0, 1.0, 1.0, used, len(points), rounds)
            continue
        ratio = latency_ratio(latencies[baseline], result, batch, config)
        if ratio is not None:
            out[name] = ratio
    return out


def _names(names: Sequence[str]) -> str:
    return ", ".join(names) if names else "none"


def decide(
    verdicts: Sequence[CandidateVerdict],
    latencies: Mapping[str, LatencyResult] | None,
    baseline: str,
    candidates: Sequence[Candidate],
    target: str,
    measured_on: str | None,
    batch: int = 1,
    config: VerdictConfig = VERDICT,
    evidence_rule: str = "",
) -> SignoffDecision:
    """The sign-off verdict (see the module docstring for the rule)."""
    decision = _decide(verdicts, latencies, baseline, candidates, target, measured_on, batch, config)
    decision.evidence_rule = evidence_rule
    decision.insufficient = [v.candidate for v in verdicts if v.insufficient]
    if decision.insufficient and not [n for n in decision.passing if n != baseline]:
        short = "; ".join(
            dict.fromkeys(c.detail for v in verdicts if v.insufficient for c in v.checks if c.insufficient)
        )
        decision.mode, decision.recommendation = INSUFFICIENT, None
        decision.line = (
            f"INSUFFICIENT EVIDENCE: {_names(decision.insufficient)} cannot be judged on this set; "
            "no candidate may ship on it"
        )
        decision.reasons = [f"insufficient evidence: {short}", *decision.reasons]
    elif decision.insufficient:
        decision.reasons.append(
            f"insufficient evidence for {_names(decision.insufficient)} (never PASS): see their evidence checks"
        )
    return decision


def _decide(
    verdicts: Sequence[CandidateVerdict],
    latencies: Mapping[str, LatencyResult] | None,
    baseline: str,
    candidates: Sequence[Candidate],
    target: str,
    measured_on: str | None,
    batch: int,
    config: VerdictConfig,
) -> SignoffDecision:
    passing = [v.candidate for v in verdicts if v.passed]
    rule = RULE.format(level=config.level)
    if not passing:
        return SignoffDecision(
            NONE,
            None,
            "NO CANDIDATE PASSES: do not ship",
            target,
            measured_on,
            [],
            rule=rule,
            reasons=["no candidate passes the gates"],
        )
    if not latencies:
        return SignoffDecision(
            ACCURACY,
            None,
            f"ACCURACY SIGN-OFF: {_names(passing)} pass the WER gates; latency not "
            f"measured, no winner picked",
            target,
            measured_on,
            passing,
            rule=rule,
            reasons=["latency was not measured (--no-latency)"],
        )
    ratios = latency_ratios(latencies, baseline, batch, config)
    if measured_on != target:
        return SignoffDecision(
            ACCURACY,
            None,
            f"ACCURACY SIGN-OFF: {_names(passing)} pass the WER gates; latency on the "
            f"target ({target}) not measured (timed on {measured_on}), no winner picked",
            target,
            measured_on,
            passing,
            ratios,
            rule=rule,
            reasons=[
                f"latency was measured on {measured_on}, not on the deployment target {target}: "
                "its ranking says nothing about the target, so it picks nothing"
            ],
        )
    timed = [n for n in passing if n in ratios]
    if not timed:
        return SignoffDecision(
            ACCURACY,
            None,
            f"ACCURACY SIGN-OFF: {_names(passing)} pass the WER gates; no paired "
            "latency rounds to compare, no winner picked",
            target,
            measured_on,
            passing,
            ratios,
            rule=rule,
            reasons=["the passing candidates have no paired latency samples"],
        )
    leader = min(timed, key=lambda n: (ratios[n].high, timed.index(n)))
    equal = [n for n in timed if ratios[n].low <= ratios[leader].high]
    info = {c.name: c for c in candidates}
    order = {c.name: i for i, c in enumerate(candidates)}
    ranked = sorted(equal, key=lambda n: info.get(n, Candidate(n)).tie_key(order.get(n, len(order))))
    choice = ranked[0]
    shown = ", ".join(
        f"{n} x{ratios[n].estimate:.3f} [{ratios[n].low:.3f}, {ratios[n].high:.3f}]" for n in timed
    )
    reasons = [f"latency ratios to {baseline} at batch {ratios[leader].batch}: {shown}"]
    if len(equal) == 1:
        reasons.append(f"{choice} is faster than every other passing candidate beyond the intervals")
    else:
        counts = "; ".join(
            f"{n}: {dict(info.get(n, Candidate(n)).precisions)}, {info.get(n, Candidate(n)).file_bytes} bytes"
            for n in ranked
        )
        reasons.append(
            f"equally fast within noise: {_names(equal)}; tie broken by the stated rule ({counts})"
        )
    return SignoffDecision(
        SHIP, choice, f"SHIP {choice}", target, measured_on, passing, ratios, equal, reasons, rule
    )

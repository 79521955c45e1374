"""Sign-off gates: a small JSON or TOML file of limits, judged on the upper end of paired intervals.

Example (TOML)::

    max_wer_delta_points = 0.3            # overall, percentage points, upper CI end (of CER for CER models)
    max_condition_wer_delta_points = 1.0  # every condition
    max_latency_ms = 50.0                 # optional: p90 at latency_batch, worst bucket
    latency_batch = 1

    [serving]                             # optional: the serving benchmark (signoff --serving)
    p99_ms = 200.0                        # p99 of every request under load
    qps = 20.0                            # at this offered load (omitted: the highest load meeting p99_ms)

The ``[serving]`` table (``workbench.inputs.serving``) also sets the dynamic batcher and the load.

A failing error-rate gate whose estimate lies inside the limit is inconclusive rather than a measured loss: its
check says at about how many utterances the interval's upper end would reach the limit if the estimate held and
the interval narrowed as one over the square root of the utterances, speakers growing in proportion
(``evidence_needed``). Where that is more than ``EVIDENCE_MAX_FACTOR`` (20) times the set, the estimate sits at
the limit and the check says that more data will not settle it (no utterance count): the limit, or the model,
decides, not a bigger set.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from workbench.config import EVIDENCE_MAX_FACTOR
from workbench.evaluate.accuracy import AccuracyComparison, GroupScore
from workbench.evaluate.latency import LatencyResult
from workbench.inputs.gates import FIX, check_gate_values, read_gate_file
from workbench.inputs.problem import Where
from workbench.inputs.serving import ServingConfig, serving_config


@dataclass(frozen=True)
class GateConfig:
    max_wer_delta_points: float = 0.3
    max_condition_wer_delta_points: float = 1.0
    max_latency_ms: float | None = None
    latency_batch: int = 1
    latency_percentile: str = "p90"
    serving: ServingConfig | None = None  # the [serving] table: latency target under load, batcher, load
    # the label-free gates (gate file table ``[unlabelled]``): upper CI end of the disagreement with FP32 and of
    # the bound on the WER delta on every --unlabelled-set, percentage points (``workbench.jobs.label_free``)
    unlabelled_max_disagreement: float | None = None
    unlabelled_max_wer_bound: float | None = None
    # the shift check's margin, percentage points (None: ``LabelFreeDefaults.default_shift_margin``, by set size)
    unlabelled_shift_margin: float | None = None

    def __post_init__(self) -> None:
        check_gate_values({k: v for k, v in asdict(self).items() if k != "serving"}, Where("gates", FIX))

    def to_json(self) -> dict:
        return asdict(self)


def load_gate_config(path: Path | None) -> GateConfig:
    """Read a gate file (``.json`` or ``.toml``); missing keys take the defaults, unknown keys and values of
    the wrong type are errors (``workbench.inputs.gates``)."""
    if path is None:
        return GateConfig()
    flat = [f.name for f in fields(GateConfig) if not f.name.startswith("unlabelled_")]
    table = read_gate_file(Path(path), [*flat, "unlabelled"])
    unlabelled = table.pop("unlabelled", {})
    if "serving" in table:
        table["serving"] = serving_config(table["serving"], Where(f"gate file {path}", FIX).key("serving"))
    return GateConfig(**table, **{f"unlabelled_{k}": v for k, v in unlabelled.items()})


@dataclass(frozen=True)
class Check:
    name: str
    value: float | None
    limit: float
    passed: bool
    detail: str
    needed_utterances: int | None = None  # an inconclusive error-rate gate: the evidence that would settle it
    # an evidence check (workbench.evaluate.evidence) the set did not meet: the verdict is insufficient evidence
    insufficient: bool = False
    missing: dict[str, Any] | None = (
        None  # what an insufficient evidence check lacks (speakers, reference words)
    )


@dataclass
class CandidateVerdict:
    """One candidate's gate checks and whether it passed them all (the sign-off's ``SignoffDecision`` weighs
    every candidate's verdict)."""

    candidate: str
    passed: bool
    checks: list[Check] = field(default_factory=list)

    def add(self, check: Check) -> None:
        """One more check (e.g. the engine's precisions); the verdict passes only if every check does."""
        self.checks.append(check)
        self.passed = self.passed and check.passed

    @property
    def reasons(self) -> list[str]:
        return [c.detail for c in self.checks if not c.passed]

    @property
    def insufficient(self) -> bool:
        """Failed only evidence checks: the set cannot tell, so neither PASS nor FAIL."""
        failed = [c for c in self.checks if not c.passed]
        return bool(failed) and all(c.insufficient for c in failed)

    @property
    def summary(self) -> str:
        if self.passed:
            return "PASS"
        return ("INSUFFICIENT EVIDENCE: " if self.insufficient else "FAIL: ") + "; ".join(self.reasons)

    def to_json(self) -> dict:
        return {
            "candidate": self.candidate,
            "passed": self.passed,
            "insufficient_evidence": self.insufficient,
            "summary": self.summary,
            "checks": [asdict(c) for c in self.checks],
        }


def evidence_needed(
    estimate_points: float, upper_points: float, limit_points: float, utterances: int
) -> int | None:
    """Utterances at which a failing interval's upper end would reach ``limit_points``, were the estimate to hold
    and the interval's upper half to narrow as ``1/sqrt(n)`` (speakers in proportion); None unless the estimate
    lies inside the limit and the upper end beyond it."""
    if not (estimate_points < limit_points < upper_points) or utterances <= 0:
        return None
    return math.ceil(utterances * ((upper_points - estimate_points) / (limit_points - estimate_points)) ** 2)


def _delta_check(
    name: str, score: GroupScore, limit_points: float, label: str = "WER", advise: bool = True
) -> Check:
    delta = score.delta
    if delta is None:
        return Check(name, 0.0, limit_points, True, f"{name}: baseline")
    estimate, upper = delta.estimate * 100.0, delta.high * 100.0
    ok = bool(upper == upper and upper <= limit_points)  # NaN fails
    detail = f"{name}: {label} delta {estimate:+.2f} pts, CI upper {upper:+.2f} pts {'<=' if ok else '>'} {limit_points:.2f}"
    needed = None if ok or not advise else evidence_needed(estimate, upper, limit_points, score.utterances)
    if needed is not None and needed > EVIDENCE_MAX_FACTOR * score.utterances:
        detail += (
            f" (inconclusive: the estimate {estimate:+.2f} sits at the limit {limit_points:.2f}; more data will "
            f"not settle this: it would take more than {EVIDENCE_MAX_FACTOR:g}x these {score.utterances:,} "
            "utterances)"
        )
        return Check(name, upper, limit_points, ok, detail, None)
    if needed is not None:
        detail += (
            f" (inconclusive: the estimate is inside the limit; at about {needed:,} utterances, "
            f"{needed / score.utterances:.1f}x these {score.utterances:,} with speakers in proportion, the upper "
            "end would reach it if the estimate held)"
        )
    return Check(name, upper, limit_points, ok, detail, needed)


def _output_check(name: str, accuracy: AccuracyComparison) -> Check | None:
    """A failing check when the transcripts themselves say the measurement is broken: this candidate or the
    baseline wrote no text on any utterance (an error rate of exactly 100 %, all deletions). Equal deltas between
    broken outputs (every candidate empty under a broken decoder setting) must never read as a pass; None when
    sane. An error rate above 100 % with text is a bad model, judged by the deltas as usual. A comparison that holds
    only the candidate's scores (the search's forecasts) checks the candidate alone."""
    for who in dict.fromkeys((name, accuracy.baseline)):
        cand = accuracy.candidates.get(who)
        if cand is None:
            continue
        role = "the baseline" if who == accuracy.baseline else "it"
        texts = [s.hypothesis for s in cand.scores]
        if texts and not any(t.strip() for t in texts):
            return Check(
                "transcripts",
                None,
                0.0,
                False,
                f"transcripts: {role} ({who}) wrote no text on any of {len(texts):,} utterances; an input outside "
                "its domain (decoder settings, blank penalty, audio) breaks every candidate alike, so no delta is "
                "evidence",
            )
    return None


def judge(
    accuracy: AccuracyComparison,
    latencies: dict[str, LatencyResult] | None,
    gates: GateConfig,
    advise_evidence: bool = True,
) -> list[CandidateVerdict]:
    """PASS/FAIL per candidate with one check per gate; the baseline is judged on latency only.

    The error-rate gates apply to the comparison's unit (WER, or CER for character languages). With
    ``advise_evidence`` an inconclusive error-rate check says how much evidence would settle it; the search, whose
    intervals are forecasts of the sign-off's, turns that off."""
    verdicts = []
    label = accuracy.label
    for name, cand in accuracy.candidates.items():
        checks = [_delta_check("overall", cand.overall, gates.max_wer_delta_points, label, advise_evidence)]
        broken = _output_check(name, accuracy)
        if broken is not None:
            checks.append(broken)
        for cond, score in cand.by("condition").items():
            checks.append(
                _delta_check(
                    f"condition {cond}", score, gates.max_condition_wer_delta_points, label, advise_evidence
                )
            )
        if gates.max_latency_ms is not None:
            lat = (latencies or {}).get(name)
            pts = [] if lat is None else [p for p in lat.points if p.batch == gates.latency_batch]
            if not pts:
                checks.append(
                    Check(
                        "latency",
                        None,
                        gates.max_latency_ms,
                        False,
                        f"latency: no measurement at batch {gates.latency_batch}",
                    )
                )
            else:
                worst = max(getattr(p, f"{gates.latency_percentile}_ms") for p in pts)
                ok = worst <= gates.max_latency_ms
                checks.append(
                    Check(
                        "latency",
                        worst,
                        gates.max_latency_ms,
                        ok,
                        f"latency: {gates.latency_percentile} {worst:.1f} ms at batch "
                        f"{gates.latency_batch} (worst bucket) {'<=' if ok else '>'} "
                        f"{gates.max_latency_ms:.1f} ms",
                    )
                )
        verdicts.append(CandidateVerdict(name, all(c.passed for c in checks), checks))
    return verdicts

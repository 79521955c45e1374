"""Sign-off gates: a small JSON or TOML file of limits, judged on the upper end of paired intervals.

Example (TOML)::

    max_wer_delta_points = 0.3            # overall, percentage points, upper CI end (of CER for CER models)
    max_condition_wer_delta_points = 1.0  # every condition
    max_latency_ms = 50.0                 # optional: p90 at latency_batch, worst bucket
    latency_batch = 1
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from workbench.evaluate.accuracy import AccuracyComparison
from workbench.evaluate.latency import LatencyResult
from workbench.inputs.gates import FIX, check_gate_values, read_gate_file
from workbench.inputs.problem import Where


@dataclass(frozen=True)
class GateConfig:
    max_wer_delta_points: float = 0.3
    max_condition_wer_delta_points: float = 1.0
    max_latency_ms: float | None = None
    latency_batch: int = 1
    latency_percentile: str = "p90"

    def __post_init__(self) -> None:
        check_gate_values(asdict(self), Where("gates", FIX))

    def to_json(self) -> dict:
        return asdict(self)


def load_gate_config(path: Path | None) -> GateConfig:
    """Read a gate file (``.json`` or ``.toml``); missing keys take the defaults, unknown keys and values of
    the wrong type are errors (``workbench.inputs.gates``)."""
    if path is None:
        return GateConfig()
    return GateConfig(**read_gate_file(Path(path), [f.name for f in fields(GateConfig)]))


@dataclass(frozen=True)
class Check:
    name: str
    value: float | None
    limit: float
    passed: bool
    detail: str


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
    def summary(self) -> str:
        return "PASS" if self.passed else "FAIL: " + "; ".join(self.reasons)

    def to_json(self) -> dict:
        return {
            "candidate": self.candidate,
            "passed": self.passed,
            "summary": self.summary,
            "checks": [asdict(c) for c in self.checks],
        }


def _delta_check(name: str, delta, limit_points: float, label: str = "WER") -> Check:
    if delta is None:
        return Check(name, 0.0, limit_points, True, f"{name}: baseline")
    upper = delta.high * 100.0
    ok = bool(upper == upper and upper <= limit_points)  # NaN fails
    return Check(
        name,
        upper,
        limit_points,
        ok,
        f"{name}: {label} delta {delta.estimate * 100:+.2f} pts, CI upper {upper:+.2f} pts "
        f"{'<=' if ok else '>'} {limit_points:.2f}",
    )


def judge(
    accuracy: AccuracyComparison, latencies: dict[str, LatencyResult] | None, gates: GateConfig
) -> list[CandidateVerdict]:
    """PASS/FAIL per candidate with one check per gate; the baseline is judged on latency only.

    The error-rate gates apply to the comparison's unit (WER, or CER for character languages)."""
    verdicts = []
    label = accuracy.label
    for name, cand in accuracy.candidates.items():
        checks = [_delta_check("overall", cand.overall.delta, gates.max_wer_delta_points, label)]
        for cond, score in cand.by("condition").items():
            checks.append(
                _delta_check(f"condition {cond}", score.delta, gates.max_condition_wer_delta_points, label)
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

"""The found plan's predicted chance of passing the sign-off, and the winner's-curse correction behind it.

Per gate check (overall, each condition) the sign-off's upper end is forecast from the plan's dev interval as the
search judges it (``workbench.search.evaluator``): the sign-off's estimate is the dev estimate plus a normal error
with standard error ``se_dev * sqrt(1 + r)`` (``r`` = dev bootstrap blocks / sign-off blocks), and its upper
half-width is the dev one times ``max(1, sqrt(r))``. The check passes when that upper end is within its gate, so

    chance = Phi((gate - (estimate + shift) - half_width) / (se_dev * sqrt(1 + r)))

``shift`` corrects for the choice: the found plan is the best of ``m`` plans read on the same dev set, so its dev
estimate came out low by about the expected maximum of ``m`` standard normal errors times ``se_dev``
(``expected_max``: Blom's approximation, 0 for one plan). The plans of one search are nested and their errors
correlated, so this overstates the bias: the correction is conservative. The whole plan's chance is the product
over its checks (the checks taken as independent; they are positively correlated, so the product understates it
and the smallest check's chance is an upper bound, both recorded). A check whose sign-off group falls short of the
evidence rule (``workbench.evaluate.evidence``: too few speakers or reference words) cannot pass: its chance is 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist

from workbench.config import EVIDENCE, EvidenceConfig
from workbench.evaluate.bootstrap import Interval
from workbench.evaluate.evidence import check_groups, speakers_of
from workbench.evaluate.gates import GateConfig
from workbench.speech.records import Utterance

ASSUMPTIONS = (
    "per check: sign-off estimate ~ Normal(dev estimate + winner's-curse shift, se_dev^2 (1 + r)), sign-off upper "
    "half-width = dev upper half-width x max(1, sqrt(r)), se_dev = dev interval width / (2 z(level)), r = dev "
    "bootstrap blocks / sign-off bootstrap blocks (1 without a sign-off set: one like the dev set); shift = "
    "E[max of m standard normals] x se_dev for the best of m plans read on the same dev set (conservative: the "
    "plans are nested); the plan's chance is the product over checks (checks taken as independent); the same "
    "model, decoder and kind of speech as the dev set"
)


def expected_max(m: int) -> float:
    """E[max of ``m`` independent standard normals] (Blom's approximation; 0 for ``m`` <= 1)."""
    if m <= 1:
        return 0.0
    return NormalDist().inv_cdf((m - 0.375) / (m + 0.25))


@dataclass(frozen=True)
class PassForecast:
    """The predicted chance that the sign-off passes a plan, per check and combined, and what it assumed."""

    chance: float | None  # product over checks
    upper: float | None  # the smallest check's chance (the checks' correlation can raise the product to it)
    per_check: dict[str, float] = field(default_factory=dict)
    compared: int = 1  # plans the choice was made among (m)
    shift_se: float = 0.0  # the winner's-curse shift, in dev standard errors
    signoff_utterances: int | None = None
    basis: str = "dev"  # dev: the dev reading the search chose on; held-back: the confirmation's reading
    # checks whose sign-off group falls short of the evidence rule (workbench.evaluate.evidence): chance 0
    short_of_evidence: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {
            "pass_chance": self.chance,
            "pass_chance_upper": self.upper,
            "per_check": dict(self.per_check),
            "plans_compared": self.compared,
            "winners_curse_shift_se": self.shift_se,
            "signoff_utterances": self.signoff_utterances,
            "basis": self.basis,
            "short_of_evidence": dict(self.short_of_evidence),
            "assumptions": ASSUMPTIONS,
        }


def check_chance(interval: Interval, ratio: float, gate_points: float, shift_se: float = 0.0) -> float | None:
    """One check's predicted sign-off pass chance (see the module docstring); None without a finite interval."""
    if not (
        math.isfinite(interval.low) and math.isfinite(interval.high) and math.isfinite(interval.estimate)
    ):
        return None
    z_level = NormalDist().inv_cdf(0.5 + interval.level / 2.0)
    se = (interval.high - interval.low) / (2.0 * z_level) * 100.0
    estimate = interval.estimate * 100.0 + shift_se * se
    half = (interval.high - interval.estimate) * 100.0 * max(1.0, math.sqrt(ratio))
    spread = se * math.sqrt(1.0 + ratio)
    margin = gate_points - estimate - half
    if spread <= 0.0:
        return 1.0 if margin >= 0.0 else 0.0
    return NormalDist().cdf(margin / spread)


def forecast(
    deltas: Mapping[str, Interval | None],
    ratios: Mapping[str, float],
    gates: GateConfig,
    compared: int = 1,
    signoff_utterances: int | None = None,
    basis: str = "dev",
    short: Mapping[str, str] | None = None,
) -> PassForecast:
    """The forecast for a plan whose dev deltas per check (``overall``, ``condition <name>``) are ``deltas``,
    chosen among ``compared`` plans, judged by ``gates`` on a sign-off set with ``ratios`` per check; a check in
    ``short`` (the sign-off set short of the evidence rule there, ``evidence_shortfalls``) cannot pass."""
    shift = expected_max(compared)
    short = dict(short or {})
    per_check: dict[str, float] = {}
    for check, delta in deltas.items():
        if delta is None:
            continue
        gate = gates.max_wer_delta_points if check == "overall" else gates.max_condition_wer_delta_points
        chance = 0.0 if check in short else check_chance(delta, ratios.get(check, 1.0), gate, shift)
        if chance is not None:
            per_check[check] = round(chance, 4)
    if not per_check:
        return PassForecast(None, None, {}, compared, shift, signoff_utterances, basis, short)
    return PassForecast(
        round(math.prod(per_check.values()), 4),
        min(per_check.values()),
        per_check,
        compared,
        round(shift, 4),
        signoff_utterances,
        basis,
        short,
    )


def evidence_shortfalls(
    signoff: Sequence[Utterance], words_per_utterance: Mapping[str, float], config: EvidenceConfig = EVIDENCE
) -> dict[str, str]:
    """Per check, why the sign-off set falls short of the evidence rule: its speakers (counted) and its reference
    words, estimated as its utterances times the dev set's words per utterance in that group (the sign-off set's
    texts are not read)."""
    out = {}
    for check, group in check_groups(signoff).items():
        speakers, known = speakers_of(group)
        words = len(group) * words_per_utterance.get(check, words_per_utterance.get("overall", 0.0))
        if speakers < config.min_speakers or words < config.min_reference_words:
            out[check] = (
                f"{speakers} {'speakers' if known else 'utterances (no speaker known)'}, about {words:,.0f} "
                f"reference words (the evidence rule needs {config.min_speakers} and {config.min_reference_words:,})"
            )
    return out

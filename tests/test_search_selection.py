"""Selection rules and the found plan's sign-off forecast: the winner's-curse shift, the pass chance agreeing with
the search's own pass rule, and the settings each rule gives a search."""

from __future__ import annotations

import math

import numpy as np
import pytest

from workbench.config import SEARCH
from workbench.errors import WorkbenchError
from workbench.evaluate.bootstrap import Interval
from workbench.evaluate.gates import GateConfig
from workbench.search.evaluator import pass_quantile, predicted_interval
from workbench.search.forecast import check_chance, expected_max, forecast
from workbench.search.selection import planned_evaluations, select


def _interval(estimate: float, low: float, high: float) -> Interval:
    return Interval(estimate / 100, low / 100, high / 100, 0.95, 1000, "speaker", 40)


def test_expected_max_of_normals_matches_a_simulation() -> None:
    rng = np.random.default_rng(0)
    assert expected_max(1) == 0.0
    for m in (2, 5, 10):
        simulated = rng.standard_normal((200_000, m)).max(axis=1).mean()
        assert expected_max(m) == pytest.approx(simulated, abs=0.03)


def test_the_chance_is_at_least_the_confidence_exactly_when_the_search_passes_the_check() -> None:
    """Without the shift, a check's forecast chance reaches the search's confidence exactly when the search's
    predicted interval (workbench.search.evaluator) puts the upper end within the gate."""
    rng = np.random.default_rng(1)
    gate = 0.3
    for _ in range(500):
        estimate = rng.uniform(-0.4, 0.4)
        low, high = estimate - rng.uniform(0.05, 0.5), estimate + rng.uniform(0.05, 0.5)
        ratio = rng.uniform(0.3, 3.0)
        confidence = rng.uniform(0.5, 0.97)
        iv = _interval(estimate, low, high)
        judged = predicted_interval(iv, ratio, pass_quantile(confidence))
        assert judged is not None
        passes = judged.high * 100 <= gate
        chance = check_chance(iv, ratio, gate)
        assert chance is not None
        if abs(chance - confidence) > 1e-9:
            assert passes == (chance >= confidence)


def test_the_winners_curse_lowers_the_forecast_and_checks_multiply() -> None:
    gates = GateConfig()
    deltas = {
        "overall": _interval(0.0, -0.15, 0.15),
        "condition quiet": _interval(0.1, -0.3, 0.5),
        "condition noisy": None,
    }
    one = forecast(deltas, {}, gates, compared=1, signoff_utterances=900)
    many = forecast(deltas, {}, gates, compared=8, signoff_utterances=900)
    assert one.chance is not None and many.chance is not None and one.upper is not None
    assert many.chance < one.chance and many.shift_se == pytest.approx(expected_max(8), abs=1e-4)
    assert set(one.per_check) == {"overall", "condition quiet"}
    assert one.chance == pytest.approx(math.prod(one.per_check.values()), abs=1e-3)
    assert one.upper == min(one.per_check.values())
    record = one.to_json()
    assert record["signoff_utterances"] == 900 and "independent" in str(record["assumptions"])
    assert forecast({"overall": None}, {}, gates).chance is None


def test_each_rule_gives_its_settings() -> None:
    assert planned_evaluations("bisect", 12, 0, 1) == 2 + 4 + 1
    assert planned_evaluations("gallop", 12, 2, 0) == 1 + 8 + 2
    read = select("as-read", 0.9, "bisect", 12, 0, 1, 0.0, SEARCH.confirm_share)
    assert read.judged_confidence == 0.9 and read.confirm == 0.0
    shrink = select("shrink", 0.9, "bisect", 12, 0, 1, 0.0, SEARCH.confirm_share)
    assert shrink.judged_confidence > 0.97 and shrink.compared == 7
    assert shrink.to_json()["winners_curse_shift_se"] == pytest.approx(expected_max(7), abs=1e-4)
    held = select("confirm", 0.9, "bisect", 12, 0, 1, 0.0, SEARCH.confirm_share)
    assert held.confirm == SEARCH.confirm_share and held.judged_confidence == 0.9
    assert select("confirm", 0.9, "bisect", 12, 0, 1, 0.5, SEARCH.confirm_share).confirm == 0.5
    with pytest.raises(WorkbenchError, match="--selection must be one of"):
        select("best", 0.9, "bisect", 12, 0, 1, 0.0, SEARCH.confirm_share)


def test_a_signoff_set_short_of_the_evidence_rule_cannot_pass() -> None:
    """The forecast knows the sign-off's evidence rule: a group with too few speakers (or words, estimated from the
    dev set's words per utterance) has chance 0, so the plan's chance is 0."""
    from workbench.search.forecast import evidence_shortfalls
    from workbench.speech.records import Utterance

    def utts(n: int, speakers: int, condition: str) -> list[Utterance]:
        return [
            Utterance(
                id=f"{condition}{i}",
                text="a b c",
                speaker=f"{condition}-s{i % speakers}",
                voice="v",
                accent="us",
                condition=condition,
                duration_s=2.0,
                source="unit",
            )
            for i in range(n)
        ]

    small = utts(20, 6, "quiet")
    short = evidence_shortfalls(small, {"overall": 14.0, "condition quiet": 14.0})
    assert (
        set(short) == {"overall", "condition quiet"}
        and "6 speakers, about 280 reference words" in short["overall"]
    )
    large = utts(60, 12, "quiet") + utts(60, 12, "noisy")
    assert evidence_shortfalls(large, {"overall": 14.0}) == {}
    deltas = {"overall": _interval(0.0, -0.1, 0.1)}
    assert forecast(deltas, {}, GateConfig(), short=short).chance == 0.0
    assert forecast(deltas, {}, GateConfig()).chance > 0.5

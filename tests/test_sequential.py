"""The sequential-evidence stopping rule, on a cheap evaluator whose interval narrows as 1/sqrt(n)."""

from __future__ import annotations

import math
from statistics import NormalDist

import pytest

from workbench.errors import WorkbenchError
from workbench.search.sequential import (
    balanced_order,
    block_ends,
    covering_ends,
    interim_confidence,
    pass_chance,
    run_sequential,
    side_of_gate,
)

GATE = 0.3


def cheap_evaluator(
    true_delta: float, spread: float, calls: list[int], drift: dict[int, float] | None = None
):
    """A look function on an 800-utterance dev set: the estimate is the true delta (or ``drift[n]``), the judged
    interval +- z(confidence) x spread / sqrt(n)."""

    def look(n: int, confidence: float) -> tuple[float, str]:
        calls.append(n)
        estimate = (drift or {}).get(n, true_delta)
        half = NormalDist().inv_cdf(confidence) * spread / math.sqrt(n)
        shrink = math.sqrt(n / 800)
        return estimate, side_of_gate({"overall": (estimate, estimate + half, GATE)}, shrink)

    return look


def test_block_ends_and_bad_blocks() -> None:
    assert block_ends(900, 4) == [225, 450, 675, 900]
    assert block_ends(10, 3) == [3, 7, 10]
    assert block_ends(2, 5) == [1, 2]
    assert block_ends(50, 1) == [50]
    with pytest.raises(WorkbenchError, match="--dev-blocks"):
        block_ends(10, 0)


def test_side_of_gate() -> None:
    assert side_of_gate({"overall": (-0.05, 0.1, GATE), "condition quiet": (0.0, 0.6, 0.6)}) == "pass"
    assert side_of_gate({"overall": (0.31, 0.9, GATE), "condition quiet": (0.0, 0.2, 0.6)}, 0.5) == "fail"
    assert side_of_gate({"overall": (-0.1, 0.35, GATE)}, 0.5) == "straddles"
    # +1.0 with a half-width of 1.4: the whole set could at best halve it, to +1.7 > 0.3: fail now
    assert side_of_gate({"overall": (1.0, 2.4, GATE)}, 0.5) == "fail"
    # +0.1 with a half-width of 0.5: its estimate is within the gate, so more evidence may still pass it
    assert side_of_gate({"overall": (0.1, 0.6, GATE)}, 0.5) == "straddles"
    assert side_of_gate({"overall": (0.1, 0.6, GATE)}, 0.3) == "straddles"
    assert side_of_gate({"overall": (-0.1, 0.35, GATE)}, 1.0) == "fail"  # the last look: above the gate


def test_clear_cases_stop_after_the_first_block() -> None:
    ends = block_ends(800, 4)
    calls: list[int] = []
    clear_fail = run_sequential(cheap_evaluator(1.0, 10.0, calls), ends, 0.9)  # INT8 everywhere: +1.0, wide
    assert calls == [200] and clear_fail.utterances == 200 and clear_fail.blocks_used == 1
    assert clear_fail.reason.startswith("fail after block 1 of 4") and clear_fail.looks[0].side == "fail"
    calls.clear()
    clear_pass = run_sequential(cheap_evaluator(0.0, 0.5, calls), ends, 0.9)  # FP16: changes almost nothing
    assert calls == [200] and clear_pass.looks[0].side == "pass"
    assert clear_pass.reason.startswith("pass after block 1 of 4")


def test_close_case_buys_blocks_until_it_resolves() -> None:
    ends = block_ends(800, 4)
    calls: list[int] = []
    # interim half-width z(0.975) x spread / sqrt(n) = 9 / sqrt(n): 0.64 at 200, 0.45 at 400 (straddles
    # -0.1 + half > 0.3), 0.37 at 600: within the gate after block 3
    spread = 9.0 / NormalDist().inv_cdf(interim_confidence(0.9, 4))
    close = run_sequential(cheap_evaluator(-0.1, spread, calls), ends, 0.9)
    assert calls == [200, 400, 600] and close.utterances == 600 and close.blocks_used == 3
    assert [look.side for look in close.looks] == ["straddles", "straddles", "pass"]
    assert close.reason.startswith("pass after block 3 of 4") and close.to_json()["utterances"] == 600


def test_never_resolved_ends_on_the_whole_set_at_the_stated_confidence() -> None:
    ends = block_ends(800, 4)
    calls: list[int] = []
    # straddles at every earlier look (the whole set could still pass it), then its estimate moves up
    result = run_sequential(cheap_evaluator(0.0, 4.0, calls, drift={800: 0.2}), ends, 0.9)
    assert calls == ends and result.utterances == 800 and result.blocks_used == 4
    assert result.looks[-1].confidence == 0.9 and result.looks[0].confidence == interim_confidence(0.9, 4)
    assert result.reason.startswith("whole dev set (800 utterances): fail")


def test_an_early_pass_is_judged_stricter_than_the_last_look() -> None:
    assert interim_confidence(0.9, 4) == pytest.approx(0.975)
    assert interim_confidence(0.9, 1) == 0.9
    # a plan whose interval at the first block clears the gate at 0.9 but not at 0.975 is not passed early
    calls: list[int] = []
    z90, z975 = NormalDist().inv_cdf(0.9), NormalDist().inv_cdf(0.975)
    spread = (GATE + 0.1) / ((z90 + z975) / 2) * math.sqrt(200)  # half-width at 200 between the two
    run_sequential(cheap_evaluator(-0.1, spread, calls), block_ends(800, 4), 0.9)
    assert calls[0] == 200 and len(calls) > 1


def test_balanced_order_spreads_conditions_and_speakers_over_every_prefix() -> None:
    conditions = ["quiet"] * 6 + ["noisy"] * 6 + ["accented"] * 3
    speakers = ["a", "a", "a", "b", "b", "b", "c", "c", "d", "d", "e", "e", "f", "g", "h"]
    order = balanced_order(conditions, speakers)
    assert sorted(order) == list(range(15))
    first = order[:6]
    assert {conditions[i] for i in first} == {"quiet", "noisy", "accented"}
    assert {speakers[i] for i in first if conditions[i] == "quiet"} == {"a", "b"}


def test_looks_start_once_every_condition_is_in_and_the_block_is_big_enough() -> None:
    conditions = ["quiet", "quiet", "noisy", "quiet", "accented", "noisy", "quiet", "noisy"]
    assert covering_ends([2, 4, 6, 8], conditions, 1) == [6, 8]  # accented arrives at the 5th
    assert covering_ends([2, 4, 6, 8], conditions, 7) == [8]
    assert covering_ends([8], conditions, 100) == [8]  # the whole set is always judged


def test_pass_chance_is_the_predictive_normal_chance_of_ending_within_the_gate() -> None:
    # after a quarter of the set: the whole set's estimate ~ N(-0.06, (0.36 * sqrt(0.75))^2); it passes below
    # 0.3 - 0.67 = -0.37
    expected = NormalDist().cdf((GATE - 0.67 + 0.06) / (0.36 * math.sqrt(0.75)))
    assert pass_chance(-0.06, 0.36, 0.67, GATE, 0.25) == pytest.approx(expected)
    assert 0.1 < expected < 0.2
    # more evidence already in: less room for the estimate to move
    assert pass_chance(-0.06, 0.25, 0.67, GATE, 0.5) < 0.05
    # nothing changed (no spread): a sure pass or a sure fail
    assert pass_chance(0.0, 0.0, 0.0, GATE, 0.25) == 1.0
    assert pass_chance(0.4, 0.0, 0.0, GATE, 0.25) == 0.0
    assert pass_chance(0.1, 0.2, 0.1, GATE, 1.0) == 1.0  # the whole set: it either fits or not
    with pytest.raises(ValueError):
        pass_chance(0.0, 0.1, 0.1, GATE, 0.0)


def test_a_futile_check_stops_an_earlier_look_only_when_futility_is_on() -> None:
    straddling = {"overall": (-0.06, 1.4, GATE)}
    assert side_of_gate(straddling, 0.5, {"overall": 0.03}, 0.05) == "futile"
    assert side_of_gate(straddling, 0.5, {"overall": 0.03}, 0.0) == "straddles"
    assert side_of_gate(straddling, 0.5, {"overall": 0.08}, 0.05) == "straddles"
    # a pass or a fail is decided first; the last look is never futile
    assert side_of_gate({"overall": (-0.06, 0.2, GATE)}, 0.5, {"overall": 0.01}, 0.05) == "pass"
    assert side_of_gate(straddling, 1.0, {"overall": 0.01}, 0.05) == "fail"
    # any check below the level makes the look futile
    both = {"overall": (0.0, 0.5, GATE), "condition noisy": (0.2, 2.0, 1.0)}
    assert side_of_gate(both, 0.5, {"overall": 0.4, "condition noisy": 0.02}, 0.05) == "futile"


def futility_evaluator(
    estimate: float, whole_span: float, calls: list[int], futility: float, total: int = 800
):
    """A look function whose judged half-span narrows as 1/sqrt(n) to ``whole_span`` at the whole set (the
    search's 0.9 confidence: 1.96 + 1.28 * sqrt(2) standard errors), the chance as the evaluator computes it."""
    z_total = NormalDist().inv_cdf(0.975) + NormalDist().inv_cdf(0.9) * math.sqrt(2.0)

    def look(n: int, confidence: float) -> tuple[float, str]:
        calls.append(n)
        fraction = n / total
        se = whole_span / z_total / math.sqrt(fraction)
        chance = pass_chance(estimate, se, whole_span, GATE, fraction)
        interval = {"overall": (estimate, estimate + se * z_total, GATE)}
        return chance, side_of_gate(interval, math.sqrt(fraction), {"overall": chance}, futility)

    return look


def test_a_plan_the_whole_set_cannot_pass_is_given_up_after_an_earlier_block() -> None:
    """The demo's k = 4 plan on a 1,058-utterance dev set: -0.06 points, judged +0.61 on the whole set (span
    +0.67): with futility 5 % it stops after block 2 of 4; without, it buys all four."""
    ends = block_ends(800, 4)
    calls: list[int] = []
    result = run_sequential(futility_evaluator(-0.06, 0.67, calls, 0.05), ends, 0.9)
    assert calls == [200, 400] and result.looks[-1].side == "futile"
    assert result.reason.startswith("fail after block 2 of 4 (400 utterances): futile")
    calls.clear()
    run_sequential(futility_evaluator(-0.06, 0.67, calls, 0.0), ends, 0.9)
    assert calls == ends


def test_a_plan_that_may_still_pass_keeps_buying_blocks() -> None:
    """-0.24 points with a whole-set span of +0.53 (judged +0.29, the plan the demo found): never futile."""
    calls: list[int] = []
    result = run_sequential(futility_evaluator(-0.24, 0.53, calls, 0.05), block_ends(800, 4), 0.9)
    assert calls == block_ends(800, 4) and result.reason.startswith("whole dev set (800 utterances): pass")

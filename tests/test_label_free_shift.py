"""The shift check's two-sample test (``workbench.jobs.label_free.shift_test``): the bootstrap interval of the
difference in disagreement between unlabelled and labelled audio, each set's speakers resampled on their own. A
shifted synthetic set flags, one drawn from the same distribution does not, and the test flags differences that
interval non-overlap misses."""

from __future__ import annotations

import json

import numpy as np

from workbench.config import LABEL_FREE
from workbench.evaluate.agreement import CandidateAgreement, agreement
from workbench.jobs.label_free import shift_rule, shift_test

WORDS = ["ONE", "TWO", "THREE", "FOUR", "FIVE", "SIX", "SEVEN", "EIGHT", "NINE", "TEN"]


def _set(rate: float, speakers: int, per_speaker: int, seed: int, prefix: str) -> CandidateAgreement:
    """A synthetic set: FP32 says ten words per utterance; the candidate changes each word with ``rate``."""
    rng = np.random.default_rng(seed)
    fp32, cand, who = [], [], []
    for s in range(speakers):
        for _ in range(per_speaker):
            words = list(WORDS)
            fp32.append(" ".join(words))
            cand.append(" ".join("X" if rng.random() < rate else w for w in words))
            who.append(f"{prefix}{s}")
    return agreement(prefix, who, {"fp32": fp32, "q": cand}, "fp32", resamples=1000).candidates["q"]


def test_a_shifted_set_flags_with_a_positive_difference_interval() -> None:
    labelled = _set(0.02, 30, 4, seed=1, prefix="l")
    shifted = _set(0.05, 30, 4, seed=2, prefix="u")
    test = shift_test(shifted, labelled, resamples=1000, seed=0)
    assert test.beyond and test.difference.low > 0
    assert test.difference.estimate == shifted.disagreement.estimate - labelled.disagreement.estimate
    assert test.ratio.low > 1.0 and test.difference.blocks == 60
    assert json.loads(json.dumps(test.to_json(), allow_nan=False))["beyond"] is True


def test_a_set_from_the_same_distribution_does_not_flag() -> None:
    labelled = _set(0.03, 30, 4, seed=1, prefix="l")
    for seed in (11, 12, 13):
        fresh = _set(0.03, 30, 4, seed=seed, prefix="u")
        test = shift_test(fresh, labelled, resamples=1000, seed=0)
        assert not test.beyond and test.difference.low < 0 < test.difference.high


def test_the_difference_flags_where_the_two_intervals_overlap() -> None:
    labelled = _set(0.02, 40, 4, seed=3, prefix="l")
    shifted = _set(0.035, 40, 4, seed=4, prefix="u")
    test = shift_test(shifted, labelled, resamples=2000, seed=0, margin=0.0)
    assert shifted.disagreement.low <= labelled.disagreement.high  # non-overlap would not flag
    assert test.beyond
    # the default margin (LabelFreeDefaults.shift_margin, 1 point) asks more than a difference beyond the noise
    assert 0 < test.difference.low < LABEL_FREE.shift_margin
    assert not shift_test(shifted, labelled, resamples=2000, seed=0).beyond


def test_a_margin_raises_the_bar() -> None:
    labelled = _set(0.02, 30, 4, seed=1, prefix="l")
    shifted = _set(0.05, 30, 4, seed=2, prefix="u")
    assert not shift_test(shifted, labelled, resamples=1000, seed=0, margin=0.2).beyond


def test_the_default_margin_is_zero_for_a_large_labelled_set_and_one_point_for_a_small_one() -> None:
    large = LABEL_FREE.large_eval_clips
    assert LABEL_FREE.default_shift_margin(large) == LABEL_FREE.shift_margin_large == 0.0
    assert LABEL_FREE.default_shift_margin(large - 1) == LABEL_FREE.shift_margin == 0.01
    # the rule says which margin ran and why: the default for this set's size, or the gate file's
    assert "above 0 % of FP32's words (the default for 900 labelled evaluation clips" in shift_rule(None, 900)
    assert "above 1 % of FP32's words (the default for 240 labelled evaluation clips" in shift_rule(None, 240)
    assert "above 0.5 % of FP32's words (the gate file's shift_margin" in shift_rule(0.005, 240)

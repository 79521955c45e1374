"""The search's FAIL line says why in words: a plan whose estimate reads better than FP32 fails because its
interval is too wide; one whose estimate is past the limit fails on the estimate itself."""

from __future__ import annotations

from workbench.evaluate.gates import Check
from workbench.search.failure_words import why_it_fails


def test_an_interval_too_wide_and_an_estimate_past_the_limit_are_told_apart() -> None:
    wide = Check("overall", 0.78, 0.3, False, "overall: WER delta ...")
    assert why_it_fails([wide], {"overall": -0.57}) == (
        "overall: interval too wide: the upper end +0.78 exceeds the limit +0.30 though the estimate reads better "
        "than FP32"
    )
    assert (
        why_it_fails([wide], {"overall": 0.45})
        == "overall: the estimate +0.45 itself exceeds the limit +0.30"
    )
    ok = Check("overall", 0.1, 0.3, True, "")
    noisy = Check("condition noisy", 1.4, 1.0, False, "")
    assert why_it_fails([ok, noisy], {"overall": 0.0, "condition noisy": 0.2}).startswith(
        "condition noisy: interval too wide: the upper end +1.40"
    )
    assert why_it_fails([ok], {"overall": 0.0}) == ""

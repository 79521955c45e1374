"""Gate checks a sign-off adds to each candidate's verdict beyond WER and latency: the built engine's layer
precisions against the candidate's plan, and inf/NaN on the calibration set.

Each turns a finished measurement into one ``Check``; the measurements themselves are made elsewhere (the
engine inspector in ``workbench.backends.tensorrt.inspector``, the overflow pass in
``workbench.quantize.overflow``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from workbench.backends.tensorrt.inspector import EnginePrecisionCheck
from workbench.evaluate.gates import CandidateVerdict, Check


class OverflowResult(Protocol):
    """What the overflow check needs of an overflow report (``workbench.quantize.overflow.OverflowReport``)."""

    @property
    def overflows(self) -> Sequence[object]: ...

    @property
    def output_clips_nonfinite(self) -> int: ...

    @property
    def clean(self) -> bool: ...

    def summary(self) -> str: ...


def engine_precision_check(result: EnginePrecisionCheck) -> Check:
    """The engine-precision result as a gate check (FAIL lists the layers)."""
    bad = (
        len(result.int8_fallback)
        + len(result.fp16_mismatch)
        + len(result.fp32_mismatch)
        + len(result.not_found)
    )
    return Check("engine precisions", float(bad), 0.0, result.passed, result.summary())


def overflow_check(report: OverflowResult) -> Check:
    """inf/NaN anywhere on the calibration set as a gate check (FAIL names the overflow)."""
    return Check(
        "overflow",
        float(len(report.overflows) + report.output_clips_nonfinite),
        0.0,
        report.clean,
        report.summary(),
    )


def add_overflow_checks(verdicts: list[CandidateVerdict], reports: Mapping[str, OverflowResult]) -> None:
    """A candidate with inf/NaN anywhere on the calibration set fails, the overflow named in its reasons."""
    for verdict in verdicts:
        report = reports.get(verdict.candidate)
        if report is not None:
            verdict.add(overflow_check(report))

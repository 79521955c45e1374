"""Coverage of the calibrated ranges: how much of a set's activations falls beyond each tensor's calibrated range.

A quantized tensor clips every value beyond its calibrated ``amax``. On the calibration set that share is what the
range method chose (none for max, about 0.01 % for percentile 99.99); on audio the calibration did not cover it
grows. ``beyond_range`` runs the FP32 model once per clip with every calibrated activation marked as an output
(the calibration's own session, ``runner.open_statistics_session``) and counts, per tensor, the values with
``|x| > amax``; ``coverage_shift`` compares two such counts (the calibration set against new audio) and names the
tensors that moved most. A tensor *left its range* when its share on the new audio is at least
``CoverageRule.min_share`` and ``CoverageRule.factor`` times its share on the calibration set.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from workbench.backends.onnxruntime import runs_ahead
from workbench.calibration.runner import open_statistics_session
from workbench.config import CoverageRule
from workbench.errors import WorkbenchError
from workbench.model.export import INPUT


@dataclass(frozen=True)
class TensorCoverage:
    """Values of one tensor beyond its calibrated range, out of all its values."""

    beyond: int
    total: int

    @property
    def share(self) -> float:
        return self.beyond / self.total if self.total else 0.0


def beyond_range(
    fp32_onnx: Path,
    amax: Mapping[str, float],
    clips: Iterable[np.ndarray],
    prepare: Callable[[np.ndarray], np.ndarray],
) -> dict[str, TensorCoverage]:
    """Per calibrated tensor of ``fp32_onnx``: its values on ``clips`` (raw 16 kHz; ``prepare`` makes them the
    model's input) beyond ``amax`` (the cache's ranges)."""
    opened = open_statistics_session(Path(fp32_onnx))
    names = [n for n in opened.names if n in amax and amax[n] > 0]
    if not names:
        raise WorkbenchError(f"no activation of {fp32_onnx} has a calibrated range in the cache")
    beyond = dict.fromkeys(names, 0)
    total = dict.fromkeys(names, 0)
    feeds = ((f"clip {i + 1}", {INPUT: prepare(audio)[None]}) for i, audio in enumerate(clips))
    for _, values in runs_ahead(opened.session, names, feeds):
        for name, value in zip(names, values):
            beyond[name] += int(np.count_nonzero(np.abs(value) > amax[name]))
            total[name] += int(value.size)
    return {n: TensorCoverage(beyond[n], total[n]) for n in names}


@dataclass(frozen=True)
class MovedTensor:
    tensor: str
    reference_share: float  # on the calibration set
    share: float  # on the new audio

    @property
    def ratio(self) -> float | None:
        return self.share / self.reference_share if self.reference_share > 0 else None


@dataclass(frozen=True)
class CoverageShift:
    """Tensors whose share beyond range grew from ``reference`` (the calibration set) to ``audio``."""

    reference: str
    audio: str
    tensors: int
    reference_clips: int
    clips: int
    rule: CoverageRule
    left: list[MovedTensor] = field(default_factory=list)  # tensors that left their range, most moved first
    top: list[MovedTensor] = field(
        default_factory=list
    )  # the tensors that moved most, whether they left or not
    median_share: float = 0.0  # over tensors, on the new audio
    median_reference_share: float = 0.0

    @property
    def moved(self) -> bool:
        return bool(self.left)

    def summary(self) -> str:
        head = f"coverage on {self.audio} ({self.clips} clips) against {self.reference} ({self.reference_clips} clips): "
        if not self.left:
            return head + f"no tensor of {self.tensors} left its calibrated range"
        named = ", ".join(
            f"{m.tensor} {m.share * 100:.3f} % (was {m.reference_share * 100:.3f} %)" for m in self.left[:3]
        )
        return head + f"{len(self.left)} of {self.tensors} tensors left their calibrated range: {named}"

    def to_json(self) -> dict:
        def row(m: MovedTensor) -> dict:
            return {
                "tensor": m.tensor,
                "reference_share": m.reference_share,
                "share": m.share,
                "ratio": m.ratio,
            }

        return {
            "reference": self.reference,
            "audio": self.audio,
            "tensors": self.tensors,
            "reference_clips": self.reference_clips,
            "clips": self.clips,
            "rule": {"factor": self.rule.factor, "min_share": self.rule.min_share},
            "moved": self.moved,
            "median_share": self.median_share,
            "median_reference_share": self.median_reference_share,
            "left": [row(m) for m in self.left],
            "top": [row(m) for m in self.top],
            "summary": self.summary(),
        }


def coverage_shift(
    reference: Mapping[str, TensorCoverage],
    audio: Mapping[str, TensorCoverage],
    names: tuple[str, str],
    clips: tuple[int, int],
    rule: CoverageRule = CoverageRule(),
) -> CoverageShift:
    """Compare the shares beyond range on the calibration set (``reference``) and on new audio; ``names`` and
    ``clips`` say which sets and how many clips each."""
    common = [n for n in audio if n in reference]
    moved = [MovedTensor(n, reference[n].share, audio[n].share) for n in common]
    moved.sort(key=lambda m: (m.share - m.reference_share, m.share), reverse=True)
    left = [m for m in moved if m.share >= rule.min_share and m.share >= rule.factor * m.reference_share]
    return CoverageShift(
        names[0],
        names[1],
        len(common),
        clips[0],
        clips[1],
        rule,
        left,
        moved[: rule.shown],
        float(np.median([m.share for m in moved])) if moved else 0.0,
        float(np.median([m.reference_share for m in moved])) if moved else 0.0,
    )

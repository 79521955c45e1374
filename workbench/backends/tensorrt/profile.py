"""Optimisation profile: min/opt/max shapes from batch sizes and audio lengths (no TensorRT import).

Symbolic ONNX input dimensions are filled in: axis 0 is the batch, every other symbolic axis the
length (samples). Lengths come from durations (a calibration set's, read by the build job, or explicit).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from workbench.config import SAMPLE_RATE
from workbench.errors import WorkbenchError


@dataclass(frozen=True)
class Range:
    """An inclusive min/opt/max triple."""

    min: int
    opt: int
    max: int

    def __post_init__(self) -> None:
        if not (1 <= self.min <= self.opt <= self.max):
            raise WorkbenchError(
                f"profile range needs 1 <= min <= opt <= max, got {self.min}/{self.opt}/{self.max}"
            )

    def as_list(self) -> list[int]:
        return [self.min, self.opt, self.max]


def batch_range(batches: Sequence[int]) -> Range:
    """min and max of the batch sizes asked for; opt is the middle one (8 for 1,8,32)."""
    sizes = sorted(set(int(b) for b in batches))
    if not sizes or sizes[0] < 1:
        raise WorkbenchError(f"batch sizes must be positive integers, got {list(batches)}")
    return Range(sizes[0], sizes[(len(sizes) - 1) // 2], sizes[-1])


def samples_from_durations(durations_s: Sequence[float], sample_rate: int = SAMPLE_RATE) -> Range:
    """Samples range covering every duration: min = shortest, opt = median, max = longest."""
    values = sorted(float(d) for d in durations_s)
    if not values or values[0] <= 0:
        raise WorkbenchError("need at least one positive duration to derive the engine profile")
    median = values[len(values) // 2]
    return Range(
        max(1, math.floor(values[0] * sample_rate)),
        round(median * sample_rate),
        math.ceil(values[-1] * sample_rate),
    )


def input_shapes(
    inputs: Sequence[tuple[str, Sequence[int | str | None]]], batch: Range, samples: Range
) -> dict[str, dict[str, list[int]]]:
    """min/opt/max shape for each network input; static dims are kept as they are."""
    shapes: dict[str, dict[str, list[int]]] = {}
    for name, dims in inputs:
        triple: dict[str, list[int]] = {"min": [], "opt": [], "max": []}
        for axis, dim in enumerate(dims):
            if isinstance(dim, int) and dim > 0:
                values = [dim, dim, dim]
            else:
                values = batch.as_list() if axis == 0 else samples.as_list()
            for key, value in zip(("min", "opt", "max"), values):
                triple[key].append(value)
        shapes[name] = triple
    return shapes

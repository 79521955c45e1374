"""Overflow check of a variant before sign-off: inf/NaN in any tensor on calibration clips, named.

Two passes with ONNX Runtime (CPU): the model's outputs on every clip, run as transcription runs it
(``OnnxRuntimeRunner``: full optimisation, INT8 nodes on the integer kernels), then every float tensor the
graph writes, run as written, on the clips whose outputs held inf/NaN and on ``every_tensor_clips`` more (the
longest, as sums grow with length, and some spread over the set). The every-tensor pass is needed: with only
the outputs asked for, ONNX Runtime's CPU EP runs a chain of FP16 nodes that lack FP16 kernels in float32
without rounding between them, so an inf in the middle of the chain can vanish. The first tensor in graph order holding
inf/NaN names the overflow: its tensor, the node that wrote it, that node's op, and on how many of the
checked clips it happened. An overflow inside one kernel's accumulator (a sum over many frames) cannot show
on a CPU; that is what the guard's statistics rule is for.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx

from workbench.config import FP16_GUARD
from workbench.quantize.plan import FLOAT_ELEM_TYPES, tensor_types


@dataclass(frozen=True)
class Overflow:
    tensor: str
    node: str
    op: str
    clips: int  # on how many of the every-tensor clips it held inf/NaN
    values: int  # how many inf/NaN values in all

    def describe(self) -> str:
        return f"inf/NaN in {self.tensor} written by {self.node} ({self.op}) on {self.clips} clip(s)"


@dataclass
class OverflowReport:
    clips: int  # clips whose outputs were checked
    every_tensor_clips: int  # clips on which every float tensor was checked
    tensors: int  # float tensors checked
    output_clips_nonfinite: int  # clips with inf/NaN in a model output
    overflows: list[Overflow] = field(default_factory=list)  # graph order

    @property
    def clean(self) -> bool:
        return not self.overflows and not self.output_clips_nonfinite

    @property
    def first(self) -> Overflow | None:
        return self.overflows[0] if self.overflows else None

    def summary(self) -> str:
        if self.clean:
            return (
                f"no inf/NaN: outputs on {self.clips} calibration clips, all {self.tensors} float tensors on "
                f"{self.every_tensor_clips}"
            )
        first = self.first
        where = first.describe() if first else "a model output"
        return (
            f"overflow: {where}; outputs non-finite on {self.output_clips_nonfinite} of {self.clips} "
            f"calibration clips"
        )

    def to_json(self) -> dict:
        return {
            "clean": self.clean,
            "summary": self.summary(),
            "clips": self.clips,
            "every_tensor_clips": self.every_tensor_clips,
            "tensors": self.tensors,
            "output_clips_nonfinite": self.output_clips_nonfinite,
            "overflows": [o.__dict__ for o in self.overflows],
        }


FP16_EXPONENT = 0x7C00  # the exponent bits of an FP16 value: all set in inf and NaN only


def count_nonfinite(value: np.ndarray) -> int:
    """How many values of ``value`` are inf or NaN (0 for integer tensors). FP16 is counted on its bits: NumPy's
    ``isfinite`` converts every FP16 value first and takes ten times as long."""
    value = np.asarray(value)
    if not np.issubdtype(value.dtype, np.floating):
        return 0
    if value.dtype == np.float16:
        bits = np.ascontiguousarray(value).view(np.uint16)
        return int(np.count_nonzero((bits & FP16_EXPONENT) == FP16_EXPONENT))
    return int(value.size - np.count_nonzero(np.isfinite(value)))


def every_tensor_sample(clips: list[np.ndarray], count: int) -> list[int]:
    """Indices of the clips checked tensor by tensor: the longest half (sums grow with length), then clips
    spread evenly over the set (the order a set is stored in mixes conditions), ``count`` in all."""
    if count >= len(clips):
        return list(range(len(clips)))
    longest = sorted(range(len(clips)), key=lambda i: -len(clips[i]))[: (count + 1) // 2]
    spread = [int(i) for i in np.linspace(0, len(clips) - 1, count)]
    return list(dict.fromkeys(longest + [i for i in spread if i not in longest]))[:count]


def check_overflow(
    model: Path | onnx.ModelProto,
    clips: list[np.ndarray],
    every_tensor_clips: int = FP16_GUARD.overflow_every_tensor_clips,
    prepare: Callable[[np.ndarray], np.ndarray] | None = None,
) -> OverflowReport:
    """Run ``model`` on raw 16 kHz ``clips`` (made ``input_values`` by ``prepare``, the model's feature settings;
    default: normalised) and name the first tensor holding inf/NaN, if any."""
    from workbench.backends.onnxruntime import (
        OnnxRuntimeRunner,
        ort_failures,
        run_feed,
        run_options,
        session_with_outputs,
    )
    from workbench.model.export import INPUT
    from workbench.model.features import normalise_audio

    prepare = prepare or normalise_audio
    proto = onnx.load(str(model)) if isinstance(model, Path) else model
    what, quiet = (str(model) if isinstance(model, Path) else "the model"), run_options()
    # the outputs as transcription computes them (a candidate refused with the exact-U8S8 option runs without it)
    with OnnxRuntimeRunner(proto.SerializeToString(), name=what) as deployed:
        outputs = deployed.infer_each({INPUT: prepare(audio)[None]} for audio in clips)
        bad_clips = [i for i, out in enumerate(outputs) if any(count_nonfinite(v) for v in out.values())]
    chosen = list(
        dict.fromkeys(bad_clips[:every_tensor_clips] + every_tensor_sample(clips, every_tensor_clips))
    )
    types = tensor_types(proto)
    producer = {o: n for n in proto.graph.node for o in n.output}
    # a Constant's value is a literal of the graph (an exporter's -inf mask fill, say), not an overflow
    names = [
        o
        for n in proto.graph.node
        if n.op_type != "Constant"
        for o in n.output
        if o and types.get(o) in FLOAT_ELEM_TYPES
    ]
    with ort_failures(what):
        session = session_with_outputs(proto, names)
    counts: dict[str, list[int]] = {}
    for i in chosen:
        for name, value in zip(
            names, run_feed(session, names, {INPUT: prepare(clips[i])[None]}, what, quiet)
        ):
            bad = count_nonfinite(value)
            if bad:
                entry = counts.setdefault(name, [0, 0])
                entry[0] += 1
                entry[1] += bad
    overflows = [
        Overflow(name, producer[name].name, producer[name].op_type, c, v)
        for name, (c, v) in sorted(counts.items(), key=lambda kv: names.index(kv[0]))
    ]
    return OverflowReport(len(clips), len(chosen), len(names), len(bad_clips), overflows)

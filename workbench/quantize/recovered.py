"""The recovered FP32 source: the graph and per-plan corrections every quantized variant of a calibration is built from.

A calibration with accuracy-recovery options (``workbench.calibration.recovery``) leaves up to three things
beside its cache: the FP32 graph with SmoothQuant's scales folded in (when any tensor was smoothed; it computes the
same function as the export), the per-channel input means bias correction needs, and the conv inputs' shifts
and scales (``--shift-scale``). ``RecoveredSource`` holds them and the cache's record of what was done;
``for_plan`` gives the graph a plan's variant is built from (the shift and scale, then bias correction, applied
to the plan's INT8 nodes only, so the graph belongs to that plan) and the record the variant's plan file carries
(``recovery``). The FP32 baseline is always the export itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx

from workbench.quantize.bias_correction import correct_biases
from workbench.quantize.plan import PrecisionPlan
from workbench.quantize.shift_scale import ChannelShift, apply_shift_scale, shifted_name

TECHNIQUES = ("smoothquant", "refine_ranges", "clip_search", "shift_scale", "bias_correction")
RANGE_TECHNIQUES = ("refine_ranges", "clip_search")  # only move ranges: the cache carries what they did


def int8_nodes(model: onnx.ModelProto, plan: PrecisionPlan) -> tuple[set[str], bool]:
    """The nodes ``plan`` puts in INT8 and whether their weight scales are stored as float16 (an FP16 float side)."""
    placements = plan.placements(model)
    nodes = {p.node for p in placements if p.precision == "int8"}
    return nodes, any(p.precision == "int8" and p.compute_type == "fp16" for p in placements)


def corrected(
    model: onnx.ModelProto, means: dict[str, np.ndarray], nodes: set[str], fp16: bool
) -> tuple[onnx.ModelProto, dict]:
    """``model`` with bias correction for a plan's INT8 ``nodes`` (weight scales stored as float16 when ``fp16``,
    as ``int8_nodes`` says) and the record: nodes corrected, the largest shift removed, each node's."""
    graph, shifts = correct_biases(model, means, nodes, np.float16 if fp16 else np.float32)
    record = {
        "nodes": len(shifts),
        "max_shift": max(shifts.values(), default=0.0),
        "scale_dtype": "float16" if fp16 else "float32",
        "shifts": shifts,
    }
    return graph, record


@dataclass
class RecoveredSource:
    """The FP32-side graph of a recovered calibration (the smoothed graph; None: the export itself), bias
    correction's input means (None: bias correction off), the cache's recovery record and the options it was
    made with (``options``: the cache's ``recovery`` key), the conv inputs' shifts (None: none)."""

    graph: onnx.ModelProto | None
    means: dict[str, np.ndarray] | None
    record: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    smoothed: bool = False
    shifts: dict[str, ChannelShift] | None = None

    @property
    def techniques(self) -> list[str]:
        """The techniques that were on, in ``TECHNIQUES``' order."""
        return [t for t in TECHNIQUES if self.options.get(t)]

    def source(self, export: onnx.ModelProto) -> onnx.ModelProto:
        """The graph quantized variants start from: the smoothed graph, else ``export``."""
        return self.graph if self.graph is not None else export

    def for_plan(self, plan: PrecisionPlan, source: onnx.ModelProto) -> tuple[onnx.ModelProto, dict]:
        """The graph ``plan``'s variant is built from (``source``, what ``source()`` gave, maybe at another
        opset, with bias correction for the plan's INT8 nodes when it is on) and the recovery record its plan
        file carries."""
        record: dict[str, Any] = {"techniques": self.techniques, **self.record}
        if plan.is_fp32:
            return source, record
        means = self.means
        if not self.shifts and means is None:
            return source, record
        nodes, fp16 = int8_nodes(source, plan)  # the shift adds no node the plan places
        if self.shifts:
            source, moved = apply_shift_scale(source, self.shifts, nodes, np.float16 if fp16 else np.float32)
            record["shift_scale"] = {**record.get("shift_scale", {}), "nodes": moved}
            if means is not None:
                # the shifted convs' rounded weights see x / s (ChannelShift.rounded_weights_mean)
                shifted = {
                    shifted_name(t): s.rounded_weights_mean(means[t])
                    for t, s in self.shifts.items()
                    if t in means
                }
                means = {**means, **shifted}
        if means is None:
            return source, record
        graph_out, record["bias_correction"] = corrected(source, means, nodes, fp16)
        return graph_out, record

    def provenance(self) -> dict[str, Any]:
        """What analysis records carry: the options, the techniques that were on, whether the graph is smoothed."""
        return {"options": self.options, "techniques": self.techniques, "smoothed_graph": self.smoothed}

"""Per-channel shift and scale of conv and MatMul inputs, chosen by the model's output (``calibrate --shift-scale``).

The transform itself (``workbench.quantize.shift_scale``) centres each input channel of a Conv or MatMul on zero
and brings the channels' widths together, so one symmetric INT8 scale serves them all. The inputs searched: every
Conv input read against a constant weight, and every MatMul input read against a constant weight whose values
are one-sided (a GELU's output, such as a feed-forward block's output projection reads: its lowest value above
``-ONE_SIDED`` times its ``CHANNEL_PERCENTILE`` percentile), since a centred input (a LayerNorm's output) gains
nothing from a shift and each searched input costs its scorings. Per input:

- each channel's range comes from the scoring clips the clipping search uses (one FP32 run with the searched inputs
  as outputs): the minimum and the ``CHANNEL_PERCENTILE`` percentile of its values; for a MatMul input (one value
  a frame, so a thin sample) the high end is at least the channel's largest magnitude over the calibration pass;
- candidates: the width exponent ``alpha`` in ``ALPHAS`` (0.5: halfway to equal widths, 1: equal widths), each
  with the shifted tensor's threshold at the percentiles ``Z_PERCENTILES`` of its magnitudes; and "off", the
  tensor as it is at its current threshold (the clipping search's choice when that ran);
- each is scored, as the clipping search scores, by the mean per-frame KL of the logits from FP32's with only
  that tensor's readers in INT8; "off" is kept on ties.

One scoring graph per tensor and ``alpha`` takes the threshold as an input, so its thresholds share one session:
the demo model's seven convolution inputs and seven one-sided MatMul inputs (the six feed-forward output
projections' and the feature projection's, a LayerNorm output that happens to be one-sided) cost 14 x 6 scorings
of 32 clips on top of the clipping search.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import helper
from tqdm import tqdm

from workbench.backends.onnxruntime import OnnxRuntimeRunner
from workbench.calibration.clip_search import (
    CLIP_SECONDS,
    cut_rows,
    mean_logit_kl,
    reference_logits,
    scoring_graph,
    weight_readers,
)
from workbench.model.export import INPUT
from workbench.quantize.shift_scale import ChannelShift, apply_shift_scale, shiftable_readers, shifted_name
from workbench.quiet import bars_on

ALPHAS = (0.5, 1.0)
Z_PERCENTILES = (99.9, 99.99, 99.999)
CHANNEL_PERCENTILE = 99.99
MAX_FRAMES = 32768  # values kept per channel for the percentiles (evenly thinned)
ONE_SIDED = 0.25  # a MatMul input is searched when its lowest value is above -ONE_SIDED x its high percentile


@dataclass(frozen=True)
class ShiftChoice:
    """One searched input's choice: the candidate (``off`` or ``alpha-A-percentile-P``), the threshold of the tensor
    its readers read, its logit KL, the KL of ``off``, every candidate's KL, and the shift (None: off)."""

    candidate: str
    amax: float
    kl: float
    off_kl: float
    scores: dict[str, float]
    shift: ChannelShift | None = field(default=None, compare=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "candidate": self.candidate,
            "amax": self.amax,
            "kl": self.kl,
            "off_kl": self.off_kl,
            "scores": self.scores,
        }


def channel_samples(
    model: onnx.ModelProto, tensors: dict[str, str], rows: Sequence[np.ndarray], threads: int | None
) -> dict[str, np.ndarray]:
    """Each tensor's values over ``rows`` as [channels, values] (FP32 run; at most ``MAX_FRAMES`` a channel);
    ``tensors``: name -> the op type reading it (channels on axis 1 for a Conv's input, last for a MatMul's)."""
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    known = {o.name for o in probe.graph.output}
    for name in tensors:
        if name not in known:
            probe.graph.output.append(helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    parts: dict[str, list[np.ndarray]] = {t: [] for t in tensors}
    with OnnxRuntimeRunner(
        probe.SerializeToString(), threads=threads, name="FP32 inputs of convs and MatMuls"
    ) as run:
        for out in run.infer_each({INPUT: x} for x in rows):
            for name in tensors:
                value = np.asarray(out[name], np.float32)
                if tensors[name] == "MatMul":
                    parts[name].append(value.reshape(-1, value.shape[-1]).T)
                else:
                    parts[name].append(
                        value.reshape(value.shape[1], -1) if value.ndim == 3 else value[0][None, :]
                    )
    samples = {}
    for name, pieces in parts.items():
        joined = np.concatenate(pieces, axis=1)
        step = max(1, -(-joined.shape[1] // MAX_FRAMES))
        samples[name] = np.ascontiguousarray(joined[:, ::step])
    return samples


def one_sided(values: np.ndarray) -> bool:
    """Whether a [channels, values] sample is one-sided: its lowest value above ``-ONE_SIDED`` times the
    ``CHANNEL_PERCENTILE`` percentile of its values."""
    high = float(np.percentile(values, CHANNEL_PERCENTILE))
    return high > 0 and float(values.min()) > -ONE_SIDED * high


def candidate_shifts(values: np.ndarray, top: np.ndarray | None = None) -> dict[float, ChannelShift]:
    """The shift of each ``alpha`` for a tensor's [channels, values] sample (alphas giving the same shift once);
    ``top``: each channel's largest magnitude over the whole calibration pass, which raises a channel's high end
    where the sample fell short of it."""
    low = values.min(axis=1)
    high = np.percentile(values, CHANNEL_PERCENTILE, axis=1)
    if top is not None and top.shape == high.shape:
        high = np.maximum(high, top)
    out: dict[float, ChannelShift] = {}
    for alpha in ALPHAS:
        shift = ChannelShift.for_range(low, high, alpha)
        if not any(np.allclose(shift.scale, s.scale) for s in out.values()):
            out[alpha] = shift
    return out


def search_shift_scale(
    model: onnx.ModelProto,
    amax: dict[str, float],
    inputs: Sequence[np.ndarray],
    threads: int | None = None,
    progress: bool = True,
    off_scores: dict[str, float] | None = None,
    channel_tops: dict[str, np.ndarray] | None = None,
) -> dict[str, ShiftChoice]:
    """A ``ShiftChoice`` per searched input of ``model`` with a range (``inputs``: the scoring clips'
    ``input_values`` rows, cut to ``CLIP_SECONDS``; ``off_scores``: the KL of each tensor at its current threshold,
    when the clipping search measured it on the same rows; ``channel_tops``: per tensor, each channel's largest
    magnitude over the calibration pass, taken for the MatMul inputs: one value a frame gives their sample a few
    thousand values a channel, whose top percentile falls short of the channel's range on other speech)."""
    if not inputs:
        return {}
    rows = cut_rows(inputs)
    readers = weight_readers(model, ("Conv", "MatMul"))
    targets: dict[str, list[str]] = {}
    kinds: dict[str, str] = {}
    for tensor, nodes in readers.items():
        usable = shiftable_readers(model, tensor, set(nodes))
        if tensor in amax and [n.name for n in usable] == nodes:
            targets[tensor], kinds[tensor] = nodes, usable[0].op_type
    if not targets:
        return {}
    samples = channel_samples(model, kinds, rows, threads)
    for tensor in [t for t, kind in kinds.items() if kind == "MatMul"]:
        if not one_sided(samples[tensor]):
            del targets[tensor], samples[tensor]
    reference = reference_logits(model, rows, threads)
    tops = channel_tops or {}
    shifts = {t: candidate_shifts(samples[t], tops.get(t) if kinds[t] == "MatMul" else None) for t in targets}
    total = sum(
        len(s) * len(Z_PERCENTILES) + (0 if off_scores and t in off_scores else 1) for t, s in shifts.items()
    )
    out: dict[str, ShiftChoice] = {}
    with tqdm(
        total=total,
        desc=f"shift and scale ({len(targets)} inputs)",
        unit="variant",
        disable=not (progress and bars_on()),
    ) as bar:
        for tensor, nodes in targets.items():
            scores: dict[str, float] = {}
            options: dict[str, tuple[float, ChannelShift | None]] = {"off": (amax[tensor], None)}
            if off_scores is not None and tensor in off_scores:
                scores["off"] = off_scores[tensor]
            else:
                graph = scoring_graph(model, tensor, nodes).SerializeToString()
                with OnnxRuntimeRunner(graph, threads=threads, name=f"shift-scale {tensor}") as run:
                    scores["off"] = mean_logit_kl(run, rows, reference, amax[tensor] / 127.0)
                bar.update()
            for alpha, shift in shifts[tensor].items():
                moved, _ = apply_shift_scale(model, {tensor: shift}, set(nodes), dtype=np.float32)
                graph = scoring_graph(moved, shifted_name(tensor), nodes).SerializeToString()
                magnitude = np.abs(shift.apply(samples[tensor], axis=0))
                with OnnxRuntimeRunner(graph, threads=threads, name=f"shift-scale {tensor}") as run:
                    for p in Z_PERCENTILES:
                        threshold = float(np.percentile(magnitude, p))
                        label = f"alpha-{alpha:g}-percentile-{p:g}"
                        if threshold > 0:
                            options[label] = (threshold, shift)
                            scores[label] = mean_logit_kl(run, rows, reference, threshold / 127.0)
                        bar.update()
            best = min(scores, key=lambda k: (scores[k], k != "off"))
            threshold, picked = options[best]
            out[tensor] = ShiftChoice(best, threshold, scores[best], scores["off"], scores, picked)
    return out


def shift_record(choices: dict[str, ShiftChoice], clips: int) -> dict[str, Any]:
    """What the cache's recovery record keeps of the search (the shifts themselves go to their own file)."""
    return {
        "tensors": len(choices),
        "changed": sum(c.shift is not None for c in choices.values()),
        "clips": clips,
        "clip_seconds": CLIP_SECONDS,
        "alphas": list(ALPHAS),
        "percentiles": list(Z_PERCENTILES),
        "channel_percentile": CHANNEL_PERCENTILE,
        "choices": {t: c.to_json() for t, c in choices.items()},
    }

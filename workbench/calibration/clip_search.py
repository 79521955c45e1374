"""Clipping search for convolution inputs by the model's output (``calibrate --clip-search``).

A feature encoder's convolutions read GELU outputs with a long tail: on the demo model half of a conv input's
values lie under 0.1 while its largest reach 8-11, so a per-tensor INT8 step set by the tail (percentile 99.99,
max, MSE of the tensor) is as large as the typical value, and the tensor's own error ranks the thresholds
wrongly (it is dominated by the rare large values the clipping cuts). StableQuant (2025) searches the clipping
of the CNN feature encoder per layer by the model's output instead; this does the same from the histograms the
calibration pass already kept:

- per Conv input read against a constant weight, candidate thresholds: the run's own, the percentiles
  ``PERCENTILES`` of its histogram and its maximum (a value equal to one before it is scored once);
- each candidate is scored by the mean per-frame KL divergence of the model's logits from FP32's on ``clips``
  calibration clips, with only that tensor's Conv nodes in INT8 (activation at the candidate threshold, weights
  per output channel) and the rest FP32;
- the run's own threshold is scored first and kept on ties: a tensor moves only where another is strictly better.

One scoring graph per tensor takes the threshold as an input (ONNX Runtime, from bytes), so the candidates of a
tensor share one session; the cost grows with the convs' count, the candidates' and the clips' (the demo model:
8 tensors x 6 candidates x 32 clips of at most ``CLIP_SECONDS``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from tqdm import tqdm

from workbench.backends.base import Runner
from workbench.backends.onnxruntime import OnnxRuntimeRunner
from workbench.calibration.collectors import StreamingStats
from workbench.calibration.methods import MethodSpec, compute_amax
from workbench.model.export import INPUT, OUTPUT
from workbench.model.logits import frame_kl_sum
from workbench.quantize.qdq import dequantized_weight, weight_channel_axis
from workbench.quiet import bars_on

PERCENTILES = (99.7, 99.8, 99.9, 99.95, 99.99)
DEFAULT_CLIPS = 32


@dataclass(frozen=True)
class ClipChoice:
    """One Conv input's threshold: the candidate picked, its logit KL, the run's own threshold's, every score."""

    candidate: str
    amax: float
    kl: float
    own_kl: float
    scores: dict[str, float]

    def to_json(self) -> dict:
        return asdict(self)


def weight_readers(model: onnx.ModelProto, ops: Sequence[str]) -> dict[str, list[str]]:
    """Input tensor -> the nodes of the op types ``ops`` that read it against a constant weight, in graph order."""
    inits = {i.name for i in model.graph.initializer}
    out: dict[str, list[str]] = {}
    for node in model.graph.node:
        if node.op_type in ops and len(node.input) > 1 and node.input[1] in inits:
            out.setdefault(node.input[0], []).append(node.name)
    return out


def conv_inputs(model: onnx.ModelProto) -> dict[str, list[str]]:
    """Conv input tensor -> the Conv nodes that read it against a constant weight, in graph order."""
    return weight_readers(model, ("Conv",))


def candidates(stats: StreamingStats, tensor: str, own: float) -> dict[str, float]:
    """The thresholds a tensor's clipping is chosen among (label -> amax), the run's own first."""
    top = stats.maxes.amax[tensor]
    hist = stats.histogram(tensor)
    found = {"own": own}
    for p in PERCENTILES:
        found[f"percentile-{p:g}"] = compute_amax(MethodSpec("percentile", p), top, hist)
    found["max"] = top
    out: dict[str, float] = {}
    for label, value in found.items():  # a candidate equal to one already listed is scored once
        if value > 0 and all(abs(value - seen) > 1e-6 * seen for seen in out.values()):
            out[label] = value
    return out


def spread(items: Sequence, count: int) -> list:
    """``count`` items evenly spread over ``items`` (all of them when there are fewer)."""
    if len(items) <= count:
        return list(items)
    return [items[int(k * len(items) / count)] for k in range(count)]


def scoring_rows(
    clips: Sequence[Any], audio: Callable[[Any], np.ndarray], prepare: Callable[[np.ndarray], np.ndarray]
) -> list[np.ndarray]:
    """The ``input_values`` rows the search scores on: ``DEFAULT_CLIPS`` of ``clips`` evenly spread (each read by
    ``audio``, made ``input_values`` by ``prepare``: the model's feature settings)."""
    return [prepare(audio(clip)) for clip in spread(clips, DEFAULT_CLIPS)]


SCALE_INPUT = "clip_search_scale"  # the activation scale, a graph input of the scoring graph
CLIP_SECONDS = 2.5  # scoring clips are cut to this: a conv's clipping shows in every frame


def scoring_graph(model: onnx.ModelProto, tensor: str, nodes: Sequence[str]) -> onnx.ModelProto:
    """``model`` with ``tensor`` quantized for ``nodes`` only (QuantizeLinear/DequantizeLinear, symmetric INT8,
    its scale the graph input ``SCALE_INPUT``) and their weights (Conv or MatMul) rounded to INT8 per output
    channel, as the INT8 variants quantize them; the rest stays FP32."""
    graph = onnx.ModelProto()
    graph.CopyFrom(model)
    g = graph.graph
    quantized, dequantized, zero = f"{tensor}__clip_q", f"{tensor}__clip_dq", f"{tensor}__clip_zero"
    g.input.append(helper.make_tensor_value_info(SCALE_INPUT, TensorProto.FLOAT, []))
    g.initializer.append(numpy_helper.from_array(np.zeros((), dtype=np.int8), zero))
    inits = {i.name: i for i in g.initializer}
    wanted = set(nodes)
    first = None
    for index, node in enumerate(g.node):
        if node.name in wanted:
            first = index if first is None else first
            node.input[0] = dequantized
            weight = inits[node.input[1]]
            values = numpy_helper.to_array(weight)
            axis = weight_channel_axis(node.op_type, 1, values.ndim, {})
            weight.CopyFrom(numpy_helper.from_array(dequantized_weight(values, axis), weight.name))
    assert first is not None
    qdq = [
        helper.make_node(
            "QuantizeLinear", [tensor, SCALE_INPUT, zero], [quantized], name=f"{tensor}__clip_Q"
        ),
        helper.make_node(
            "DequantizeLinear", [quantized, SCALE_INPUT, zero], [dequantized], name=f"{tensor}__clip_DQ"
        ),
    ]
    for offset, node in enumerate(qdq):
        g.node.insert(first + offset, node)
    return graph


def cut_rows(inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The scoring clips' ``input_values`` rows as float32 batches of one, cut to ``CLIP_SECONDS``."""
    return [np.asarray(x, dtype=np.float32)[None, : int(CLIP_SECONDS * 16000)] for x in inputs]


def reference_logits(
    model: onnx.ModelProto, rows: Sequence[np.ndarray], threads: int | None
) -> list[np.ndarray]:
    """The FP32 model's logits on ``rows``: what every candidate is scored against."""
    with OnnxRuntimeRunner(model.SerializeToString(), threads=threads, name="FP32") as run:
        return [out[OUTPUT] for out in run.infer_each({INPUT: x} for x in rows)]


def mean_logit_kl(
    run: Runner, rows: Sequence[np.ndarray], reference: Sequence[np.ndarray], scale: float
) -> float:
    """Mean per-frame KL of the scoring graph's logits (activation scale ``scale``) from ``reference``."""
    feed_scale = np.array(scale, dtype=np.float32)
    outputs = run.infer_each({INPUT: x, SCALE_INPUT: feed_scale} for x in rows)
    sums = [frame_kl_sum(ref, out[OUTPUT]) for ref, out in zip(reference, outputs)]
    return max(0.0, sum(k for k, _ in sums) / max(1, sum(n for _, n in sums)))


def search_clipping(
    model: onnx.ModelProto,
    stats: StreamingStats,
    amax: dict[str, float],
    inputs: Sequence[np.ndarray],
    threads: int | None = None,
    progress: bool = True,
) -> dict[str, ClipChoice]:
    """A ``ClipChoice`` per Conv input of ``model`` that has a range and a histogram (``inputs``: the scoring
    clips' ``input_values`` rows, float32, cut to ``CLIP_SECONDS``)."""
    if not inputs:
        return {}
    rows = cut_rows(inputs)
    targets = {
        t: (nodes, candidates(stats, t, amax[t]))
        for t, nodes in conv_inputs(model).items()
        if t in amax and stats.histogram(t) is not None
    }
    reference = reference_logits(model, rows, threads)
    total = sum(len(options) for _, options in targets.values())
    out: dict[str, ClipChoice] = {}
    with tqdm(
        total=total,
        desc=f"clip search ({len(targets)} conv inputs)",
        unit="variant",
        disable=not (progress and bars_on()),
    ) as bar:
        for tensor, (nodes, options) in targets.items():
            scores: dict[str, float] = {}
            graph = scoring_graph(model, tensor, nodes).SerializeToString()
            with OnnxRuntimeRunner(graph, threads=threads, name=f"clip search {tensor}") as run:
                for label, threshold in options.items():
                    scores[label] = mean_logit_kl(run, rows, reference, threshold / 127.0)
                    bar.update()
            best = min(scores, key=lambda k: (scores[k], k != "own"))
            out[tensor] = ClipChoice(best, options[best], scores[best], scores["own"], scores)
    return out


def clip_record(choices: dict[str, ClipChoice], clips: int) -> dict:
    """What the cache's recovery record keeps of a clipping search."""
    return {
        "tensors": len(choices),
        "changed": sum(c.candidate != "own" for c in choices.values()),
        "clips": clips,
        "candidates": ["own", *[f"percentile-{p:g}" for p in PERCENTILES], "max"],
        "clip_seconds": CLIP_SECONDS,
        "choices": {t: c.to_json() for t, c in choices.items()},
    }

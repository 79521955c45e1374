"""Range refinement: per tensor, the threshold among the range methods' that gives the layer the least output error.

One method for every tensor is a compromise: max keeps the outliers a few tensors need, percentile and
entropy clip the long tails most tensors have. Here every tensor gets each candidate method's threshold
(``CANDIDATES`` plus the run's own method), all computed from the histogram the pass already kept, and keeps
the one with the least error:

- ``output``: a tensor read by a MatMul/Gemm with a constant weight and sampled during the pass
  (``channels.ChannelStats``): mean squared error of ``Q(X) @ Q(W)`` against ``X @ W`` on the sampled rows,
  the weights quantized per output channel as the Q/DQ graph does;
- ``activation``: any other tensor (Conv inputs, the attention MatMuls' inputs): the expected squared INT8
  error of the tensor itself, over its histogram's bin centres.

The run's own method is scored first and kept on ties, so a tensor moves only when another threshold is
strictly better on the same score; refinement never picks a threshold worse than the best single method's.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from workbench.calibration.channels import ChannelStats
from workbench.calibration.collectors import Histogram, StreamingStats
from workbench.calibration.methods import MethodSpec, compute_amax
from workbench.quantize.smoothing import fake_quantize

CANDIDATES = (
    MethodSpec("max"),
    MethodSpec("entropy"),
    MethodSpec("percentile", 99.9),
    MethodSpec("percentile", 99.99),
    MethodSpec("percentile", 99.999),
    MethodSpec("mse"),
)


def label(spec: MethodSpec) -> str:
    return f"percentile-{spec.percentile:g}" if spec.name == "percentile" else spec.name


@dataclass(frozen=True)
class Choice:
    """One tensor's refined range: the method picked, its error and the run's own method's error."""

    method: str
    amax: float
    error: float
    own_error: float
    score: str  # "output" or "activation"

    def to_json(self) -> dict:
        return asdict(self)


def histogram_error(hist: Histogram, amax: float) -> float:
    """Expected squared INT8 error of |x| over the histogram's bin centres, for threshold ``amax``."""
    centres = (np.arange(hist.bins) + 0.5) * hist.bin_width
    counts = hist.counts.astype(np.float64)
    return float(np.sum(counts * (centres - fake_quantize(centres, amax)) ** 2) / max(1.0, counts.sum()))


def rows_error(rows: np.ndarray, weight_q: np.ndarray, exact: np.ndarray, amax: float) -> float:
    """Mean squared error of ``Q(rows) @ weight_q`` against ``exact``."""
    return float(np.mean((fake_quantize(rows, amax) @ weight_q - exact) ** 2))


def refine_tensor(
    name: str,
    stats: StreamingStats,
    spec: MethodSpec,
    rows: np.ndarray | None = None,
    weight: np.ndarray | None = None,
    weight_q: np.ndarray | None = None,
) -> Choice:
    """The best of the candidates' thresholds for one tensor (``weight``: [channels, outputs], float32, with
    its quantized twin ``weight_q``; both given with ``rows`` for the output score)."""
    top = stats.maxes.amax[name]
    hist = stats.histogram(name)
    specs = [spec] + [c for c in CANDIDATES if c != spec]
    if rows is not None and weight is not None and weight_q is not None and len(rows):
        exact = rows @ weight
        score, kind = (lambda t: rows_error(rows, weight_q, exact, t)), "output"
    elif hist is not None:
        score, kind = (lambda t: histogram_error(hist, t)), "activation"
    else:
        return Choice(label(spec), compute_amax(spec, top, hist), 0.0, 0.0, "none")
    best: Choice | None = None
    own_error = 0.0
    for candidate in specs:
        amax = compute_amax(candidate, top, hist)
        if amax <= 0:
            continue
        error = score(amax)
        if candidate == spec:
            own_error = error
        if best is None or error < best.error:
            best = Choice(label(candidate), amax, error, own_error, kind)
    assert best is not None
    return Choice(best.method, best.amax, best.error, own_error, kind)


def refine_ranges(
    stats: StreamingStats,
    spec: MethodSpec,
    channels: ChannelStats | None = None,
    weights: dict[str, tuple[np.ndarray, np.ndarray]] | None = None,
) -> dict[str, Choice]:
    """A ``Choice`` per tensor of ``stats``; ``weights``: tensor -> (weight [channels, outputs], quantized)
    for the tensors scored by output error."""
    weights = weights or {}
    out = {}
    for name in stats.maxes.amax:
        rows = channels.rows(name) if channels is not None else None
        weight, weight_q = weights.get(name, (None, None))
        out[name] = refine_tensor(name, stats, spec, rows, weight, weight_q)
    return out

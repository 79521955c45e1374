"""Latency measured on the deployment target as the search's objective (``search --latency-target ort-cpu``).

The strategies (``workbench.search.strategies``) find which plans pass the WER budget on the dev set and
return the one with the most INT8. Most INT8 is not always fastest: on ONNX Runtime's CPU EP a group in INT8
runs as fused integer kernels only where its layout allows (``workbench.quantize.ort_cpu``), and quantizing
and dequantizing around a small layer can cost more than it saves. When the target runs here, the search
can measure instead of assume:

- every plan the search evaluated and found passing is built in the form the target runs (the ONNX
  Runtime CPU flavour of the plan, FP32 outside INT8, weights as this CPU computes them exactly:
  ``workbench.quantize.targets``), in memory;
- all of them and FP32 are timed interleaved (``workbench.evaluate.latency.measure_interleaved``: warm-up,
  then rounds in rotated order) on dev-set clips cropped to their median duration, at ``batch_sizes``;
- each plan's latency ratio to FP32 gets a bootstrap interval over the paired rounds
  (``workbench.evaluate.verdict.latency_ratios``, at the first batch size) and the sign-off's rule picks:
  the *leader* has the lowest upper end, plans whose intervals reach down to it are equally fast, and among
  those the one with the most INT8 nodes wins (then the order evaluated).

Only ``ort-cpu`` runs here; other targets are refused with the reason.
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import onnx

from workbench.backends.cpu_int8 import int8_weight_type
from workbench.backends.onnxruntime import OnnxRuntimeRunner
from workbench.config import ORT_CPU_WEIGHTS
from workbench.errors import WorkbenchError
from workbench.evaluate.latency import LatencyConfig, measure_interleaved
from workbench.evaluate.verdict import Ratio, latency_ratios
from workbench.quantize.ort_cpu import cpu_flavour
from workbench.quantize.plan import PrecisionPlan, quantizable_nodes
from workbench.quantize.qdq import variant_model
from workbench.quantize.targets import CPU_TARGET, cpu_plan
from workbench.search.strategies import Candidate, SearchResult
from workbench.speech.records import Clip

LATENCY_TARGETS: tuple[str, ...] = (CPU_TARGET,)
BASELINE = "fp32"
DEFAULT_TIMING = LatencyConfig((1,), warmup=1, repeats=10)
MAX_TIMING_CLIPS = 8

logger = logging.getLogger(__name__)


def check_latency_target(target: str | None) -> None:
    """None (objective: most INT8) or a target whose latency can be measured here."""
    if target is not None and target not in LATENCY_TARGETS:
        raise WorkbenchError(
            f"--latency-target {target}: latency can be measured here only on {', '.join(LATENCY_TARGETS)} "
            "(TensorRT and the CUDA EP do not run on this machine's search path); drop --latency-target to "
            "search for the most INT8 within the budget"
        )


@dataclass
class LatencyChoice:
    """The timed plans (step -> name), their ratios to FP32, the equally fast ones and the one chosen."""

    target: str
    chosen: Candidate
    timed: list[str]
    ratios: dict[str, Ratio]
    equally_fast: list[str]
    int8_nodes: dict[str, int]
    config: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {
            "target": self.target,
            "chosen": self.chosen.evaluation.plan.name,
            "timed": list(self.timed),
            "ratios": {n: asdict(r) for n, r in self.ratios.items()},
            "equally_fast": list(self.equally_fast),
            "int8_nodes": dict(self.int8_nodes),
            "rule": "lowest upper end of the latency ratio to FP32 leads; plans whose intervals reach it are "
            "equally fast; among them the most INT8 nodes, then the order evaluated",
            "timing": self.config,
        }

    def lines(self) -> list[str]:
        shown = ", ".join(
            f"{n} x{r.estimate:.3f} [{r.low:.3f}, {r.high:.3f}]"
            for n, r in self.ratios.items()
            if n != BASELINE
        )
        return [
            f"latency on {self.target} (ratio to FP32, batch {next(iter(self.ratios.values())).batch}): {shown}",
            f"fastest passing plan on {self.target}: {self.chosen.evaluation.plan.name}"
            + (f" (equally fast: {', '.join(self.equally_fast)})" if len(self.equally_fast) > 1 else ""),
        ]


def choose(timed: Sequence[str], ratios: dict[str, Ratio], int8: dict[str, int]) -> tuple[str, list[str]]:
    """(the chosen plan, the equally fast plans) among ``timed`` (in the order evaluated): the leader has the
    lowest upper end of its ratio; plans whose lower end reaches that are equally fast; the most INT8 nodes
    among them wins, then the order."""
    order = list(timed)
    leader = min(order, key=lambda n: (ratios[n].high, order.index(n)))
    equal = [n for n in order if ratios[n].low <= ratios[leader].high]
    return min(equal, key=lambda n: (-int8[n], order.index(n))), equal


def target_model(fp32: onnx.ModelProto, amax: dict[str, float], plan: PrecisionPlan, weights: str) -> bytes:
    """The plan as the CPU target runs it: its ONNX Runtime CPU flavour, serialised."""
    qdq = variant_model(fp32, amax, cpu_plan(plan))
    return cpu_flavour(qdq, weights)[0].SerializeToString()


def fastest_passing(
    result: SearchResult,
    fp32: onnx.ModelProto,
    amax: dict[str, float],
    clips: Sequence[Clip],
    prepare: Callable,
    target: str = CPU_TARGET,
    threads: int | None = None,
    timing: LatencyConfig = DEFAULT_TIMING,
) -> LatencyChoice | None:
    """Time every passing plan of ``result`` on ``target`` against FP32 and choose by the rule above (None
    when no plan passed)."""
    check_latency_target(target)
    passing = [c for c in result.candidates if c.passed]
    if not passing:
        return None
    weights = int8_weight_type(ORT_CPU_WEIGHTS)[0]
    nodes = quantizable_nodes(fp32)
    runners = {BASELINE: OnnxRuntimeRunner(fp32.SerializeToString(), threads=threads, name=BASELINE)}
    by_name: dict[str, Candidate] = {}
    for cand in passing:
        plan = cand.evaluation.plan
        by_name[plan.name] = cand
        runners[plan.name] = OnnxRuntimeRunner(
            target_model(fp32, amax, plan, weights), threads=threads, name=plan.name
        )
    chosen_clips = [c.audio for c in clips[:MAX_TIMING_CLIPS]]
    seconds = float(statistics.median(c.utterance.duration_s for c in clips[:MAX_TIMING_CLIPS]))
    logger.info(
        f"timing {len(passing)} passing plan(s) and FP32 on {target}, interleaved: batch "
        f"{list(timing.batch_sizes)}, {timing.repeats} rounds, {seconds:.1f} s clips"
    )
    latencies = measure_interleaved(runners, {"dev": (seconds, chosen_clips)}, timing, prepare=prepare)
    ratios = latency_ratios(latencies, BASELINE, timing.batch_sizes[0])
    timed = [n for n in by_name if n in ratios]
    int8 = {n: sum(by_name[n].evaluation.plan.precision_of(x) == "int8" for x in nodes) for n in timed}
    best, equal = choose(timed, ratios, int8)
    config = {
        "batch_sizes": list(timing.batch_sizes),
        "warmup": timing.warmup,
        "repeats": timing.repeats,
        "clips": len(chosen_clips),
        "clip_seconds": round(seconds, 3),
        "weights": weights,
        "threads": threads,
    }
    return LatencyChoice(target, by_name[best], timed, ratios, equal, int8, config)

"""The embedded demo preset: the project ``python -m workbench demo`` runs through ``workbench run``'s pipeline.

The embedded demo model; synthetic speech (``demo``: 100 utterances per condition for calibration,
``DEMO_EVAL_PER_CONDITION`` per condition for evaluation, ``DEMO_DEV_PER_CONDITION`` per condition for a dev set
held out from both); percentile 99.99 with bias correction and the clipping search (``config.DEMO_RECOVERY``, named
here, not taken from the defaults, so the demo's verdicts stay put whatever the defaults become); the sensitivity
ranking on 2 clips per condition; the search on the held-out dev set with one finer step; a 3-gram language model
from the training texts for beam search; and two deployment targets: TensorRT (FP32, FP16, INT8 and the mixed plan;
timed here on ONNX Runtime CPU, so an accuracy sign-off, reports under ``demo-signoff``) and ONNX Runtime CPU (FP32,
the CPU flavours of INT8 and the mixed plan and ONNX Runtime's dynamic INT8, timed on the target: a winner, reports
under ``demo-signoff-cpu``).

``DemoOptions`` are the demo command's knobs: ``quick`` (tests: smaller ranking and search, no latency), ``full``
(every step at full size), ``shift_scale`` (calibrate with the shift and scale of conv and MatMul inputs too).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from workbench.config import DEMO_DEV_PER_CONDITION, DEMO_EVAL_PER_CONDITION, DEMO_RECOVERY, SetBuildConfig
from workbench.project.file import DataSpec, Project, RecipeSpec, SearchSpec, SignoffSpec, TargetSpec

if TYPE_CHECKING:
    from workbench.evaluate.latency import LatencyConfig

PRESET = "demo"
# The demo's calibration method. Percentile 99.99 rather than TensorRT's entropy: with entropy as NVIDIA's
# reference computes it, INT8-everywhere loses +4.13 WER points on demo-eval [95 % CI +2.83, +5.41] and the
# mixed search keeps 46.6 % of the groups in INT8 (benchmarks/results/calibration_methods_entropy_reference.json;
# entropy still clips attention-probability ranges to ~0.12), percentile 99.99 loses +0.93 [+0.16, +2.24] and
# keeps 75.9 % (benchmarks/results/calibration_methods.json). The verbs' default (config.DEFAULT_METHOD) is the same.
DEMO_METHOD = "percentile"
DEMO_PERCENTILE = 99.99
# beam search over the demo's evaluation set with flashlight-text (its word scores in Python): a beam of 32 keeps the
# step to minutes on a CPU; --quick (tests) estimates the language model from the first 2000 training sentences
DEMO_BEAM_WIDTH = 32
DEMO_QUICK_LM_SENTENCES = 2000
# What the demo scales down to fit a few minutes on a 2-core machine (``demo --full`` runs each at full size; each
# sign-off record and the demo's output say what was cut). Beam search with the LM (flashlight-text, its word scores
# in Python) costs more than the model on the CPU, so it decodes an even spread of the evaluation set; greedy
# decoding judges the verdict on every utterance.
DEMO_BEAM_UTTERANCES = 120
# the overflow check's outputs on the longest half of this many calibration clips and the rest spread over the set
# (every tensor on 16 of them, as at full size)
DEMO_OVERFLOW_CLIPS = 64
# finer steps of the demo's search (workbench.search.finer): each costs up to a whole dev-set evaluation; on the
# demo's dev set a second and more only add evaluations that fail
DEMO_FINER = 1


@dataclass(frozen=True)
class DemoOptions:
    """The demo command's knobs (``demo --help``)."""

    sets: SetBuildConfig = field(
        default_factory=lambda: replace(
            SetBuildConfig(),
            eval_per_condition=DEMO_EVAL_PER_CONDITION,
            dev_per_condition=DEMO_DEV_PER_CONDITION,
        )
    )
    quick: bool = False
    full: bool = False
    shift_scale: bool = False


def signoff_latency(target: str, full: bool) -> LatencyConfig | None:
    """The latency rounds of the demo's sign-off for ``target`` (``full``: demo --full); None: not timed."""
    from workbench.evaluate.latency import LatencyConfig  # numpy and the runners: only when a demo is built

    if target == "tensorrt":
        # timed on ONNX Runtime CPU, not on the target: the times inform and pick nothing, so only the full-size demo
        # takes them (batch 1 and 8, up to 15 rounds within about 10 s a point, never fewer than 5)
        return (
            LatencyConfig((1, 8), warmup=1, repeats=15, point_budget_s=10.0, min_repeats=5) if full else None
        )
    # the winner is judged at batch 1 (the gate batch): 10 interleaved rounds there either way; at full size the
    # batch-8 points (throughput, they pick nothing) get as many rounds as fit in about 15 s, never fewer than 5
    return LatencyConfig((1, 8) if full else (1,), warmup=1, repeats=10, point_budget_s=15.0, min_repeats=5)


def _target(name: str, report: str, decoder: str, options: DemoOptions) -> TargetSpec:
    latency = None if options.quick else signoff_latency(name, options.full)
    base = TargetSpec(name=name, report=report, decoder=decoder)
    if latency is None:
        return base
    return replace(
        base,
        latency=True,
        latency_batch_sizes=latency.batch_sizes,
        latency_warmup=latency.warmup,
        latency_repeats=latency.repeats,
        latency_budget_s=latency.point_budget_s,
        latency_min_repeats=latency.min_repeats,
    )


def demo_project(options: DemoOptions | None = None) -> Project:
    """The embedded demo preset as a project (``workbench run``'s settings, checked by the same pipeline)."""
    options = options or DemoOptions()
    quick, full = options.quick, options.full
    return Project(
        path=Path(f"<{PRESET} preset>"),
        name=options.sets.name,
        model="demo",
        data=DataSpec(split="synthetic", synthetic=options.sets),
        recipe=RecipeSpec(
            DEMO_METHOD, DEMO_PERCENTILE, replace(DEMO_RECOVERY, shift_scale=options.shift_scale)
        ),
        search=SearchSpec(
            per_condition=1 if quick else 2,
            refine=0,
            finer=0 if quick else DEMO_FINER,
            resamples=200 if quick else 1000,
        ),
        targets=(
            _target("tensorrt", f"{options.sets.name}-signoff", "greedy,beam+lm", options),
            _target("ort-cpu", f"{options.sets.name}-signoff-cpu", "greedy", options),
        ),
        signoff=SignoffSpec(
            beam_width=DEMO_BEAM_WIDTH,
            also_limit=None if full else DEMO_BEAM_UTTERANCES,
            overflow_clips=None if full else DEMO_OVERFLOW_CLIPS,
            training_lm=True,
            training_lm_sentences=DEMO_QUICK_LM_SENTENCES if quick else None,
        ),
        preset=PRESET,
    )

"""Sensitivity ranking: quantize one group at a time to INT8 and measure the damage to the output.

Every group gets a variant with only its nodes in INT8 and the rest at ``rest`` precision (FP32 or
FP16); optionally the inverse (everything INT8 except the group, which stays at ``rest``). Damage is
measured on the logits against one FP32 reference run of the same clips: mean per-frame
KL(FP32 ‖ variant) and the share of frames whose greedy token changes. Variants are built in memory
from one loaded FP32 model and run from bytes, so no files are written; this keeps every group of
Wav2Vec2-base within a few minutes on a CPU.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import onnx
from tqdm import tqdm

from workbench.backends.base import Runner
from workbench.backends.onnxruntime import OnnxRuntimeRunner
from workbench.compare.groups import Group, plan_for
from workbench.compare.metrics import OutputDamage
from workbench.errors import WorkbenchError
from workbench.evaluate.batching import logits_in
from workbench.model.export import INPUT
from workbench.model.features import normalise_audio
from workbench.quantize.plan import PrecisionPlan
from workbench.quantize.qdq import QDQ_FP16_OPSET, variant_model, with_opset
from workbench.quantize.recovered import RecoveredSource
from workbench.speech.records import Clip

logger = logging.getLogger(__name__)

RESTS = ("fp32", "fp16")


@dataclass
class Damage:
    """Output damage of one variant, overall and per condition."""

    overall: OutputDamage
    per_condition: dict[str, OutputDamage]

    def to_json(self) -> dict:
        return {"kl": self.overall.kl, "token_disagreement": self.overall.token_disagreement}


@dataclass
class GroupSensitivity:
    group: Group
    damage: Damage
    inverse: Damage | None = None

    def to_json(self, rank: int) -> dict:
        d = self.damage
        out = {
            "rank": rank,
            "name": self.group.name,
            "score": d.overall.kl,
            "kl": d.overall.kl,
            "token_disagreement": d.overall.token_disagreement,
            "kl_per_condition": {c: v.kl for c, v in sorted(d.per_condition.items())},
            "disagreement_per_condition": {
                c: v.token_disagreement for c, v in sorted(d.per_condition.items())
            },
            "nodes": list(self.group.nodes),
            "modules": self.group.modules,
            "graph_index": self.group.index,
        }
        if self.inverse is not None:
            out["inverse_kl"] = self.inverse.overall.kl
            out["inverse_token_disagreement"] = self.inverse.overall.token_disagreement
        return out


@dataclass
class SensitivityResult:
    groups: list[Group]
    results: list[GroupSensitivity]  # most sensitive first
    rest: str
    granularity: str
    clips: list[dict]
    rest_only: Damage
    int8_everywhere: Damage
    inverse: bool
    extra: dict = field(default_factory=dict)

    @property
    def ranking(self) -> list[str]:
        return [r.group.name for r in self.results]

    def to_json(self) -> dict:
        return {
            "granularity": self.granularity,
            "rest": self.rest,
            "metric": "logit_kl",
            "clips": self.clips,
            "rest_only": self.rest_only.to_json(),
            "int8_everywhere": self.int8_everywhere.to_json(),
            "inverse": self.inverse,
            "order": [g.name for g in self.groups],
            "layers": [r.to_json(i + 1) for i, r in enumerate(self.results)],
        }


class VariantRunner:
    """Builds variants of one in-memory FP32 model and runs clips through them (ONNX Runtime, from bytes);
    every plan gets the FP16 guard's FP32 nodes (``guard``: node -> reason). With ``recovered`` (a calibration's
    accuracy recovery, ``workbench.quantize.recovered``) every quantized variant is built from its FP32 source
    (the smoothed graph) with bias correction for the plan's INT8 nodes; the FP32 plan stays ``fp32``."""

    def __init__(
        self,
        fp32: onnx.ModelProto,
        amax: dict[str, float],
        threads: int | None = None,
        providers: Sequence[str] = ("CPUExecutionProvider",),
        prepare: Callable[[np.ndarray], np.ndarray] = normalise_audio,
        guard: dict[str, str] | None = None,
        recovered: RecoveredSource | None = None,
    ) -> None:
        self.fp32 = fp32
        self.recovered = recovered
        self.amax = amax
        self.threads = threads
        self.providers = tuple(providers)
        self.prepare = prepare  # clip -> input_values (the model's feature settings)
        self.guard = dict(guard or {})
        self._qdq_source: onnx.ModelProto | None = None

    def model_bytes(self, plan: PrecisionPlan) -> bytes:
        if plan.is_fp32:
            return self.fp32.SerializeToString()
        if self._qdq_source is None:  # one opset conversion for every variant (FP16 Q/DQ needs opset 19)
            base = self.recovered.source(self.fp32) if self.recovered is not None else self.fp32
            self._qdq_source = with_opset(base, QDQ_FP16_OPSET)
        plan = plan.with_guard(self.guard)
        source = self._qdq_source
        if self.recovered is not None:
            source, _ = self.recovered.for_plan(plan, source)
        return variant_model(source, self.amax, plan).SerializeToString()

    def runner(self, plan: PrecisionPlan, model_bytes: bytes | None = None) -> OnnxRuntimeRunner:
        """A runner of ``plan``'s variant (``model_bytes``: its bytes when already built by ``model_bytes``)."""
        data = self.model_bytes(plan) if model_bytes is None else model_bytes
        return OnnxRuntimeRunner(data, providers=self.providers, threads=self.threads, name=plan.name)

    def logits(self, plan: PrecisionPlan, clips: list[Clip]) -> list[np.ndarray]:
        with self.runner(plan) as run:
            return clip_logits(run, clips, self.prepare)


def clip_logits(
    runner: Runner, clips: Sequence[Clip], prepare: Callable[[np.ndarray], np.ndarray]
) -> list[np.ndarray]:
    """Each clip's logits through an active ``runner``, one clip per run (as every variant's)."""
    outputs = runner.infer_each({INPUT: prepare(c.audio)[None]} for c in clips)
    return [logits_in(runner, out) for out in outputs]


def damage_of(reference: list[np.ndarray], candidate: list[np.ndarray], clips: list[Clip]) -> Damage:
    overall = OutputDamage()
    per_cond: dict[str, OutputDamage] = {}
    for ref, cand, clip in zip(reference, candidate, clips):
        overall.add(ref, cand)
        per_cond.setdefault(clip.condition, OutputDamage()).add(ref, cand)
    return Damage(overall, per_cond)


Evaluate = Callable[[list[PrecisionPlan]], list[Damage]]


def variant_plans(groups: list[Group], rest: str, inverse: bool) -> list[PrecisionPlan]:
    """Every variant a ranking judges, in order: all at ``rest``, INT8 everywhere, then per group its
    only-this-group plan (and its all-but-this-group plan with ``inverse``)."""
    plans = [PrecisionPlan(f"all-{rest}", rest), PrecisionPlan("int8", "int8")]
    for group in groups:
        plans.append(plan_for(f"only-{group.name}", groups, "int8", rest, {group.name}))
        if inverse:
            plans.append(plan_for(f"except-{group.name}", groups, rest, "int8", {group.name}))
    return plans


def rank_groups(
    variants: VariantRunner,
    groups: list[Group],
    clips: list[Clip],
    rest: str = "fp32",
    inverse: bool = False,
    granularity: str = "group",
    progress: bool = True,
    evaluate: Evaluate | None = None,
) -> SensitivityResult:
    """Damage of quantizing each group alone (rest at ``rest``), most damaging first. The variants run one after
    the other here, against the FP32 logits computed here, or through ``evaluate`` (the plans -> their damages in
    order, e.g. on a Ray cluster, which computes its own FP32 reference)."""
    if rest not in RESTS:
        raise WorkbenchError(f"rest precision must be one of {RESTS}, not {rest!r}")
    if not clips:
        raise WorkbenchError("sensitivity needs at least one clip")
    plans = variant_plans(groups, rest, inverse)
    if evaluate is None:
        reference = variants.logits(PrecisionPlan("fp32"), clips)
        damages = []
        with tqdm(
            total=len(plans) - 2,
            desc=f"sensitivity ({len(groups)} groups, rest {rest})",
            unit="variant",
            disable=not progress,
        ) as bar:
            for k, plan in enumerate(plans):
                damages.append(damage_of(reference, variants.logits(plan, clips), clips))
                bar.update(k >= 2)
    else:
        damages = evaluate(plans)
    rest_only, everywhere, per_group = damages[0], damages[1], damages[2:]
    step = 2 if inverse else 1
    results = [
        GroupSensitivity(group, per_group[k * step], per_group[k * step + 1] if inverse else None)
        for k, group in enumerate(groups)
    ]
    results.sort(key=lambda r: (-r.damage.overall.kl, -r.damage.overall.token_disagreement, r.group.index))
    top = ", ".join(f"{r.group.name} ({r.damage.overall.kl:.3g})" for r in results[:3])
    logger.info(f"most sensitive: {top}")
    return SensitivityResult(
        groups, results, rest, granularity, [c.to_json() for c in clips], rest_only, everywhere, inverse
    )

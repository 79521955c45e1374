"""Layer-by-layer comparison of a quantized ONNX model against FP32 with Polygraphy's Python API.

Both models run in Polygraphy ONNX Runtime runners with every tensor the two graphs share marked as an
output (the FP32 graph's node outputs; the Q/DQ and Cast tensors of the quantized graph are renamed
and left out). Each clip is one iteration: Polygraphy's ``Comparator.compare_accuracy`` with
``SimpleCompareFunc`` checks every shared output at the given tolerances, and the workbench's own
sums give cosine, SQNR, relative L2 and max/mean absolute error pooled over clips (and per condition).
Rows come in the FP32 graph's order, so error growth along the network is visible; the first row
below the thresholds is where the error starts.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from tqdm import tqdm

from workbench.compare.groups import group_names, group_of
from workbench.compare.metrics import ErrorSums
from workbench.model.export import INPUT, module_of
from workbench.model.features import normalise_audio
from workbench.optional import import_optional
from workbench.quantize.plan import QUANTIZABLE_OPS, PrecisionPlan
from workbench.speech.records import Clip

logger = logging.getLogger(__name__)

COSINE_THRESHOLD = 0.99
SQNR_THRESHOLD_DB = 20.0


@dataclass(frozen=True)
class TensorSite:
    """Where a shared tensor comes from in the FP32 graph."""

    tensor: str
    node: str
    op: str
    group: str = ""  # the node's layer group (``workbench.compare.groups``)


@dataclass
class LayerRow:
    index: int
    site: TensorSite
    overall: ErrorSums
    per_condition: dict[str, ErrorSums]
    polygraphy_passed: bool | None  # None: not checked by Polygraphy (not a compute node or model output)
    precision: str | None  # the plan's placement of the node (int8/fp16/fp32/none), None without a plan
    reason: str | None = None  # why the plan keeps the node in FP32 (the FP16 guard), if it does

    @property
    def compute(self) -> bool:
        return self.site.op in QUANTIZABLE_OPS

    def significant(self, cosine: float = COSINE_THRESHOLD, sqnr_db: float = SQNR_THRESHOLD_DB) -> bool:
        return self.overall.cosine < cosine or self.overall.sqnr_db < sqnr_db

    def to_json(self, cosine: float = COSINE_THRESHOLD, sqnr_db: float = SQNR_THRESHOLD_DB) -> dict:
        s = self.overall
        module = module_of(self.site.node)
        return {
            "index": self.index,
            "tensor": self.site.tensor,
            "node": self.site.node,
            "op": self.site.op,
            "module": module,
            "group": self.site.group or group_of(self.site.node),
            "compute": self.compute,
            "precision": self.precision,
            "fp32_reason": self.reason,
            "numel": s.numel,
            "cosine": s.cosine,
            "sqnr_db": s.sqnr_db,
            "rel_l2": s.rel_l2,
            "max_abs_error": s.max_abs,
            "mean_abs_error": s.mean_abs,
            "polygraphy_passed": self.polygraphy_passed,
            "significant": self.significant(cosine, sqnr_db),
            "per_condition": {c: v.to_json() for c, v in sorted(self.per_condition.items())},
        }


@dataclass
class LayerComparison:
    rows: list[LayerRow]
    clips: list[dict]
    tolerances: dict[str, float]
    thresholds: dict[str, float] = field(
        default_factory=lambda: {"cosine": COSINE_THRESHOLD, "sqnr_db": SQNR_THRESHOLD_DB}
    )

    def first_significant(self) -> LayerRow | None:
        return next((r for r in self.rows if r.significant(**self.thresholds)), None)

    def to_json(self) -> dict:
        rows = [r.to_json(**self.thresholds) for r in self.rows]
        first = self.first_significant()
        first_json = None
        if first is not None:
            row = rows[first.index]
            first_json = {
                k: row[k] for k in ("index", "tensor", "node", "module", "group", "cosine", "sqnr_db")
            }
        output = rows[-1] if rows else None
        return {
            "clips": self.clips,
            "tolerances": self.tolerances,
            "thresholds": dict(self.thresholds),
            "first_significant": first_json,
            "rows": rows,
            "summary": {
                "tensors": len(rows),
                "significant": sum(r["significant"] for r in rows),
                "output": output,
            },
        }


def shared_sites(fp32: onnx.ModelProto, candidate: onnx.ModelProto) -> list[TensorSite]:
    """Node outputs of the FP32 graph (graph order, Constants skipped) that the candidate graph also produces.

    The model outputs come last so that the final row is the logits.
    """
    produced = {o for n in candidate.graph.node for o in n.output}
    graph_outputs = {o.name for o in fp32.graph.output}
    groups = group_names(fp32)
    sites = [
        TensorSite(o, n.name, n.op_type, groups[n.name])
        for n in fp32.graph.node
        if n.op_type != "Constant"
        for o in n.output
        if o and o in produced
    ]
    return [s for s in sites if s.tensor not in graph_outputs] + [
        s for s in sites if s.tensor in graph_outputs
    ]


def _runner(
    model: onnx.ModelProto,
    outputs: list[str],
    name: str,
    providers: Sequence[str] = ("CPUExecutionProvider",),
):
    """Polygraphy's ORT runner on a session with the workbench's options (where this CPU's U8S8 GEMMs
    saturate, int8 weights of fused integer nodes become uint8: the table shows INT8 error, not saturation)."""
    import os

    from workbench.backends.onnxruntime import open_session, session_options

    onnxrt = import_optional("polygraphy.backend.onnxrt", "pip install polygraphy")
    pg_onnx = import_optional("polygraphy.backend.onnx", "pip install polygraphy")
    marked = pg_onnx.BytesFromOnnx(pg_onnx.ModifyOutputs(model, outputs=outputs))

    def session():
        # one thread per usable CPU, as Polygraphy's SessionFromOnnx does (not every core may be ours)
        # a candidate refused with the exact-U8S8 option runs without it (``open_session``)
        return open_session(marked(), session_options(len(os.sched_getaffinity(0))), providers, name)[0]

    return onnxrt.OnnxrtRunner(session, name=name)


def compare_layers(
    fp32_path: Path,
    candidate_path: Path,
    clips: list[Clip],
    plan: PrecisionPlan | None = None,
    atol: float = 1e-2,
    rtol: float = 1e-2,
    progress: bool = True,
    providers: Sequence[str] = ("CPUExecutionProvider",),
    prepare: Callable[[np.ndarray], np.ndarray] = normalise_audio,
) -> LayerComparison:
    """Run both models on ``clips`` (made ``input_values`` by ``prepare``) and compare every shared float tensor."""
    comparator = import_optional("polygraphy.comparator", "pip install polygraphy")
    from polygraphy.logger import G_LOGGER

    fp32 = onnx.load(str(fp32_path))
    candidate = onnx.load(str(candidate_path))
    sites = shared_sites(fp32, candidate)
    names = [s.tensor for s in sites]
    # Polygraphy's own check (it also computes medians/quantiles for its log) runs on the compute-node
    # outputs and the model outputs; every shared tensor gets the workbench's metrics
    polygraphy_checked = {s.tensor for s in sites if s.op in QUANTIZABLE_OPS} | {
        o.name for o in fp32.graph.output
    }
    del candidate
    ref_runner = _runner(fp32, names, "fp32", providers)
    del fp32
    cand_runner = _runner(onnx.load(str(candidate_path)), names, "candidate", providers)
    sums: dict[str, ErrorSums] = {}
    per_cond: dict[str, dict[str, ErrorSums]] = {}
    passed: dict[str, bool] = {}
    compare_func = comparator.SimpleCompareFunc(atol=atol, rtol=rtol)
    severity = G_LOGGER.module_severity
    G_LOGGER.module_severity = G_LOGGER.CRITICAL
    try:
        with ref_runner, cand_runner:
            for clip in tqdm(clips, desc="layer comparison", unit="clip", disable=not progress):
                feed = {INPUT: prepare(clip.audio)[None]}
                ref_out = ref_runner.infer(feed)
                cand_out = cand_runner.infer(feed)
                floats = [n for n in names if np.issubdtype(np.asarray(ref_out[n]).dtype, np.floating)]
                checked = [n for n in floats if n in polygraphy_checked]
                results = comparator.RunResults(
                    [
                        (
                            "fp32",
                            [
                                comparator.IterationResult(
                                    {n: ref_out[n] for n in checked}, runner_name="fp32"
                                )
                            ],
                        ),
                        (
                            "candidate",
                            [
                                comparator.IterationResult(
                                    {n: cand_out[n] for n in checked}, runner_name="candidate"
                                )
                            ],
                        ),
                    ]
                )
                accuracy = comparator.Comparator.compare_accuracy(results, compare_func=compare_func)
                for per_output in accuracy[0][("fp32", "candidate")]:
                    for name, result in per_output.items():
                        passed[name] = passed.get(name, True) and bool(result)
                cond = per_cond.setdefault(clip.condition, {})
                for name in floats:
                    ref, cand = np.asarray(ref_out[name]), np.asarray(cand_out[name])
                    one = ErrorSums()
                    one.add(ref, cand.astype(ref.dtype, copy=False))
                    sums.setdefault(name, ErrorSums()).merge(one)
                    cond.setdefault(name, ErrorSums()).merge(one)
                del ref_out, cand_out, results, accuracy
    finally:
        G_LOGGER.module_severity = severity
    placed = (
        {p.node: p for p in plan.placements(onnx.load(str(fp32_path), load_external_data=False))}
        if plan is not None
        else {}
    )
    rows: list[LayerRow] = []
    for site in sites:
        if site.tensor not in sums:
            continue  # not a float tensor (shapes, indices)
        place = placed.get(site.node)
        rows.append(
            LayerRow(
                len(rows),
                site,
                sums[site.tensor],
                {c: v[site.tensor] for c, v in per_cond.items() if site.tensor in v},
                passed.get(site.tensor),
                place.precision if place else None,
                place.reason if place else None,
            )
        )
    logger.debug(f"compared {len(rows)} shared float tensors on {len(clips)} clips")
    return LayerComparison(rows, [c.to_json() for c in clips], {"atol": atol, "rtol": rtol})

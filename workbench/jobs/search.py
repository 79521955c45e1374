"""The search job: the mixed INT8/FP16 plan with the most INT8 that meets the WER budget on a dev set.

``run(SearchInputs)`` reads the sets first (dev set, sign-off set: a bad set fails before the model is
loaded or calibrated; the dev set must not be the sign-off set), prepares the FP32 ONNX + cache and runs
``run_search``: the sensitivity ranking is reused when its provenance matches (else computed by the
compare job), the strategies of ``workbench.search.strategies`` evaluate plans with
``workbench.search.evaluator``, and the search record, the found plan and its ONNX variant are written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx

from workbench.artifacts import read_json_artifact, sha256_file
from workbench.backends.factory import device_of, ort_providers
from workbench.compare import outputs
from workbench.compare.groups import node_groups
from workbench.compare.sensitivity import VariantRunner
from workbench.config import DEFAULT_BACKEND, SEARCH
from workbench.errors import WorkbenchError
from workbench.evaluate.batching import check_batch_size, default_batch_size
from workbench.evaluate.gates import GateConfig
from workbench.jobs import compare
from workbench.jobs.prepare import AnalysisInputs, Prepared, file_lines, named_set
from workbench.quantize.macs import node_macs, opt_samples
from workbench.quantize.plan import PrecisionPlan, quantizable_nodes
from workbench.quantize.qdq import build_variant
from workbench.search import outputs as search_outputs
from workbench.search.evaluator import DevEvaluator
from workbench.search.objective import OBJECTIVES, make_objective
from workbench.search.sequential import SEQUENTIAL_RULE
from workbench.search.strategies import describe, search_plan
from workbench.speech.overlap import disjoint, overlap, overlap_message
from workbench.speech.select import all_clips, clips_per_condition, require_utterances
from workbench.speech.store import SpeechSet


@dataclass(frozen=True)
class SearchInputs(AnalysisInputs):
    """The WER budget, the dev set (default: the calibration set) and how the search runs."""

    gates: GateConfig = field(default_factory=GateConfig)
    dev_set: str | Path | None = None
    dev_per_condition: int | None = None
    signoff_set: str | Path | None = None  # only its utterances' speakers and conditions are read
    margin: float = SEARCH.margin  # share of each gate held back on the dev set
    confidence: float = SEARCH.confidence  # probability the sign-off is predicted to pass
    sensitivity: Path | None = None  # default: reuse a matching ranking or compute one
    strategy: str = "bisect"
    refine: int = 2
    keep: str = "fp16"
    resamples: int = 1000
    seed: int = 0
    dev_blocks: int = SEARCH.dev_blocks  # the dev set bought block by block (workbench.search.sequential)
    objective: str = SEARCH.objective  # what the search maximises among passing plans
    batch_size: int | None = None  # evaluation batch (default: per backend)


def check(inputs: SearchInputs) -> None:
    """The input checks that need no model work: the search options, the files, the sets (the dev set must
    not be the sign-off set), the shared options. ``run`` starts with them; so does the dashboard's Run page."""
    if inputs.dev_per_condition is not None and inputs.dev_per_condition < 1:
        raise WorkbenchError("--dev-per-condition must be at least 1")
    if inputs.resamples < 100:
        raise WorkbenchError("--resamples must be at least 100")
    if not 0.0 <= inputs.margin < 1.0:
        raise WorkbenchError(
            f"--margin is a share of each gate held back: give a value from 0 up to (not "
            f"including) 1, not {inputs.margin:g} (default {SEARCH.margin:.2f})"
        )
    if not 0.5 <= inputs.confidence < 1.0:
        raise WorkbenchError(
            f"--confidence is the probability that the sign-off passes the found plan: give a value "
            f"from 0.5 up to (not including) 1, not {inputs.confidence:g} (default "
            f"{SEARCH.confidence:g})"
        )
    if inputs.refine < 0:
        raise WorkbenchError("--refine must be 0 or more")
    check_evidence_options(inputs.dev_blocks, inputs.objective, inputs.batch_size)
    if inputs.sensitivity is not None and not Path(inputs.sensitivity).is_file():
        raise WorkbenchError(
            f"--sensitivity {inputs.sensitivity} is not a file; give a sensitivity-*.json written "
            "by python -m workbench compare, or drop --sensitivity to reuse or compute one"
        )
    check_dev_apart(
        named_set(inputs.dev_set, "dev", inputs.calib_root)
        or named_set(inputs.calib_set, "calibration", inputs.calib_root),
        named_set(inputs.signoff_set, "sign-off", inputs.calib_root),
    )
    inputs.check()


def run(inputs: SearchInputs, log: Callable[[str], None] = print) -> SearchOutputs:
    """Check the options and sets, prepare the FP32 ONNX + cache, search, write the record and the found plan."""
    check(inputs)  # the sets are read before the model is loaded or calibrated, so a bad set fails at once
    dev_set = named_set(inputs.dev_set, "dev", inputs.calib_root)
    signoff_set = named_set(inputs.signoff_set, "sign-off", inputs.calib_root)
    prepared = inputs.prepare()
    return run_search(
        prepared,
        dev_set or prepared.calib_set,
        inputs.gates,
        sensitivity=inputs.sensitivity,
        per_condition=inputs.per_condition,
        dev_per_condition=inputs.dev_per_condition,
        strategy=inputs.strategy,
        refine=inputs.refine,
        keep=inputs.keep,
        resamples=inputs.resamples,
        seed=inputs.seed,
        granularity=inputs.granularity,
        out=inputs.out,
        threads=inputs.threads,
        progress=inputs.progress,
        signoff_set=signoff_set,
        log=log,
        backend=inputs.backend,
        margin=inputs.margin,
        confidence=inputs.confidence,
        dev_blocks=inputs.dev_blocks,
        objective=inputs.objective,
        batch_size=inputs.batch_size,
    )


def check_evidence_options(dev_blocks: int, objective: str, batch_size: int | None) -> None:
    """--dev-blocks, --objective and --batch-size."""
    if dev_blocks < 1:
        raise WorkbenchError(
            f"--dev-blocks must be at least 1 (1: the whole dev set at once), not {dev_blocks}"
        )
    if objective not in OBJECTIVES:
        raise WorkbenchError(f"--objective must be one of {', '.join(OBJECTIVES)}, not {objective!r}")
    if batch_size is not None:
        check_batch_size(batch_size)


def load_sensitivity(path: Path, prepared: Prepared) -> dict[str, Any]:
    """A sensitivity file made from this model, FP32 export and cache; anything else is refused."""
    data = read_json_artifact(
        path,
        outputs.SENSITIVITY_FORMAT,
        "give a sensitivity-*.json written by python -m "
        "workbench compare, or drop --sensitivity to reuse or compute one",
        what="sensitivity file",
    )
    mismatched = sensitivity_mismatches(data, prepared)
    if mismatched:
        raise WorkbenchError(
            f"sensitivity file {path} was made from another {', '.join(mismatched)}; recompute it "
            "with python -m workbench compare (or drop --sensitivity)"
        )
    return data


def sensitivity_mismatches(data: dict[str, Any], prepared: Prepared) -> list[str]:
    expected = prepared.provenance()
    found = data.get("provenance", {})
    return [k for k in ("model", "fp32_onnx", "cache") if found.get(k) != expected[k]]


@dataclass
class SearchOutputs:
    """Files written and the search record (``workbench-search/1``)."""

    files: dict[str, Path]
    data: dict[str, Any]

    def lines(self) -> list[str]:
        model = [compare.model_line(self.data["model"])] if self.data.get("model") else []
        return model + summary_lines(self.data) + file_lines(self.files)


def check_dev_apart(dev_set: SpeechSet, signoff_set: SpeechSet | None) -> None:
    """Refuse a dev set that is the sign-off set, or shares a speaker or a text with it (the sign-off must not
    judge on the data the search selected on)."""
    if signoff_set is None:
        return
    if signoff_set.content_hash == dev_set.content_hash:
        raise WorkbenchError(
            f"the dev set {dev_set.name} is the sign-off set; search on another set (--dev-set; "
            "default: the calibration set) so the sign-off does not judge on the data it selected on"
        )
    shared = overlap(dev_set.utterances, signoff_set.utterances)
    if not disjoint(shared):
        message = overlap_message(shared, dev_set.name, signoff_set.name, ("the dev set", "the sign-off set"))
        raise WorkbenchError(
            f"{message}: "
            "the search would select on what the sign-off judges; use a dev set held out from the "
            "sign-off set (the demo's sets step builds one; or 'data import --disjoint-from')"
        )


def run_search(
    prepared: Prepared,
    dev_set: SpeechSet,
    gates: GateConfig,
    *,
    sensitivity: Path | None = None,
    clips_set: SpeechSet | None = None,
    per_condition: int = 2,
    dev_per_condition: int | None = None,
    strategy: str = "bisect",
    refine: int = 2,
    keep: str = "fp16",
    resamples: int = 1000,
    seed: int = 0,
    granularity: str = "group",
    out: Path | None = None,
    threads: int | None = None,
    progress: bool = True,
    signoff_set: SpeechSet | None = None,
    log: Callable[[str], None] = print,
    backend: str = DEFAULT_BACKEND,
    margin: float = SEARCH.margin,
    confidence: float = SEARCH.confidence,
    dev_blocks: int = SEARCH.dev_blocks,
    objective: str = SEARCH.objective,
    batch_size: int | None = None,
) -> SearchOutputs:
    """Find the plan with the most INT8 whose sign-off ``dev_set`` predicts to pass ``gates`` (held back by
    ``margin``) with probability ``confidence``; write JSON/CSV, plan and ONNX.

    ``signoff_set``: the set the sign-off will judge on; only its utterances' speakers and conditions are used
    (never its audio or texts), to predict the sign-off's intervals from its number of bootstrap blocks.
    """
    check_dev_apart(dev_set, signoff_set)
    require_utterances(dev_set, "dev")
    folder = compare.analysis_folder(prepared, out)
    variant_folder = Path(out) if out else prepared.folder
    if dev_set.name.endswith("-eval"):
        log(
            f"warning: dev set {dev_set.name} looks like an evaluation set; judging the found plan on the same set "
            "in the sign-off would select on the data that judges it"
        )
    if sensitivity is None:
        default = outputs.sensitivity_path(folder, prepared.tag, "fp32", granularity)
        data = None
        if default.exists():
            try:
                data = load_sensitivity(default, prepared)
                sensitivity = default
                log(f"reusing sensitivity ranking {default}")
            except WorkbenchError as exc:
                log(f"not reusing {default.name}: {exc}")
        if data is None:
            made = compare.run_compare(
                prepared,
                clips_set or prepared.calib_set,
                per_condition,
                layers=False,
                out=out,
                granularity=granularity,
                threads=threads,
                progress=progress,
                log=log,
                backend=backend,
            )
            sensitivity, data = made.files["sensitivity_json"], made.sensitivity
    else:
        data = load_sensitivity(sensitivity, prepared)
    model = onnx.load(str(prepared.fp32_onnx))
    groups = node_groups(model, data.get("granularity", "group"))
    file_groups = {layer["name"]: list(layer["nodes"]) for layer in data["layers"]}
    if file_groups != {g.name: list(g.nodes) for g in groups}:
        raise WorkbenchError(
            f"sensitivity file {sensitivity} groups other nodes than this model has; recompute it"
        )
    ranking = [layer["name"] for layer in sorted(data["layers"], key=lambda r: r["rank"])]
    clips = clips_per_condition(dev_set, dev_per_condition) if dev_per_condition else all_clips(dev_set)
    unit = prepared.description.error_unit.upper()
    variants = VariantRunner(
        model,
        prepared.cache.amax(),
        threads,
        ort_providers(backend),
        prepared.description.prepare,
        prepared.guard,
    )
    signoff_n = len(signoff_set.utterances) if signoff_set is not None else None
    macs = node_macs(model, opt_samples([u.duration_s for u in (signoff_set or dev_set).utterances]))
    goal = make_objective(objective, macs, quantizable_nodes(model))
    batch = batch_size or default_batch_size(backend)
    evaluator = DevEvaluator(
        variants,
        clips,
        gates,
        resamples=resamples,
        seed=seed,
        progress=progress,
        signoff=signoff_set.utterances if signoff_set is not None else None,
        model=prepared.description,
        margin=margin,
        confidence=confidence,
        blocks=dev_blocks,
        batch_size=batch,
    )
    log(
        f"objective: {goal.description}; dev set bought in blocks of {evaluator.ends[0]} utterances "
        f"({len(evaluator.ends)} blocks), batches of {batch}"
    )
    log(
        f"dev set {dev_set.name}: {len(clips)} utterances, {len({c.utterance.speaker for c in clips})} speakers; "
        f"{unit} budget +{gates.max_wer_delta_points} pts overall, +{gates.max_condition_wer_delta_points} pts per "
        f"condition, judged against +{evaluator.gates.max_wer_delta_points:.2f} / "
        f"+{evaluator.gates.max_condition_wer_delta_points:.2f} on the upper end of the sign-off's paired 95% interval "
        f"as the dev interval predicts it, for a {confidence:.0%} chance that the sign-off passes"
        + (f" (margin {margin:.2f} of each gate)" if margin else "")
    )
    if any(f > 1.0 for f in evaluator.widening.values()):
        log(
            "judging dev intervals widened to the sign-off set's speakers: "
            + ", ".join(f"{check} x{f:.2f}" for check, f in evaluator.widening.items())
        )
    name = search_outputs.mixed_name(prepared.tag, dev_set.content_hash)
    result = search_plan(
        ranking,
        groups,
        evaluator.evaluate,
        keep=keep,
        refine=refine,
        name=name,
        strategy=strategy,
        log=log,
        objective=goal,
    )
    nodes = quantizable_nodes(model)
    files: dict[str, Path] = {}
    found_json = None
    if result.found is not None:
        found_plan = result.found.evaluation.plan
        plan = PrecisionPlan(
            name, found_plan.default, found_plan.overrides, found_plan.rest, found_plan.keep_fp32
        ).with_guard(prepared.guard)
        plan_path = variant_folder / f"plan.{name}.json"
        onnx_path = variant_folder / f"model.{name}.onnx"
        build_variant(prepared.fp32_onnx, prepared.cache.amax(), plan, onnx_path, with_plan=True)
        plan.save(plan_path, model)
        files.update({"plan": plan_path, "onnx": onnx_path})
        found_json = {
            "name": name,
            "plan": plan.to_json(),
            "plan_path": str(plan_path),
            "onnx_path": str(onnx_path),
            "onnx_sha256": sha256_file(onnx_path),
            "int8_share": plan.int8_share(nodes),
            "int8_macs_share": macs.int8_share(plan),
            "fp16_groups": [g for g in ranking if g in result.found.kept],
            "k": result.found.k,
            "step": result.found.step,
        }
    base = evaluator.baseline
    prov = {
        **prepared.provenance(),
        "dev_set": dev_set.content_hash,
        "sensitivity": sha256_file(sensitivity),
        "backend": backend,
        "device": device_of(backend),
    }
    data_out = {
        **outputs.header(search_outputs.SEARCH_FORMAT, prov),
        "model": prepared.description.record(),
        "error_unit": prepared.description.error_unit,
        "budget": {
            "max_wer_delta_points": gates.max_wer_delta_points,
            "max_condition_wer_delta_points": gates.max_condition_wer_delta_points,
            "judged_on": "upper end of the 95% paired bootstrap interval vs FP32",
            "signoff_utterances": signoff_n,
            "interval_widening": evaluator.widen,
            "interval_widening_per_check": evaluator.widening,
            "widening_rule": "sqrt(dev bootstrap blocks / sign-off bootstrap blocks) per check, at least 1 "
            "(blocks: speakers when known, else utterances)",
            "confidence": confidence,
            "block_ratio_per_check": evaluator.ratios,
            "prediction_rule": "per check: half-widths x max(1, sqrt(ratio)), both ends moved out by "
            "z(confidence) x se_dev x sqrt(1 + ratio), se_dev = dev interval width / "
            "(2 z(level)), ratio = dev blocks / sign-off blocks (1 without a sign-off set)",
            "margin": margin,
            "judged_against": {
                "max_wer_delta_points": evaluator.gates.max_wer_delta_points,
                "max_condition_wer_delta_points": evaluator.gates.max_condition_wer_delta_points,
            },
        },
        "dev_set": {
            "name": dev_set.name,
            "path": str(dev_set.path),
            "content_hash": dev_set.content_hash,
            "utterances": len(clips),
        },
        "strategy": describe(strategy, keep, refine),
        "objective": goal.to_json(),
        "macs": macs.to_json(),
        "sequential": {
            "blocks": len(evaluator.ends),
            "block_ends": evaluator.ends,
            "rule": SEQUENTIAL_RULE,
            "utterances_transcribed": sum(c.evaluation.utterances for c in result.candidates),
            "utterances_if_whole_set": len(clips) * len(result.candidates),
        },
        "batching": {"batch_size": batch, "backend": backend},
        "sensitivity_path": str(sensitivity),
        "ranking": ranking,
        "groups": {g.name: list(g.nodes) for g in groups},
        "baseline": {
            "name": "fp32",
            "wer": base.overall.wer.to_json(),
            "per_condition": {c: g.wer.to_json() for c, g in sorted(base.per_condition.items())},
            "mean_ms_per_utterance": base.mean_ms_per_utterance,
        },
        "candidates": [
            {
                "step": c.step,
                "phase": c.phase,
                "k": c.k,
                "name": c.evaluation.plan.name,
                "plan": c.evaluation.plan.to_json(),
                "fp16_groups": [g for g in ranking if g in c.kept],
                "int8_share": c.evaluation.plan.int8_share(nodes),
                "int8_macs_share": macs.int8_share(c.evaluation.plan),
                "objective": goal(c.evaluation.plan),
                "evidence": c.evaluation.evidence,
                "int8_nodes": sum(c.evaluation.plan.precision_of(n) == "int8" for n in nodes),
                "nodes": len(nodes),
                "passed": c.passed,
                "reasons": c.evaluation.reasons,
                "wer": c.evaluation.wer_json(),
                "delta": c.evaluation.delta_json(),
                "judged_delta_high": c.evaluation.judged,
                "latency": c.evaluation.latency_json(),
            }
            for c in result.candidates
        ],
        "evaluations": result.evaluations,
        "one_at_a_time_evaluations": result.one_at_a_time_evaluations,
        "per_group_evaluations": len(groups),
        "int8_everywhere_passes": result.int8_everywhere_passes,
        "found": found_json,
    }
    j, c = outputs.write_with_csv(
        search_outputs.search_path(folder, prepared.tag, dev_set.content_hash),
        data_out,
        search_outputs.search_csv_rows,
    )
    files.update({"search_json": j, "search_csv": c, "sensitivity_json": Path(sensitivity)})
    return SearchOutputs(files, data_out)


def summary_lines(data: dict[str, Any]) -> list[str]:
    """How many evaluations the search took and the plan it found."""
    found = data["found"]
    out = [
        f"full {str(data.get('error_unit', 'wer')).upper()} evaluations: {data['evaluations']} (one group at a "
        "time in ranking order: "
        f"{data['one_at_a_time_evaluations'] if data['one_at_a_time_evaluations'] is not None else 'n/a'}; "
        f"every group on its own: {data['per_group_evaluations']})"
    ]
    budget = data.get("budget", {})
    if "judged_against" in budget:
        against = budget["judged_against"]
        out.append(
            f"judged against +{against['max_wer_delta_points']:.2f} pts overall, "
            f"+{against['max_condition_wer_delta_points']:.2f} per condition (gates "
            f"+{budget['max_wer_delta_points']:g} / +{budget['max_condition_wer_delta_points']:g}"
            + (f" less a {budget['margin']:.2f} margin), " if budget.get("margin") else "), ")
            + f"dev intervals widened x{budget['interval_widening']:.2f} overall"
            + (
                f", predicted for a {budget['confidence']:.0%} chance that the sign-off passes"
                if "confidence" in budget
                else ""
            )
        )
    if data["int8_everywhere_passes"]:
        out.append("INT8 everywhere already meets the budget on the dev set")
    if found is None:
        out.append("no plan meets the budget on the dev set (not even every group in FP16)")
        return out
    macs = (
        f"{found['int8_macs_share'] * 100:.1f}% of MACs and "
        if found.get("int8_macs_share") is not None
        else ""
    )
    out.append(
        f"found plan {found['name']}: INT8 share {macs}{found['int8_share'] * 100:.1f}% of MatMul/Gemm/Conv "
        f"nodes, {len(found['fp16_groups'])} groups kept in FP16"
    )
    seq = data.get("sequential")
    if seq:
        out.append(
            f"dev utterances transcribed: {seq['utterances_transcribed']} (the whole dev set for every "
            f"candidate: {seq['utterances_if_whole_set']})"
        )
    return out

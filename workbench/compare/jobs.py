"""The ``compare`` and ``search`` jobs: inputs -> analyses -> files (what the CLI verbs and the demo call).

``run_compare``: layer-by-layer comparison of a quantized candidate (default INT8 everywhere) against
FP32 on a few clips per condition, and the per-group sensitivity ranking. ``run_search``: the
mixed-precision search on a dev set (default: the calibration set, never the sign-off evaluation set),
reusing a sensitivity file whose provenance matches or computing one; writes the found plan and its
ONNX variant.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import onnx

from workbench.artifacts import sha256_file
from workbench.compare import outputs
from workbench.compare.clips import all_clips, clips_per_condition, require_utterances
from workbench.compare.evaluator import DevEvaluator
from workbench.compare.groups import node_groups
from workbench.compare.layers import compare_layers
from workbench.compare.search import describe, search_plan
from workbench.compare.sensitivity import VariantRunner, rank_groups
from workbench.compare.setup import Prepared
from workbench.errors import WorkbenchError
from workbench.evaluate.gates import GateConfig
from workbench.quantize.plan import INT8, PrecisionPlan, quantizable_nodes
from workbench.quantize.qdq import build_variant
from workbench.speech.store import SpeechSet


@dataclass
class CompareOutputs:
    files: dict[str, Path] = field(default_factory=dict)
    layers: dict[str, Any] | None = None
    sensitivity: dict[str, Any] | None = None


def analysis_folder(prepared: Prepared, out: Path | None) -> Path:
    return Path(out) if out else prepared.folder / "compare"


def _candidate(prepared: Prepared, candidate: Path | None, plan: PrecisionPlan | None,
               name: str | None) -> tuple[str, Path, PrecisionPlan | None]:
    if candidate is not None:
        if not Path(candidate).is_file():
            raise WorkbenchError(f"candidate {candidate} does not exist")
        return name or Path(candidate).stem.removeprefix("model."), Path(candidate), plan
    plan = plan or INT8
    label = f"{plan.name}-{prepared.tag}" if plan.name != "int8" else f"int8-{prepared.tag}"
    path = prepared.int8_onnx if plan is INT8 and prepared.int8_onnx else prepared.folder / f"model.{label}.onnx"
    if plan is not INT8 or not path.exists():  # a plan file may have changed under the same name: rebuild
        build_variant(prepared.fp32_onnx, prepared.cache.amax(), plan, path)
    return name or label, path, plan


def run_compare(prepared: Prepared, clips_set: SpeechSet, per_condition: int = 2, *, candidate: Path | None = None,
                candidate_name: str | None = None, plan: PrecisionPlan | None = None, layers: bool = True,
                sensitivity: bool = True, rest: str = "fp32", inverse: bool = False, granularity: str = "group",
                out: Path | None = None, threads: int | None = None, atol: float = 1e-2, rtol: float = 1e-2,
                progress: bool = True, log: Callable[[str], None] = print) -> CompareOutputs:
    """Layer table and/or sensitivity ranking on ``per_condition`` clips of each condition of ``clips_set``."""
    if not layers and not sensitivity:
        raise WorkbenchError("nothing to do: both the layer comparison and the sensitivity ranking are off")
    folder = analysis_folder(prepared, out)
    clips = clips_per_condition(clips_set, per_condition)
    prov = {**outputs.base_provenance(prepared), "clips_set": clips_set.content_hash}
    result = CompareOutputs()
    if layers:
        name, path, cand_plan = _candidate(prepared, candidate, plan, candidate_name)
        log(f"layer comparison: fp32 vs {name} on {len(clips)} clips of {clips_set.name}")
        table = compare_layers(prepared.fp32_onnx, path, clips, cand_plan, atol=atol, rtol=rtol, progress=progress)
        data = {**outputs.header(outputs.LAYERS_FORMAT, {**prov, "candidate_onnx": sha256_file(path)}),
                "candidate": {"name": name, "path": str(path), "plan": cand_plan.to_json() if cand_plan else None},
                **table.to_json()}
        j, c = outputs.write_with_csv(outputs.layers_path(folder, name), data, outputs.layers_csv_rows)
        result.files.update({"layers_json": j, "layers_csv": c})
        result.layers = data
    if sensitivity:
        model = onnx.load(str(prepared.fp32_onnx))
        groups = node_groups(model, granularity)
        ranked = rank_groups(VariantRunner(model, prepared.cache.amax(), threads), groups, clips, rest, inverse,
                             granularity, progress=progress, log=log)
        data = {**outputs.header(outputs.SENSITIVITY_FORMAT, prov), **ranked.to_json()}
        j, c = outputs.write_with_csv(outputs.sensitivity_path(folder, prepared.tag, rest, granularity), data,
                                      outputs.sensitivity_csv_rows)
        result.files.update({"sensitivity_json": j, "sensitivity_csv": c})
        result.sensitivity = data
    return result


def load_sensitivity(path: Path, prepared: Prepared) -> dict[str, Any]:
    """A sensitivity file made from this model, FP32 export and cache; anything else is refused."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # ValueError: bad JSON or bytes that are not UTF-8
        raise WorkbenchError(f"cannot read sensitivity file {path} ({exc}); give a sensitivity-*.json written by "
                             "python -m workbench compare, or drop --sensitivity to reuse or compute one") from exc
    if not isinstance(data, dict) or data.get("format") != outputs.SENSITIVITY_FORMAT:
        raise WorkbenchError(f"{path} is not a sensitivity file ({outputs.SENSITIVITY_FORMAT}); make one with "
                             "python -m workbench compare")
    mismatched = sensitivity_mismatches(data, prepared)
    if mismatched:
        raise WorkbenchError(f"sensitivity file {path} was made from another {', '.join(mismatched)}; recompute it "
                             "with python -m workbench compare (or drop --sensitivity)")
    return data


def sensitivity_mismatches(data: dict[str, Any], prepared: Prepared) -> list[str]:
    expected = outputs.base_provenance(prepared)
    found = data.get("provenance", {})
    return [k for k in ("model", "fp32_onnx", "cache") if found.get(k) != expected[k]]


@dataclass
class SearchOutputs:
    files: dict[str, Path]
    data: dict[str, Any]


def check_dev_apart(dev_set: SpeechSet, signoff_set: SpeechSet | None) -> None:
    """Refuse a dev set that is the sign-off set (the sign-off must not judge on the data the search selected on)."""
    if signoff_set is not None and signoff_set.content_hash == dev_set.content_hash:
        raise WorkbenchError(f"the dev set {dev_set.name} is the sign-off set; search on another set (--dev-set; "
                             "default: the calibration set) so the sign-off does not judge on the data it selected on")


def run_search(prepared: Prepared, dev_set: SpeechSet, gates: GateConfig, *, sensitivity: Path | None = None,
               clips_set: SpeechSet | None = None, per_condition: int = 2, dev_per_condition: int | None = None,
               strategy: str = "bisect", refine: int = 2, keep: str = "fp16", resamples: int = 1000, seed: int = 0,
               granularity: str = "group",
               out: Path | None = None, threads: int | None = None, progress: bool = True,
               signoff_set: SpeechSet | None = None, log: Callable[[str], None] = print) -> SearchOutputs:
    """Find the plan with the most INT8 that meets ``gates`` on ``dev_set``; write JSON/CSV, plan and ONNX.

    ``signoff_set``: the set the sign-off will judge on; only its size is used (never its audio), to
    judge dev-set intervals widened to that size.
    """
    check_dev_apart(dev_set, signoff_set)
    require_utterances(dev_set, "dev")
    folder = analysis_folder(prepared, out)
    variant_folder = Path(out) if out else prepared.folder
    if dev_set.name.endswith("-eval"):
        log(f"warning: dev set {dev_set.name} looks like an evaluation set; judging the found plan on the same set "
            "in the sign-off would select on the data that judges it")
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
            made = run_compare(prepared, clips_set or prepared.calib_set, per_condition, layers=False, out=out,
                               granularity=granularity, threads=threads, progress=progress, log=log)
            sensitivity, data = made.files["sensitivity_json"], made.sensitivity
    else:
        data = load_sensitivity(sensitivity, prepared)
    model = onnx.load(str(prepared.fp32_onnx))
    groups = node_groups(model, data.get("granularity", "group"))
    file_groups = {layer["name"]: list(layer["nodes"]) for layer in data["layers"]}
    if file_groups != {g.name: list(g.nodes) for g in groups}:
        raise WorkbenchError(f"sensitivity file {sensitivity} groups other nodes than this model has; recompute it")
    ranking = [layer["name"] for layer in sorted(data["layers"], key=lambda r: r["rank"])]
    clips = clips_per_condition(dev_set, dev_per_condition) if dev_per_condition else all_clips(dev_set)
    log(f"dev set {dev_set.name}: {len(clips)} utterances; budget +{gates.max_wer_delta_points} pts overall, "
        f"+{gates.max_condition_wer_delta_points} pts per condition (upper end of the paired 95% interval)")
    variants = VariantRunner(model, prepared.cache.amax(), threads)
    signoff_n = len(signoff_set.utterances) if signoff_set is not None else None
    evaluator = DevEvaluator(variants, clips, gates, resamples=resamples, seed=seed, progress=progress,
                             signoff_utterances=signoff_n)
    if evaluator.widen > 1.0:
        log(f"judging dev intervals widened x{evaluator.widen:.2f} to the sign-off set's {signoff_n} utterances")
    name = outputs.mixed_name(prepared.tag, dev_set.content_hash)
    result = search_plan(ranking, groups, evaluator.evaluate, keep=keep, refine=refine, name=name,
                         strategy=strategy, log=log)
    nodes = quantizable_nodes(model)
    files: dict[str, Path] = {}
    found_json = None
    if result.found is not None:
        plan = PrecisionPlan(name, result.found.evaluation.plan.default, result.found.evaluation.plan.overrides)
        plan_path = variant_folder / f"plan.{name}.json"
        onnx_path = variant_folder / f"model.{name}.onnx"
        build_variant(prepared.fp32_onnx, prepared.cache.amax(), plan, onnx_path)
        plan.save(plan_path)
        files.update({"plan": plan_path, "onnx": onnx_path})
        found_json = {"name": name, "plan": plan.to_json(), "plan_path": str(plan_path), "onnx_path": str(onnx_path),
                      "onnx_sha256": sha256_file(onnx_path), "int8_share": plan.int8_share(nodes),
                      "fp16_groups": [g for g in ranking if g in result.found.kept], "k": result.found.k,
                      "step": result.found.step}
    base = evaluator.baseline
    prov = {**outputs.base_provenance(prepared), "dev_set": dev_set.content_hash,
            "sensitivity": sha256_file(sensitivity)}
    data_out = {
        **outputs.header(outputs.SEARCH_FORMAT, prov),
        "budget": {"max_wer_delta_points": gates.max_wer_delta_points,
                   "max_condition_wer_delta_points": gates.max_condition_wer_delta_points,
                   "judged_on": "upper end of the 95% paired bootstrap interval vs FP32",
                   "signoff_utterances": signoff_n, "interval_widening": evaluator.widen},
        "dev_set": {"name": dev_set.name, "path": str(dev_set.path), "content_hash": dev_set.content_hash,
                    "utterances": len(clips)},
        "strategy": describe(strategy, keep, refine), "sensitivity_path": str(sensitivity),
        "ranking": ranking, "groups": {g.name: list(g.nodes) for g in groups},
        "baseline": {"name": "fp32", "wer": base.overall.wer.to_json(),
                     "per_condition": {c: g.wer.to_json() for c, g in sorted(base.per_condition.items())},
                     "mean_ms_per_utterance": base.mean_ms_per_utterance},
        "candidates": [{"step": c.step, "phase": c.phase, "k": c.k, "name": c.evaluation.plan.name,
                        "plan": c.evaluation.plan.to_json(), "fp16_groups": [g for g in ranking if g in c.kept],
                        "int8_share": c.evaluation.plan.int8_share(nodes),
                        "int8_nodes": sum(c.evaluation.plan.precision_of(n) == "int8" for n in nodes),
                        "nodes": len(nodes), "passed": c.passed, "reasons": c.evaluation.reasons,
                        "wer": c.evaluation.wer_json(), "delta": c.evaluation.delta_json(),
                        "judged_delta_high": c.evaluation.judged,
                        "latency": c.evaluation.latency_json()} for c in result.candidates],
        "evaluations": result.evaluations, "one_at_a_time_evaluations": result.one_at_a_time_evaluations,
        "per_group_evaluations": len(groups), "int8_everywhere_passes": result.int8_everywhere_passes,
        "found": found_json,
    }
    j, c = outputs.write_with_csv(outputs.search_path(folder, prepared.tag, dev_set.content_hash), data_out,
                                  outputs.search_csv_rows)
    files.update({"search_json": j, "search_csv": c, "sensitivity_json": Path(sensitivity)})
    return SearchOutputs(files, data_out)

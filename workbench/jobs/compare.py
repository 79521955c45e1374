"""The compare job: layer-by-layer comparison of a quantized candidate against FP32, and the sensitivity ranking.

``run(CompareInputs)`` reads what the user names first (plan file, candidate, clips set), so a bad file
fails before the model is loaded or calibrated, then prepares the FP32 ONNX + cache (``jobs.prepare``)
and runs ``run_compare``: the layer table (default candidate: INT8 everywhere) on a few clips per
condition, and the per-group sensitivity ranking. Writes ``layers-<candidate>.json/.csv`` and
``sensitivity-<method>-<calib12>-rest-<rest>.json/.csv`` under ``engines/<model hash 12>/compare/``
(or ``out``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx

from workbench.artifacts import sha256_file
from workbench.backends.devices import device_of
from workbench.backends.factory import ort_providers
from workbench.cluster.address import ClusterAddress, require_ray
from workbench.compare import outputs
from workbench.compare.groups import node_groups
from workbench.compare.layers import compare_layers
from workbench.compare.sensitivity import rank_groups
from workbench.config import DEFAULT_BACKEND
from workbench.errors import WorkbenchError
from workbench.inputs.candidates import check_candidate
from workbench.jobs.prepare import AnalysisInputs, Prepared, file_lines, named_set
from workbench.quantize.plan import INT8, PrecisionPlan, check_user_plan_name
from workbench.speech.select import clips_per_condition
from workbench.speech.store import SpeechSet

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CompareInputs(AnalysisInputs):
    """What to compare: a candidate ONNX, a plan file's variant or INT8 everywhere; which analyses run."""

    clips_set: str | Path | None = None  # default: the calibration set
    candidate: Path | None = None
    plan: Path | None = None
    rest: str = "fp32"
    inverse: bool = False
    layers: bool = True
    sensitivity: bool = True
    atol: float = 1e-2
    rtol: float = 1e-2
    ray: str | None = (
        None  # spread the sensitivity ranking's variants over a Ray cluster (``workbench.cluster``)
    )


@dataclass
class CompareResult:
    """Files written, and the layer table / sensitivity ranking records (None when not run)."""

    files: dict[str, Path] = field(default_factory=dict)
    layers: dict[str, Any] | None = None
    sensitivity: dict[str, Any] | None = None

    def lines(self) -> list[str]:
        record = (self.layers or self.sensitivity or {}).get("model")
        out: list[str] = [model_line(record)] if record else []
        if self.layers:
            out += layer_summary_lines(self.layers)
        if self.sensitivity:
            out += ranking_lines(self.sensitivity)
        return out + file_lines(self.files)


def check(inputs: CompareInputs) -> None:
    """The input checks that need no model work: the plan file, the candidate, the sets, the shared options.
    ``run`` starts with them; so does the dashboard's Run page before it starts a job."""
    if inputs.plan:
        check_user_plan_name(PrecisionPlan.load(inputs.plan))
    if inputs.candidate is not None and not Path(inputs.candidate).is_file():
        raise WorkbenchError(
            f"--candidate {inputs.candidate} is not a file; give a quantized ONNX model "
            "(or drop --candidate to compare INT8 everywhere)"
        )
    if inputs.candidate is not None:
        check_candidate("--candidate", Path(inputs.candidate))
    named_set(inputs.clips_set, "clips", inputs.calib_root)
    inputs.check()
    if inputs.ray is not None:
        ClusterAddress.parse(inputs.ray)
        require_ray()


def run(inputs: CompareInputs) -> CompareResult:
    """Check the user's files, prepare the FP32 ONNX + cache, write the layer table and sensitivity ranking."""
    check(inputs)
    plan = PrecisionPlan.load(inputs.plan) if inputs.plan else None
    clips_set = named_set(inputs.clips_set, "clips", inputs.calib_root)
    prepared = inputs.prepare()
    return run_compare(
        prepared,
        clips_set or prepared.calib_set,
        inputs.per_condition,
        candidate=inputs.candidate,
        plan=plan,
        layers=inputs.layers,
        sensitivity=inputs.sensitivity,
        rest=inputs.rest,
        inverse=inputs.inverse,
        granularity=inputs.granularity,
        out=inputs.out,
        threads=inputs.threads,
        atol=inputs.atol,
        rtol=inputs.rtol,
        progress=inputs.progress,
        backend=inputs.backend,
        ray=inputs.ray,
        assumed=inputs.assumed,
    )


def analysis_folder(prepared: Prepared, out: Path | None) -> Path:
    return Path(out) if out else prepared.folder / "compare"


def _candidate(
    prepared: Prepared, candidate: Path | None, plan: PrecisionPlan | None, name: str | None
) -> tuple[str, Path, PrecisionPlan | None]:
    if candidate is not None:
        if not Path(candidate).is_file():
            raise WorkbenchError(f"candidate {candidate} does not exist")
        return name or _candidate_name(prepared, Path(candidate)), Path(candidate), plan
    if plan is not None and plan is not INT8:
        check_user_plan_name(plan)
    plan = plan or INT8
    label = f"{plan.name}-{prepared.tag}"
    path = (
        prepared.int8_onnx if plan is INT8 and prepared.int8_onnx else prepared.folder / f"model.{label}.onnx"
    )
    if plan is not INT8 or not path.exists():  # a plan file may have changed under the same name: rebuild
        plan = plan.with_guard(prepared.guard)
        prepared.build(plan, path)
    return name or label, path, plan.with_guard(prepared.guard)


def _candidate_name(prepared: Prepared, candidate: Path) -> str:
    """A ``--candidate`` file's name in the layer table's file name: its stem, unless that is the built INT8
    variant's while the file is another (its table would overwrite the built one's)."""
    stem = candidate.stem.removeprefix("model.")
    label = f"{INT8.name}-{prepared.tag}"
    built = prepared.int8_onnx or prepared.folder / f"model.{label}.onnx"
    if stem == label and candidate.resolve() != built.resolve():
        return f"candidate-{stem}"
    return stem


def run_compare(
    prepared: Prepared,
    clips_set: SpeechSet,
    per_condition: int = 2,
    *,
    candidate: Path | None = None,
    candidate_name: str | None = None,
    plan: PrecisionPlan | None = None,
    layers: bool = True,
    sensitivity: bool = True,
    rest: str = "fp32",
    inverse: bool = False,
    granularity: str = "group",
    out: Path | None = None,
    threads: int | None = None,
    atol: float = 1e-2,
    rtol: float = 1e-2,
    progress: bool = True,
    backend: str = DEFAULT_BACKEND,
    ray: str | None = None,
    assumed: tuple[str, ...] = (),
) -> CompareResult:
    """Layer table and/or sensitivity ranking on ``per_condition`` clips of each condition of ``clips_set``;
    ``assumed``: what the verb assumed for left-out options, in each record."""
    if not layers and not sensitivity:
        raise WorkbenchError("nothing to do: both the layer comparison and the sensitivity ranking are off")
    folder = analysis_folder(prepared, out)
    clips = clips_per_condition(clips_set, per_condition)
    providers = ort_providers(backend)
    prov = {
        **prepared.provenance(),
        "clips_set": clips_set.content_hash,
        "backend": backend,
        "device": device_of(backend),
    }
    result = CompareResult()
    if layers:
        name, path, cand_plan = _candidate(prepared, candidate, plan, candidate_name)
        logger.info(f"layer comparison: fp32 vs {name} on {len(clips)} clips of {clips_set.name}")
        table = compare_layers(
            prepared.fp32_onnx,
            path,
            clips,
            cand_plan,
            atol=atol,
            rtol=rtol,
            progress=progress,
            providers=providers,
            prepare=prepared.description.prepare,
        )
        data = {
            **outputs.header(outputs.LAYERS_FORMAT, {**prov, "candidate_onnx": sha256_file(path)}),
            "model": prepared.description.record(),
            "assumed": list(assumed),
            "candidate": {
                "name": name,
                "path": str(path),
                "plan": cand_plan.to_json() if cand_plan else None,
            },
            **table.to_json(),
        }
        j, c = outputs.write_with_csv(outputs.layers_path(folder, name), data, outputs.layers_csv_rows)
        result.files.update({"layers_json": j, "layers_csv": c})
        result.layers = data
    if sensitivity:
        model = onnx.load(str(prepared.fp32_onnx))
        groups = node_groups(model, granularity)
        variants = prepared.variant_runner(model, threads, providers)
        if ray is not None and prepared.recovered is not None:
            raise WorkbenchError(
                "the calibration cache was made with accuracy recovery (--smoothquant, --bias-correction, "
                "--refine-ranges, --clip-search; the default recipe's), whose variants Ray workers do not build; run "
                "without --ray, or with --no-recovery"
            )
        if ray is None:
            ranked = rank_groups(variants, groups, clips, rest, inverse, granularity, progress=progress)
        else:
            from workbench.cluster.compare import spread_variants

            with spread_variants(ClusterAddress.parse(ray), variants, clips) as evaluate:
                ranked = rank_groups(variants, groups, clips, rest, inverse, granularity, evaluate=evaluate)
        data = {
            **outputs.header(outputs.SENSITIVITY_FORMAT, prov),
            "model": prepared.description.record(),
            "assumed": list(assumed),
            **ranked.to_json(),
        }
        j, c = outputs.write_with_csv(
            outputs.sensitivity_path(folder, prepared.tag, rest, granularity),
            data,
            outputs.sensitivity_csv_rows,
        )
        result.files.update({"sensitivity_json": j, "sensitivity_csv": c})
        result.sensitivity = data
    return result


def model_line(record: dict[str, Any]) -> str:
    """One line on the model an analysis ran on (its description's record)."""
    return (
        f"model: {record['architecture']} {record['source']} ({record['model_hash'][:12]}), errors in "
        f"{str(record['error_unit']).upper()}"
    )


def layer_summary_lines(data: dict[str, Any], top: int = 12) -> list[str]:
    """The layer table's compute rows (first ``top`` and the logits) and where the error starts."""
    first = data["first_significant"]
    compute = [r for r in data["rows"] if r["compute"] or r is data["rows"][-1]]
    out = [
        f"layers: {data['summary']['tensors']} shared tensors, {data['summary']['significant']} below "
        f"cosine {data['thresholds']['cosine']} / SQNR {data['thresholds']['sqnr_db']} dB",
        f"  {'#':>4} {'module':<48} {'prec':<5} {'cosine':>8} {'SQNR dB':>8} {'rel L2':>8} {'max abs':>9}",
    ]
    for r in compute[:top] + ([compute[-1]] if len(compute) > top else []):
        out.append(
            f"  {r['index']:>4} {r['module'][-48:]:<48} {r['precision'] or '-'!s:<5} {r['cosine']:>8.4f} "
            f"{r['sqnr_db']:>8.1f} {r['rel_l2']:>8.3f} {r['max_abs_error']:>9.3g}"
        )
    if first:
        out.append(
            f"  error first significant at row {first['index']}: {first['module']} ({first['tensor']}), "
            f"cosine {first['cosine']:.4f}, SQNR {first['sqnr_db']:.1f} dB"
        )
    else:
        out.append("  no tensor below the thresholds")
    return out


def ranking_lines(data: dict[str, Any], top: int = 10) -> list[str]:
    """The ``top`` most sensitive groups of a ranking."""
    out = [
        f"sensitivity (quantize one {data['granularity']} to INT8, rest {data['rest']}; KL vs FP32 logits): "
        f"INT8 everywhere KL {data['int8_everywhere']['kl']:.4f}, token disagreement "
        f"{data['int8_everywhere']['token_disagreement']:.3f}"
    ]
    for layer in data["layers"][:top]:
        out.append(
            f"  {layer['rank']:>3}. {layer['name']:<45} KL {layer['kl']:.4f}  tokens changed "
            f"{layer['token_disagreement'] * 100:5.1f}%"
        )
    return out

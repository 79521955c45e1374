"""The steps of ``workbench run`` after the sets: calibrate, compare, search and sign-off per target.

Each step is a pair of small functions of the run's ``Context`` (the project, the loaded model description and
sets, the results of earlier steps): ``*_inputs`` says what the step depends on (hashed by the runner: settings,
content hashes, upstream results' hashes) and ``*_run`` drives the existing job with loaded objects and returns
its result as plain JSON and the files it names (hashed too, so a reused result whose file changed runs again).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.model.description import ModelDescription
from workbench.pipeline.sets import ProjectSets
from workbench.pipeline.state import StepEntry
from workbench.project.file import Project, TargetSpec

StepOutput = tuple[dict[str, Any], list[Path]]


def print_lines(lines: list[str]) -> None:
    for line in lines:
        print(line)


@dataclass
class Context:
    """What every step reads: the project, the model (described once), the sets and earlier results."""

    project: Project
    model_path: Path  # the model folder
    model_hash: str  # its hash (cheap: what the steps' inputs name)
    engines: Path
    calib_root: Path
    reports: Path
    progress: bool = True
    sets: ProjectSets | None = None
    done: dict[str, StepEntry] = field(default_factory=dict)
    described: ModelDescription | None = None
    memo: Any = (
        None  # the sign-offs' shared overflow checks and transcripts (``jobs.signoff_memo.SignoffMemo``)
    )
    background: dict[str, Any] = field(default_factory=dict)  # futures of work begun ahead of its step

    @property
    def model(self) -> ModelDescription:
        """The model's description, made when a step first runs (a run that reuses every step never loads it)."""
        if self.described is None:
            from workbench.model.description import describe_model

            self.described = describe_model(self.model_path)
        return self.described

    def needs_sets(self) -> ProjectSets:
        if self.sets is None:
            raise WorkbenchError("the sets step has not run")
        return self.sets

    def result(self, step: str) -> dict[str, Any]:
        return self.done[step].result


def recovery_options(project: Project) -> Any:
    from workbench.calibration.recovery import RecoveryOptions

    return RecoveryOptions(**asdict(project.recipe.recovery))


def calibrate_inputs(ctx: Context) -> dict[str, Any]:
    return {
        "model": ctx.model_hash,
        "calib": ctx.needs_sets().calib.content_hash,
        "recipe": asdict(ctx.project.recipe),
    }


def calibrate_run(ctx: Context) -> StepOutput:
    from workbench.calibration.methods import MethodSpec
    from workbench.jobs import calibrate

    recipe = ctx.project.recipe
    result = calibrate.run(
        calibrate.CalibrateInputs(
            ctx.model,
            ctx.needs_sets().calib.path,
            MethodSpec(recipe.method, recipe.percentile),
            engines=ctx.engines,
            calib_root=ctx.calib_root,
            recovery=recovery_options(ctx.project),
        )
    )
    print_lines(result.lines())
    files = [result.fp32_onnx, result.int8_onnx, result.cache] + (
        [result.fp16_onnx] if result.fp16_onnx else []
    )
    return {
        "fp32": str(result.fp32_onnx),
        "fp16": str(result.fp16_onnx) if result.fp16_onnx else None,
        "int8": str(result.int8_onnx),
        "cache": str(result.cache),
        "method": recipe.method,
    }, files


def _analysis(ctx: Context) -> dict[str, Any]:
    calibrated = ctx.result("calibrate")
    return {
        "model": ctx.model_path,
        "calib_set": str(ctx.needs_sets().calib.path),
        "method": ctx.project.recipe.method,
        "cache": Path(calibrated["cache"]),
        "engines": ctx.engines,
        "calib_root": ctx.calib_root,
        "progress": ctx.progress,
    }


def compare_inputs(ctx: Context) -> dict[str, Any]:
    return {"calibrate": ctx.done["calibrate"].hash, "per_condition": ctx.project.search.per_condition}


def compare_run(ctx: Context) -> StepOutput:
    from workbench.jobs import compare

    result = compare.run(
        compare.CompareInputs(**_analysis(ctx), per_condition=ctx.project.search.per_condition)
    )
    print_lines(result.lines())
    sensitivity = result.files["sensitivity_json"]
    return {"sensitivity": str(sensitivity)}, [sensitivity]


def search_inputs(ctx: Context) -> dict[str, Any]:
    """The evaluation set is not among them: the search reads only its speakers and conditions to predict the
    sign-off's intervals, so a changed evaluation set re-runs the sign-off only (the record names the set it
    predicted for)."""
    dev = ctx.needs_sets().dev
    return {
        "compare": ctx.done["compare"].hash,
        "dev": dev.content_hash if dev is not None else None,
        "gates": ctx.project.gates.to_json(),
        "search": asdict(ctx.project.search),
    }


def search_run(ctx: Context) -> StepOutput:
    from workbench.jobs import search

    sets = ctx.needs_sets()
    if sets.dev is None:
        raise WorkbenchError(
            "the search needs a dev set apart from the calibration and evaluation sets: give [data] dev, or "
            "[search] enabled = false"
        )
    spec = ctx.project.search
    held_out = ", held out from calibration and evaluation" if ctx.project.data.split != "given" else ""
    print(f"dev set: {sets.dev.name}{held_out} (the sign-off judges the found plan on {sets.eval.name})")
    result = search.run(
        search.SearchInputs(
            **_analysis(ctx),
            per_condition=spec.per_condition,
            gates=ctx.project.gates,
            dev_set=str(sets.dev.path),
            dev_per_condition=spec.dev_per_condition,
            signoff_set=str(sets.eval.path),
            sensitivity=Path(ctx.result("compare")["sensitivity"]),
            refine=spec.refine,
            finer=spec.finer,
            resamples=spec.resamples,
            confidence=spec.confidence,
        )
    )
    print_lines(result.lines())
    record = result.files["search_json"]
    found = result.data.get("found") or None
    files = [record] + ([Path(found["onnx_path"])] if found else [])
    return {
        "record": str(record),
        "found": str(found["onnx_path"]) if found else None,
        "found_name": found["name"] if found else None,
        "int8_share": found.get("int8_share") if found else None,
    }, files


def signoff_inputs(ctx: Context, target: TargetSpec) -> dict[str, Any]:
    sets = ctx.needs_sets()
    return {
        "calibrate": ctx.done["calibrate"].hash,
        "search": ctx.done["search"].hash if "search" in ctx.done else None,
        "language-model": ctx.done["language-model"].hash if "language-model" in ctx.done else None,
        "eval": sets.eval.content_hash,
        "calib": sets.calib.content_hash,
        "unlabelled": [s.content_hash for s in sets.unlabelled],
        "target": asdict(target),
        "gates": ctx.project.gates.to_json(),
        "signoff": asdict(ctx.project.signoff),
    }


def candidates_of(ctx: Context) -> tuple[list[tuple[str, Path]], list[str]]:
    """FP32, FP16, INT8 and the search's plan when it found one, and the lines that say where the plan came from."""
    calibrated = ctx.result("calibrate")
    candidates = [("fp32", Path(calibrated["fp32"]))]
    if calibrated.get("fp16"):
        candidates.append(("fp16", Path(calibrated["fp16"])))
    candidates.append((f"int8-{calibrated['method']}", Path(calibrated["int8"])))
    searched = ctx.result("search") if "search" in ctx.done else None
    if searched is None:
        return candidates, ["no mixed plan: the project's search is off"]
    if not searched["found"]:
        return candidates, [f"no mixed plan: the search {searched['record']} found none within the gates"]
    candidates.append(("mixed", Path(searched["found"])))
    return candidates, [f"mixed plan {searched['found_name']} from the search {searched['record']}"]


def signoff_run(ctx: Context, target: TargetSpec) -> StepOutput:
    from workbench.config import EvidenceConfig
    from workbench.evaluate.inference import InferenceConfig
    from workbench.jobs import signoff
    from workbench.jobs.signoff_memo import SignoffMemo

    sets, spec = ctx.needs_sets(), ctx.project.signoff
    decoders = decoders_of(ctx, target)
    candidates, lines = candidates_of(ctx)
    for line in lines:
        print(f"note: {line}")
    latency = _latency(target)
    print_lines(scaled_lines(ctx, target, [d.name for d in decoders], latency))
    out = ctx.reports.parent / (
        target.report or f"{ctx.project.name}-signoff-{target.name}"
    )  # beside the others: the dashboard lists it
    searched = ctx.result("search") if "search" in ctx.done else None
    inputs = signoff.SignoffInputs(
        eval_set=sets.eval,
        out_dir=out,
        candidates=candidates,
        model=ctx.model,
        calib_set=sets.calib,
        cache=Path(ctx.result("calibrate")["cache"]),
        gates=ctx.project.gates,
        engines=ctx.engines,
        calib_root=ctx.calib_root,
        sensitivity=Path(ctx.result("compare")["sensitivity"]) if "compare" in ctx.done else None,
        latency=latency,
        target=target.name,
        backend=target.backend,
        as_given=target.as_given,
        outside_profile=target.outside_profile,
        profile_min_s=target.min_seconds,
        profile_max_s=target.max_seconds,
        resamples=spec.resamples,
        seed=spec.seed,
        overflow_clips=spec.overflow_clips,
        inference=InferenceConfig(None, decoders[0]).check(),
        also_decoders=decoders[1:],
        also_limit=spec.also_limit,
        search=Path(searched["record"]) if searched and searched["found"] else None,
        unlabelled_sets=list(sets.unlabelled),
        evidence=EvidenceConfig(spec.min_speakers, spec.min_reference_words),
        assumed=[f"workbench run of {ctx.project.origin}", *lines],
    )
    if ctx.memo is None:
        ctx.memo = SignoffMemo()
    result = signoff.run(inputs, ctx.memo)
    print_lines(result.lines())
    record = result.record
    baseline = record["baseline"]
    passing = [n for n in record["decision"]["passing"] if n != baseline]
    return {
        "report": str(result.paths["html"]),
        "record": str(out / "report.json"),
        "line": record["decision"]["line"],
        "passing": passing,
        "recommendation": record["recommendation"],
    }, [out / "report.json"]


def decoders_of(ctx: Context, target: TargetSpec) -> list[Any]:
    """The target's decoders (its own, else ``[signoff] decoder``; the first judges). With the training-text language
    model (the demo preset) ``beam+lm`` takes the ``language-model`` step's file, and is left out, as that step said,
    when flashlight-text is missing."""
    from workbench.evaluate.inference import decoders_from_names

    spec = ctx.project.signoff
    names = [n.strip() for n in (target.decoder or spec.decoder).split(",") if n.strip()]
    lm = spec.lm
    if spec.training_lm:
        made = ctx.result("language-model")["lm"] if "language-model" in ctx.done else None
        lm = Path(made) if made else None
        if lm is None and len(names) > 1:
            names = [n for n in names if n != "beam+lm"]
    beam = any(n.startswith("beam") for n in names)
    return decoders_from_names(
        ",".join(names), spec.beam_width if beam else None, lm if "beam+lm" in names else None
    )


def scaled_lines(ctx: Context, target: TargetSpec, decoders: list[str], latency: Any) -> list[str]:
    """What the sign-off for ``target`` leaves out (the overflow check's clips, the other decoders' utterances) and
    how it times the candidates."""
    sets, spec = ctx.needs_sets(), ctx.project.signoff
    parts = []
    if spec.overflow_clips is not None:
        parts.append(
            f"overflow check outputs on {spec.overflow_clips} of {len(sets.calib.utterances)} calibration clips"
        )
    if spec.also_limit is not None and len(decoders) > 1:
        parts.append(
            f"{', '.join(decoders[1:])} on {spec.also_limit} of {len(sets.eval.utterances)} evaluation utterances "
            f"({decoders[0]} judges all of them)"
        )
    lines = [f"{target.name} sign-off scaled down: {', '.join(parts)}"] if parts else []
    return lines + [f"{target.name} latency: {latency_words(latency) if latency else 'not timed'}"]


def latency_words(latency: Any) -> str:
    batches = ", ".join(str(b) for b in latency.batch_sizes)
    if not latency.point_budget_s:
        return f"batch {batches}, {latency.repeats} interleaved rounds"
    return (
        f"batch {batches}, up to {latency.repeats} interleaved rounds within about {latency.point_budget_s:g} s a "
        f"point, never fewer than {min(latency.repeats, latency.min_repeats)}"
    )


def _latency(target: TargetSpec) -> Any:
    from workbench.evaluate.latency import LatencyConfig

    if not target.latency:
        return None
    return LatencyConfig(
        target.latency_batch_sizes,
        warmup=target.latency_warmup,
        repeats=target.latency_repeats,
        point_budget_s=target.latency_budget_s,
        min_repeats=target.latency_min_repeats,
    )

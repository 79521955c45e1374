"""Run a project's steps in order: each is reused when its inputs' hash matches a finished result, else run.

The steps: ``sets``, ``calibrate``, ``compare`` and ``search`` (when the project's search is on), ``language-model``
(when the sign-off estimates one from the demo's training texts: the demo preset; begun in the background alongside
``compare`` when it is to run), then ``signoff-<target>`` per deployment target. ``python -m workbench demo`` runs
the embedded demo preset (``workbench.project.demo``) through here too. Progress is one line as each step starts and one as it ends (``[n/total] step:``
running, then ran or reused and its seconds). The run state lives in ``<reports>/<project>/run-state.json`` (``workbench.pipeline.state``),
``summary.md`` beside it, and the reports in ``<reports>/<project>-signoff-<target>/`` (where the dashboard lists
reports).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.config import RUN_NOTHING_PASSES
from workbench.pipeline import language_model, steps
from workbench.pipeline.sets import ProjectSets, given_sets, inputs_of, split_sets, synthetic_sets
from workbench.pipeline.state import RunState, digest
from workbench.project.file import Project
from workbench.workspace import area_path


@dataclass(frozen=True)
class StepOutcome:
    name: str
    reused: bool
    seconds: float
    inputs: str  # the inputs' hash
    cpu_seconds: float = 0.0  # this process's and its ended workers' CPU time during the step

    def line(self) -> str:
        how = "reused (inputs unchanged)" if self.reused else "ran"
        return f"{self.name}: {how}, {self.seconds:.1f} s (inputs {self.inputs[:12]})"


@dataclass(frozen=True)
class TargetOutcome:
    target: str
    passing: list[str]  # candidates other than the FP32 baseline that pass every gate
    line: str
    report: str

    @property
    def passed(self) -> bool:
        return bool(self.passing)


@dataclass
class RunResult:
    project: Project
    folder: Path
    steps: list[StepOutcome] = field(default_factory=list)
    targets: list[TargetOutcome] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def exit_status(self) -> int:
        """0 when a candidate other than the baseline passes on every target, ``RUN_NOTHING_PASSES`` otherwise."""
        return 0 if self.targets and all(t.passed for t in self.targets) else RUN_NOTHING_PASSES

    @property
    def reused(self) -> list[str]:
        return [s.name for s in self.steps if s.reused]

    def lines(self) -> list[str]:
        out = [f"run of {self.project.origin}: {len(self.steps)} steps in {self.seconds:.1f} s"]
        out.append(f"reused: {', '.join(self.reused) or 'nothing'}")
        for t in self.targets:
            verdict = f"PASS ({', '.join(t.passing)})" if t.passed else "NOTHING PASSES"
            out.append(f"target {t.target}: {verdict}: {t.line}")
            out.append(f"  report: {t.report}")
        return out


def steps_of(project: Project) -> int:
    """How many steps a run of ``project`` has: sets, calibrate, compare, search (when on), the language model (when
    estimated from the training texts), a sign-off per target."""
    return 3 + int(project.search.enabled) + int(project.signoff.training_lm) + len(project.targets)


def cpu_seconds() -> float:
    """User + system time of this process and of its children that have ended (TTS and language-model workers)."""
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _step(
    state: RunState,
    ctx: steps.Context,
    result: RunResult,
    name: str,
    inputs: dict[str, Any],
    work: Callable[[], steps.StepOutput],
    say: Callable[[str], None],
) -> None:
    number = f"{len(result.steps) + 1}/{steps_of(ctx.project)}"
    key = digest(inputs)
    start, cpu = time.perf_counter(), cpu_seconds()
    found = state.reusable(name, key)
    reused = found is not None
    if found is None:
        say(f"[{number}] {name}: running")
        output, files = work()
        found = state.keep(name, key, output, files)
    outcome = StepOutcome(name, reused, time.perf_counter() - start, key, cpu_seconds() - cpu)
    ctx.done[name] = found
    result.steps.append(outcome)
    say(f"[{number}] {outcome.line()}")


def run_project(
    project: Project,
    engines: Path | None = None,
    calib_root: Path | None = None,
    reports: Path | None = None,
    progress: bool = True,
    say: Callable[[str], None] = print,
) -> RunResult:
    """Every step of ``project`` in order (reusing finished ones); the outcome per step and per target."""
    from workbench.model.folders import model_hash
    from workbench.resources import demo_model_dir

    started = time.perf_counter()
    folder = area_path("reports", reports) / project.name
    root = area_path("calib_sets", calib_root)
    state = RunState.load(folder)
    model = Path(demo_model_dir() if project.model == "demo" else project.model)
    ctx = steps.Context(
        project, model, model_hash(model), area_path("engines", engines), root, folder, progress
    )
    result = RunResult(project, folder)
    data = project.data

    def make_sets() -> steps.StepOutput:
        if data.split == "synthetic":
            made = synthetic_sets(data, root)
        elif data.split == "given":
            made = given_sets(data, root)
        else:
            made = split_sets(project.name, data, root, progress)
        return made.to_json(), made.files()

    _step(state, ctx, result, "sets", inputs_of(data, root), make_sets, say)
    ctx.sets = ProjectSets.from_json(ctx.result("sets"))
    _step(state, ctx, result, "calibrate", steps.calibrate_inputs(ctx), lambda: steps.calibrate_run(ctx), say)
    lm_inputs = language_model.inputs(ctx) if language_model.wanted(ctx) else None
    if lm_inputs is not None and state.reusable(language_model.STEP, digest(lm_inputs)) is None:
        language_model.start(ctx)  # in a worker while compare leaves most of a core idle
    _step(state, ctx, result, "compare", steps.compare_inputs(ctx), lambda: steps.compare_run(ctx), say)
    if project.search.enabled:
        _step(state, ctx, result, "search", steps.search_inputs(ctx), lambda: steps.search_run(ctx), say)
    if lm_inputs is not None:
        _step(state, ctx, result, language_model.STEP, lm_inputs, lambda: language_model.run(ctx), say)
    for target in project.targets:
        name = f"signoff-{target.name}"
        _step(
            state,
            ctx,
            result,
            name,
            steps.signoff_inputs(ctx, target),
            lambda target=target: steps.signoff_run(ctx, target),  # type: ignore[misc]
            say,
        )
        judged = ctx.result(name)
        result.targets.append(
            TargetOutcome(target.name, list(judged["passing"]), judged["line"], judged["report"])
        )
    result.seconds = time.perf_counter() - started
    return result

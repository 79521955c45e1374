"""The search job: the mixed INT8/FP16 plan with the most INT8 that meets the WER budget on a dev set.

``run(SearchInputs)`` reads the sets first (dev set, sign-off set: a bad set fails before the model is
loaded or calibrated; the dev set must not be the sign-off set), prepares the FP32 ONNX + cache and runs
``run_search``: the sensitivity ranking is reused when its provenance matches (else computed by the
compare job), the strategies of ``workbench.search.strategies`` evaluate plans with
``workbench.search.evaluator``, and the search record, the found plan and its ONNX variant are written. With
``dev_criterion="disagreement"`` the plans are judged on an unlabelled dev set against FP32's transcripts, within a
disagreement budget given or calibrated on the dev set (``workbench.search.disagreement``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import onnx

from workbench.artifacts import read_json_artifact, sha256_file
from workbench.backends.devices import device_of
from workbench.backends.factory import ort_providers
from workbench.cluster.address import ClusterAddress, require_ray
from workbench.compare import outputs
from workbench.compare.groups import Group, node_groups, plan_for
from workbench.config import DEFAULT_BACKEND, SEARCH, SEARCH_ORDERS, SEARCH_SELECTIONS
from workbench.errors import WorkbenchError
from workbench.evaluate.batching import check_batch_size, default_batch_size
from workbench.evaluate.bootstrap import Interval
from workbench.evaluate.gates import GateConfig
from workbench.evaluate.inference import GREEDY, InferenceConfig
from workbench.jobs import compare
from workbench.jobs.prepare import AnalysisInputs, Prepared, file_lines, named_set
from workbench.quantize.macs import NodeMacs, node_macs, opt_samples
from workbench.quantize.plan import PrecisionPlan, quantizable_nodes
from workbench.search import disagreement
from workbench.search import outputs as search_outputs
from workbench.search.confirm import Confirmation, confirm, split_speakers
from workbench.search.evaluator import DevEvaluator, Evaluation
from workbench.search.forecast import PassForecast, evidence_shortfalls, forecast
from workbench.search.latency_objective import LatencyChoice, check_latency_target, fastest_passing
from workbench.search.objective import (
    OBJECTIVES,
    Objective,
    group_sizes,
    make_objective,
    order_by_damage_per_unit,
)
from workbench.search.selection import select
from workbench.search.sequential import SEQUENTIAL_RULE
from workbench.search.strategies import Candidate, SearchResult, describe, search_plan
from workbench.search.transcripts import TranscriptCache
from workbench.speech.overlap import disjoint, overlap, overlap_message
from workbench.speech.records import Clip
from workbench.speech.select import all_clips, clips_per_condition, require_utterances
from workbench.speech.store import SpeechSet
from workbench.speech.unlabelled import require_labelled

logger = logging.getLogger(__name__)

# said on one line and written into the record when the search selects on the calibration set (no --dev-set)
CALIBRATION_AS_DEV = (
    "no --dev-set: the search selects on the calibration set {name}, whose clips set the scales it judges; "
    "give --dev-set (a held-out set, e.g. data import --disjoint-from CALIB --disjoint-from EVAL)"
)


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
    finer: int = 0  # evaluations that narrow kept groups to one part (workbench.search.finer)
    confirm: float = 0.0  # share of dev speakers held back to confirm the plan (search.confirm)
    selection: str = SEARCH.selection  # how the choice among plans is accounted for (search.selection)
    keep: str = "fp16"
    resamples: int = 1000
    seed: int = 0
    dev_blocks: int = SEARCH.dev_blocks  # the dev set bought block by block (workbench.search.sequential)
    futility: float = SEARCH.futility  # give a candidate up early below this whole-set pass chance
    objective: str = SEARCH.objective  # what the search maximises among passing plans
    order: str = SEARCH.order  # the order groups go to FP16 in
    batch_size: int | None = None  # evaluation batch (default: per backend)
    latency_target: str | None = None  # choose the passing plan fastest there (search.latency_objective)
    inference: InferenceConfig = GREEDY  # chunking and decoder of every dev-set WER
    ray: str | None = (
        None  # spread the ranking and each WER evaluation over a Ray cluster (``workbench.cluster``)
    )
    dev_criterion: str = SEARCH.dev_criterion  # what a plan is judged on (workbench.search.disagreement)
    unlabelled_dev_set: str | Path | None = None  # the audio --dev-criterion disagreement judges on
    max_disagreement: float | None = (
        None  # the disagreement budget in points (default: calibrated on --dev-set)
    )
    # dev transcripts shared with the caller's other searches of this model (``workbench.search.transcripts``)
    transcripts: TranscriptCache | None = field(default=None, compare=False, repr=False)


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
    if inputs.selection not in SEARCH_SELECTIONS:
        raise WorkbenchError(
            f"--selection must be one of {', '.join(SEARCH_SELECTIONS)}, not {inputs.selection!r}"
        )
    check_evidence_options(inputs.dev_blocks, inputs.objective, inputs.batch_size, inputs.order)
    if not 0.0 <= inputs.futility < 0.5:
        raise WorkbenchError(
            f"--futility is the whole-set pass chance below which an earlier look gives a candidate up: give a "
            f"value from 0 (never) up to (not including) 0.5, not {inputs.futility:g} (default {SEARCH.futility:g})"
        )
    check_latency_target(inputs.latency_target)
    given = (("--dev-set", inputs.dev_set), ("--dev-per-condition", inputs.dev_per_condition))
    criterion_options(inputs, [flag for flag, value in given if value is not None])
    # a given disagreement budget reads no labelled dev set (the calibration set is then not the dev set)
    reads_dev = disagreement.reads_labelled_dev(inputs.dev_criterion, inputs.max_disagreement)
    if inputs.sensitivity is not None and not Path(inputs.sensitivity).is_file():
        raise WorkbenchError(
            f"--sensitivity {inputs.sensitivity} is not a file; give a sensitivity-*.json written "
            "by python -m workbench compare, or drop --sensitivity to reuse or compute one"
        )
    dev_set = named_set(inputs.dev_set, "dev", inputs.calib_root) or named_set(
        inputs.calib_set, "calibration", inputs.calib_root
    )
    if dev_set is not None:  # no calibration set named: ``inputs.check`` says so
        if reads_dev:
            require_labelled(
                dev_set, "--dev-set" if inputs.dev_set else "--calib-set (the dev set without --dev-set)"
            )
        signoff_set = named_set(inputs.signoff_set, "sign-off", inputs.calib_root)
        signoff_set = signoff_set and require_labelled(signoff_set, "--signoff-set")
        if reads_dev:
            check_dev_apart(dev_set, signoff_set)
        unlabelled = named_set(inputs.unlabelled_dev_set, "unlabelled dev", inputs.calib_root)
        if unlabelled is not None:  # without --dev-set the dev set read above is the calibration set
            calib = (
                dev_set
                if not inputs.dev_set
                else named_set(inputs.calib_set, "calibration", inputs.calib_root)
            )
            check_dev_apart(disagreement.check_unlabelled_dev(unlabelled, calib), signoff_set)
    inputs.check()
    if inputs.ray is not None:
        ClusterAddress.parse(inputs.ray)
        require_ray()


def run(inputs: SearchInputs) -> SearchJobResult:
    """Check the options and sets, prepare the FP32 ONNX + cache, search, write the record and the found plan."""
    check(inputs)  # the sets are read before the model is loaded or calibrated, so a bad set fails at once
    dev_set = named_set(inputs.dev_set, "dev", inputs.calib_root)
    signoff_set = named_set(inputs.signoff_set, "sign-off", inputs.calib_root)
    unlabelled = named_set(inputs.unlabelled_dev_set, "unlabelled dev", inputs.calib_root)
    prepared = inputs.prepare()
    return run_search(
        prepared,
        SearchSettings(
            dev_set or prepared.calib_set,
            inputs.gates,
            sensitivity=inputs.sensitivity,
            per_condition=inputs.per_condition,
            dev_per_condition=inputs.dev_per_condition,
            strategy=inputs.strategy,
            refine=inputs.refine,
            finer=inputs.finer,
            confirm=inputs.confirm,
            selection=inputs.selection,
            keep=inputs.keep,
            resamples=inputs.resamples,
            seed=inputs.seed,
            granularity=inputs.granularity,
            out=inputs.out,
            threads=inputs.threads,
            progress=inputs.progress,
            signoff_set=signoff_set,
            backend=inputs.backend,
            margin=inputs.margin,
            confidence=inputs.confidence,
            dev_blocks=inputs.dev_blocks,
            futility=inputs.futility,
            objective=inputs.objective,
            order=inputs.order,
            batch_size=inputs.batch_size,
            latency_target=inputs.latency_target,
            inference=inputs.inference.check(),
            ray=inputs.ray,
            assumed=inputs.assumed,
            transcripts=inputs.transcripts,
            dev_criterion=inputs.dev_criterion,
            unlabelled_dev_set=unlabelled,
            max_disagreement=inputs.max_disagreement,
        ),
    )


ORDER_WORDS = {
    "damage-per-unit": "groups go to FP16 by their sensitivity score per unit of what the objective counts "
    "(multiply-accumulates or nodes), most first",
    "damage": "groups go to FP16 in the sensitivity ranking's order",
}


def check_evidence_options(
    dev_blocks: int, objective: str, batch_size: int | None, order: str = SEARCH.order
) -> None:
    """--dev-blocks, --objective, --batch-size and --order."""
    if dev_blocks < 1:
        raise WorkbenchError(
            f"--dev-blocks must be at least 1 (1: the whole dev set at once), not {dev_blocks}"
        )
    if objective not in OBJECTIVES:
        raise WorkbenchError(f"--objective must be one of {', '.join(OBJECTIVES)}, not {objective!r}")
    if order not in SEARCH_ORDERS:
        raise WorkbenchError(f"--order must be one of {', '.join(SEARCH_ORDERS)}, not {order!r}")
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
    """The provenance keys a sensitivity file does not share with ``prepared`` (a file without ``recovery``
    was made without accuracy recovery)."""
    expected = prepared.provenance()
    found = data.get("provenance", {})
    names = {"recovery": "accuracy recovery"}
    return [
        names.get(k, k) for k in ("model", "fp32_onnx", "cache", "recovery") if found.get(k) != expected[k]
    ]


@dataclass
class SearchJobResult:
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


def reuse_or_rank(
    prepared: Prepared,
    default: Path,
    rank: Callable[[], compare.CompareResult],
) -> tuple[Path, dict[str, Any]]:
    """The sensitivity ranking at ``default`` when it matches ``prepared``, else the one ``rank`` computes."""
    if default.exists():
        try:
            data = load_sensitivity(default, prepared)
            logger.info(f"reusing sensitivity ranking {default}")
            return default, data
        except WorkbenchError as exc:
            logger.info(f"not reusing {default.name}: {exc}")
    made = rank()
    if made.sensitivity is None:
        raise WorkbenchError("the compare job wrote no sensitivity ranking")
    return made.files["sensitivity_json"], made.sensitivity


@dataclass(frozen=True)
class SearchSettings:
    """How one search runs on prepared FP32 ONNX + cache: the dev set and WER budget, where the ranking comes
    from, the strategy, the bootstrap and where files go.

    ``signoff_set``: the set the sign-off will judge on; only its utterances' speakers and conditions are used
    (never its audio or texts), to predict the sign-off's intervals from its number of bootstrap blocks.
    """

    dev_set: SpeechSet
    gates: GateConfig
    sensitivity: Path | None = None
    clips_set: SpeechSet | None = None
    per_condition: int = 2
    dev_per_condition: int | None = None
    strategy: str = "bisect"
    refine: int = 2
    finer: int = 0  # evaluations that narrow kept groups to one part (workbench.search.finer)
    confirm: float = 0.0  # share of dev speakers held back to confirm the plan (search.confirm)
    selection: str = SEARCH.selection  # how the choice among plans is accounted for (search.selection)
    keep: str = "fp16"
    resamples: int = 1000
    seed: int = 0
    granularity: str = "group"
    out: Path | None = None
    threads: int | None = None
    progress: bool = True
    signoff_set: SpeechSet | None = None
    backend: str = DEFAULT_BACKEND
    margin: float = SEARCH.margin
    confidence: float = SEARCH.confidence
    dev_blocks: int = SEARCH.dev_blocks  # the dev set bought block by block (workbench.search.sequential)
    futility: float = SEARCH.futility  # give a candidate up early below this whole-set pass chance
    objective: str = (
        SEARCH.objective
    )  # what the search maximises among passing plans (workbench.search.objective)
    order: str = SEARCH.order  # the order groups go to FP16 in (workbench.search.objective)
    batch_size: int | None = None  # evaluation batch (default: per backend)
    latency_target: str | None = None  # then keep the passing plan measured fastest on this target
    inference: InferenceConfig = GREEDY  # chunking and decoder of every dev-set WER
    ray: str | None = None  # Ray cluster address: the ranking's variants and each look's transcription spread
    assumed: tuple[str, ...] = ()  # what the verb assumed for left-out options (the record says)
    # dev transcripts shared with the caller's other searches of this model (``workbench.search.transcripts``)
    transcripts: TranscriptCache | None = field(default=None, compare=False, repr=False)
    dev_criterion: str = SEARCH.dev_criterion  # what a plan is judged on (workbench.search.disagreement)
    unlabelled_dev_set: SpeechSet | None = None  # the audio --dev-criterion disagreement judges on
    max_disagreement: float | None = (
        None  # the disagreement budget in points (default: calibrated on dev_set)
    )

    @property
    def selected_on(self) -> SpeechSet:
        """The set plans are judged on: the unlabelled dev set with the disagreement criterion, else the dev set."""
        return self.unlabelled_dev_set if self.unlabelled_dev_set is not None else self.dev_set

    @property
    def reads_dev_set(self) -> bool:
        """Whether the labelled dev set is read (``workbench.search.disagreement.reads_labelled_dev``)."""
        return disagreement.reads_labelled_dev(self.dev_criterion, self.max_disagreement)


def run_search(prepared: Prepared, settings: SearchSettings) -> SearchJobResult:
    """Find the plan the objective scores highest (by default the most INT8 multiply-accumulates) whose
    sign-off the dev set predicts to pass the gates (held back by ``margin``) with probability ``confidence``;
    with ``latency_target``, the passing plan measured fastest there instead; write JSON/CSV, plan and ONNX."""
    s = settings
    if s.reads_dev_set:
        check_dev_apart(s.dev_set, s.signoff_set)
    refuse_ray_with_recovery(s.ray, prepared)
    require_utterances(s.dev_set, "dev")
    check_criterion(s, prepared)
    folder = compare.analysis_folder(prepared, s.out)
    if s.reads_dev_set and s.dev_set.content_hash == prepared.calib_set.content_hash:
        logger.warning(f"warning: {CALIBRATION_AS_DEV.format(name=s.dev_set.name)}")
    if s.reads_dev_set and s.dev_set.name.endswith("-eval"):
        logger.warning(
            f"warning: dev set {s.dev_set.name} looks like an evaluation set; judging the found plan on the same set "
            "in the sign-off would select on the data that judges it"
        )
    sensitivity, data = sensitivity_ranking(prepared, s, folder)
    model = onnx.load(str(prepared.fp32_onnx))
    groups, ranking = ranked_groups(model, data, sensitivity)
    chosen_by = select(
        s.selection,
        s.confidence,
        s.strategy,
        len(ranking),
        s.refine,
        s.finer,
        s.confirm,
        SEARCH.confirm_share,
    )
    s = replace(s, confidence=chosen_by.judged_confidence, confirm=chosen_by.confirm)
    if s.selection == "shrink":
        logger.info(
            f"selection shrink: {chosen_by.compared} planned evaluations, each plan judged at confidence "
            f"{chosen_by.judged_confidence:.4f} instead of {chosen_by.confidence:g}"
        )
    clips = (
        clips_per_condition(s.dev_set, s.dev_per_condition) if s.dev_per_condition else all_clips(s.dev_set)
    )
    held: list[Clip] = []
    if s.confirm:
        if s.latency_target is not None:
            raise WorkbenchError(
                "--confirm and --latency-target do not combine: confirm the plans, then time them"
            )
        clips, held = split_speakers(clips, s.confirm)
    macs, goal = search_objective(s, model)
    if s.order == "damage-per-unit":
        damage = {layer["name"]: float(layer["score"]) for layer in data["layers"]}
        ranking = order_by_damage_per_unit(ranking, damage, group_sizes(s.objective, macs, groups))
    name = search_outputs.mixed_name(prepared.tag, s.selected_on.content_hash)
    budget = None
    with ExitStack() as stack:  # a Ray pool lives for the search's evaluations, not for the timing after
        if s.unlabelled_dev_set is not None:
            budget = disagreement_budget(prepared, s, model, clips, groups, name)
            clips = all_clips(s.unlabelled_dev_set)
            evaluator = disagreement.require_words(
                dev_evaluator(
                    prepared, s, model, clips, stack, gates=budget.gates(s.gates), against_fp32=True
                ),
                f"the unlabelled dev set {s.unlabelled_dev_set.name}",
            )
            logger.info(disagreement.budget_line(budget, evaluator, s.unlabelled_dev_set.name))
        else:
            evaluator = dev_evaluator(prepared, s, model, clips, stack)
            log_budget(prepared, s, evaluator, len(clips))
        logger.info(
            f"objective: {goal.description}; dev set bought in blocks of {evaluator.ends[0]} utterances "
            f"({len(evaluator.ends)} blocks), batches of {evaluator.batch_size}"
        )
        result = search_plan(
            ranking,
            groups,
            evaluator.evaluate,
            keep=s.keep,
            refine=s.refine,
            finer=s.finer,
            name=name,
            strategy=s.strategy,
            objective=goal,
        )
        confirmation = None
        checker_ratios: Callable[[int], dict[str, float]] | None = None
        if held:
            logger.info(
                f"confirming on {len(held)} held-back dev utterances (speakers the choice was not made on)"
            )
            checker = dev_evaluator(prepared, s, model, held, stack)
            checker_ratios = checker.ratios_for
            confirmation = confirm(result.candidates, checker.evaluate, goal, len(clips), len(held))
            for cand, ev in confirmation.tried:
                d, judged = ev.overall.delta, ev.judged.get("overall")
                logger.info(
                    f"[confirm] {cand.evaluation.plan.name}: {'PASS' if ev.passed else 'FAIL'}"
                    + (f" delta {d.estimate * 100:+.2f} pts" if d is not None else "")
                    + (f", judged {judged:+.2f}" if judged is not None else "")
                    + f" on {ev.utterances} held-back utterances"
                )
            result = replace(result, found=confirmation.found)
    timed = None
    if s.latency_target is not None and result.found is not None:
        timed = fastest_passing(
            result,
            prepared.recovered.source(model) if prepared.recovered is not None else model,
            prepared.cache.amax(),
            clips,
            prepared.description.prepare,
            s.latency_target,
            s.threads,
        )
        if timed is not None:
            result = replace(result, found=timed.chosen)
            for line in timed.lines():
                logger.info(line)
    nodes = quantizable_nodes(model)
    files: dict[str, Path] = {}
    found_json = None
    if result.found is not None:
        found_json = write_found_plan(
            prepared,
            result.found,
            name,
            ranking,
            nodes,
            model,
            Path(s.out) if s.out else prepared.folder,
            macs,
        )
        files.update({"plan": Path(found_json["plan_path"]), "onnx": Path(found_json["onnx_path"])})
    data_out = search_record(
        prepared, s, evaluator, result, sensitivity, ranking, groups, nodes, found_json, timed, macs, goal
    )
    if s.unlabelled_dev_set is not None:
        data_out["provenance"]["unlabelled_dev_set"] = s.unlabelled_dev_set.content_hash
        calibrated = budget.calibration if budget is not None else None
        # the labelled dev set is read only to calibrate the budget
        data_out["dev_set"].update(read=calibrated is not None)
        data_out["dev_set"]["utterances"] = calibrated["utterances"] if calibrated else None
        if calibrated is None:
            data_out["dev_set"]["warning"] = None
    data_out["dev_criterion"] = disagreement.criterion_json(budget, s.unlabelled_dev_set, evaluator)
    data_out["confirmation"] = confirmation.to_json() if confirmation is not None else None
    data_out["selection"] = chosen_by.to_json()
    data_out["signoff_forecast"] = (
        found_forecast(result, evaluator, confirmation, checker_ratios, s).to_json()
        if result.found is not None and budget is None
        else None
    )
    j, c = outputs.write_with_csv(
        search_outputs.search_path(folder, prepared.tag, s.selected_on.content_hash),
        data_out,
        search_outputs.search_csv_rows,
    )
    files.update({"search_json": j, "search_csv": c, "sensitivity_json": Path(sensitivity)})
    return SearchJobResult(files, data_out)


def found_forecast(
    result: SearchResult,
    evaluator: DevEvaluator,
    confirmation: Confirmation | None,
    checker_ratios: Callable[[int], dict[str, float]] | None,
    s: SearchSettings,
) -> PassForecast:
    """The found plan's predicted chance of passing the sign-off (``workbench.search.forecast``): from its reading on
    the held-back speakers when a confirmation chose it (the choice among the plans tried there), else from its dev
    reading, the choice among every plan the search evaluated."""
    found = result.found
    if found is None:
        raise ValueError("no found plan to forecast")
    signoff = len(s.signoff_set.utterances) if s.signoff_set is not None else None
    short = {}
    if s.signoff_set is not None:
        base = evaluator.baseline
        groups = {"overall": base.overall, **{f"condition {c}": g for c, g in base.per_condition.items()}}
        per_utterance = {
            check: g.reference_words / g.utterances for check, g in groups.items() if g.utterances
        }
        short = evidence_shortfalls(s.signoff_set.utterances, per_utterance)
    if confirmation is not None and checker_ratios is not None:
        for index, (cand, ev) in enumerate(confirmation.tried):
            if cand is found:
                ratios = checker_ratios(ev.utterances)
                return forecast(deltas_of(ev), ratios, s.gates, index + 1, signoff, "held-back", short)
    ev = found.evaluation
    ratios = evaluator.ratios_for(ev.utterances)
    return forecast(deltas_of(ev), ratios, s.gates, result.evaluations, signoff, "dev", short)


def deltas_of(evaluation: Evaluation) -> dict[str, Interval | None]:
    """An evaluation's delta interval per gate check (``overall``, ``condition <name>``)."""
    return {
        "overall": evaluation.overall.delta,
        **{f"condition {c}": g.delta for c, g in evaluation.per_condition.items()},
    }


def refuse_ray_with_recovery(ray: str | None, prepared: Prepared) -> None:
    """Ray workers build variants from the FP32 export: a cache made with accuracy recovery runs without ``--ray``."""
    if ray is not None and prepared.recovered is not None:
        raise WorkbenchError(
            "the calibration cache was made with accuracy recovery (--smoothquant, --bias-correction, "
            "--refine-ranges, --clip-search; the default recipe's), whose variants Ray workers do not build; run "
            "without --ray, or with --no-recovery"
        )


def sensitivity_ranking(prepared: Prepared, s: SearchSettings, folder: Path) -> tuple[Path, dict[str, Any]]:
    """The sensitivity file the search ranks groups by: the one given, else a matching one beside the
    analyses, else one the compare job computes now."""
    if s.sensitivity is not None:
        return s.sensitivity, load_sensitivity(s.sensitivity, prepared)
    return reuse_or_rank(
        prepared,
        outputs.sensitivity_path(folder, prepared.tag, "fp32", s.granularity),
        lambda: compare.run_compare(
            prepared,
            s.clips_set or prepared.calib_set,
            s.per_condition,
            layers=False,
            out=s.out,
            granularity=s.granularity,
            threads=s.threads,
            progress=s.progress,
            backend=s.backend,
            ray=s.ray,
            assumed=s.assumed,
        ),
    )


def ranked_groups(
    model: onnx.ModelProto, data: dict[str, Any], sensitivity: Path
) -> tuple[list[Group], list[str]]:
    """The model's node groups (checked against the ones the sensitivity file ranks) and their ranking."""
    groups = node_groups(model, data.get("granularity", "group"))
    file_groups = {layer["name"]: list(layer["nodes"]) for layer in data["layers"]}
    if file_groups != {g.name: list(g.nodes) for g in groups}:
        raise WorkbenchError(
            f"sensitivity file {sensitivity} groups other nodes than this model has; recompute it"
        )
    return groups, [layer["name"] for layer in sorted(data["layers"], key=lambda r: r["rank"])]


def search_objective(s: SearchSettings, model: onnx.ModelProto) -> tuple[NodeMacs, Objective]:
    """Each node's multiply-accumulates at the engine profile's opt length (the sign-off set's median clip,
    else the dev set's) and the objective the search maximises among passing plans."""
    judged = s.signoff_set or s.dev_set
    macs = node_macs(model, opt_samples([u.duration_s for u in judged.utterances]))
    return macs, make_objective(s.objective, macs, quantizable_nodes(model))


def dev_evaluator(
    prepared: Prepared,
    s: SearchSettings,
    model: onnx.ModelProto,
    clips: list[Clip],
    stack: ExitStack | None = None,
    *,
    gates: GateConfig | None = None,
    blocks: int | None = None,
    against_fp32: bool = False,
) -> DevEvaluator:
    """Scores plans on the dev clips (FP32 baseline first) against the held-back, sign-off-predicted budget
    (``gates``, default ``s.gates``; ``blocks``, default ``s.dev_blocks``; ``against_fp32``: FP32's transcripts as
    the references, ``workbench.search.disagreement``); with ``s.ray``, transcribed on the cluster by a worker pool
    that ``stack`` closes."""
    variants = prepared.variant_runner(model, s.threads, ort_providers(s.backend))
    batch_size = s.batch_size or default_batch_size(s.backend)
    transcriber = None
    if s.ray is not None:
        from workbench.cluster.search import spread_plans

        if stack is None:
            raise ValueError("a Ray search needs an ExitStack to hold its worker pool")
        transcriber = stack.enter_context(
            spread_plans(
                ClusterAddress.parse(s.ray), variants, clips, prepared.description, batch_size, s.inference
            )
        )
    return DevEvaluator(
        variants,
        clips,
        s.gates if gates is None else gates,
        resamples=s.resamples,
        seed=s.seed,
        progress=s.progress,
        signoff=s.signoff_set.utterances if s.signoff_set is not None else None,
        model=prepared.description,
        margin=s.margin,
        confidence=s.confidence,
        blocks=s.dev_blocks if blocks is None else blocks,
        batch_size=batch_size,
        inference=s.inference,
        transcriber=transcriber,
        futility=s.futility,
        transcripts=s.transcripts,
        against_fp32=against_fp32,
    )


def criterion_options(s: SearchInputs | SearchSettings, dev_options: list[str] | None = None) -> None:
    """The dev criterion's options (``workbench.search.disagreement.check_options``); ``dev_options``: the labelled
    dev set's flags the user gave."""
    disagreement.check_options(
        s.dev_criterion,
        s.unlabelled_dev_set,
        s.max_disagreement,
        selection=s.selection,
        confirm=s.confirm,
        ray=s.ray,
        dev_options=dev_options,
    )


def check_criterion(s: SearchSettings, prepared: Prepared) -> None:
    """The dev criterion's options and its unlabelled dev set (as ``check`` checks them for the verb)."""
    criterion_options(s)
    if s.unlabelled_dev_set is not None:
        unlabelled = disagreement.check_unlabelled_dev(s.unlabelled_dev_set, prepared.calib_set)
        require_utterances(unlabelled, "unlabelled dev")
        check_dev_apart(unlabelled, s.signoff_set)


def disagreement_budget(
    prepared: Prepared,
    s: SearchSettings,
    model: onnx.ModelProto,
    clips: list[Clip],
    groups: list[Group],
    name: str,
) -> disagreement.DisagreementBudget:
    """The disagreement budget: ``--max-disagreement`` when given, else calibrated on the labelled dev ``clips`` from
    INT8 everywhere's two whole-set readings there (``workbench.search.disagreement.calibrate``)."""
    if s.max_disagreement is not None:
        return disagreement.given_budget(s.max_disagreement, s.gates)
    logger.info(
        f"calibrating the disagreement budget: INT8 everywhere on {len(clips)} utterances of the dev set "
        f"{s.dev_set.name}, against its labels and against FP32"
    )
    # one transcript per clip and plan for both readings when batches hold one clip (batched, they are made twice)
    shared = s.transcripts
    if shared is None and (s.batch_size or default_batch_size(s.backend)) == 1:
        shared = TranscriptCache()
    settings = replace(s, transcripts=shared)

    def make(against_fp32: bool) -> DevEvaluator:
        return dev_evaluator(prepared, settings, model, clips, blocks=1, against_fp32=against_fp32)

    everywhere = plan_for(f"{name}-k0", groups, s.keep, "int8", set())
    return disagreement.calibrate(make, everywhere, s.gates, s.dev_set.name)


def log_budget(
    prepared: Prepared,
    s: SearchSettings,
    evaluator: DevEvaluator,
    utterances: int,
) -> None:
    """The dev set, the budget and what each plan is judged against; the widening when there is one."""
    unit = prepared.description.error_unit.upper()
    gates = s.gates
    speakers = len({u.speaker for u in evaluator.utterances})
    logger.info(
        f"dev set {s.dev_set.name}: {utterances} utterances, {speakers} speakers; "
        f"{unit} budget +{gates.max_wer_delta_points} pts overall, +{gates.max_condition_wer_delta_points} pts per "
        f"condition, judged against +{evaluator.gates.max_wer_delta_points:.2f} / "
        f"+{evaluator.gates.max_condition_wer_delta_points:.2f} on the upper end of the sign-off's paired 95% interval "
        f"as the dev interval predicts it, for a {s.confidence:.0%} chance that the sign-off passes"
        + (f" (margin {s.margin:.2f} of each gate)" if s.margin else "")
    )
    if any(f > 1.0 for f in evaluator.widening.values()):
        logger.info(
            "judging dev intervals widened to the sign-off set's speakers: "
            + ", ".join(f"{check} x{f:.2f}" for check, f in evaluator.widening.items())
        )


def write_found_plan(
    prepared: Prepared,
    found: Candidate,
    name: str,
    ranking: list[str],
    nodes: list[str],
    model: onnx.ModelProto,
    folder: Path,
    macs: NodeMacs | None = None,
) -> dict[str, Any]:
    """Write the found plan (with the FP16 guard) and its ONNX variant under ``folder``; their record entry."""
    found_plan = found.evaluation.plan
    plan = PrecisionPlan(
        name, found_plan.default, found_plan.overrides, found_plan.rest, found_plan.keep_fp32
    ).with_guard(prepared.guard)
    plan_path = folder / f"plan.{name}.json"
    onnx_path = folder / f"model.{name}.onnx"
    recovery = prepared.build(plan, onnx_path, model)
    plan.save(plan_path, model, recovery)
    return {
        "name": name,
        "plan": plan.to_json(),
        "plan_path": str(plan_path),
        "onnx_path": str(onnx_path),
        "onnx_sha256": sha256_file(onnx_path),
        "int8_share": plan.int8_share(nodes),
        "int8_macs_share": macs.int8_share(plan) if macs is not None else None,
        "fp16_groups": [g for g in ranking if g in found.kept],
        "fp16_parts": sorted(found.kept - set(ranking)),
        "k": found.k,
        "step": found.step,
        "recovery": recovery_summary(recovery),
    }


def recovery_summary(record: dict[str, Any] | None) -> dict[str, Any] | None:
    """What the search record says of a found plan's recovery: the techniques that were on, with the shift and scale
    the convolutions it shifted, and with bias correction how many of its INT8 layers were corrected (each node's
    shift is in its plan file)."""
    if record is None:
        return None
    out: dict[str, Any] = {"techniques": record.get("techniques", [])}
    if "smoothquant" in record:
        out["smoothed_inputs"] = record["smoothquant"].get("smoothed")
    if "refine_ranges" in record:
        out["ranges_moved"] = record["refine_ranges"].get("changed")
    if "clip_search" in record:
        out["conv_clippings_moved"] = record["clip_search"].get("changed")
    if "nodes" in record.get("shift_scale", {}):
        out["shifted_nodes"] = record["shift_scale"]["nodes"]
    if "nodes" in record.get("bias_correction", {}):
        out["bias_corrected_layers"] = record["bias_correction"]["nodes"]
    return out


def search_record(
    prepared: Prepared,
    s: SearchSettings,
    evaluator: DevEvaluator,
    result: SearchResult,
    sensitivity: Path,
    ranking: list[str],
    groups: list[Group],
    nodes: list[str],
    found_json: dict[str, Any] | None,
    timed: LatencyChoice | None = None,
    macs: NodeMacs | None = None,
    goal: Objective | None = None,
) -> dict[str, Any]:
    """The search record (``workbench-search/1``): provenance, budget, dev set, baseline, every candidate."""
    gates, base = s.gates, evaluator.baseline
    prov = {
        **prepared.provenance(),
        "dev_set": s.dev_set.content_hash,
        "sensitivity": sha256_file(sensitivity),
        "backend": s.backend,
        "device": device_of(s.backend),
    }
    return {
        **outputs.header(search_outputs.SEARCH_FORMAT, prov),
        "model": prepared.description.record(),
        "error_unit": prepared.description.error_unit,
        "assumed": list(s.assumed),
        "recovery": prepared.recovered.provenance() if prepared.recovered is not None else None,
        "budget": {
            "max_wer_delta_points": gates.max_wer_delta_points,
            "max_condition_wer_delta_points": gates.max_condition_wer_delta_points,
            "judged_on": "upper end of the 95% paired bootstrap interval vs FP32",
            "signoff_utterances": len(s.signoff_set.utterances) if s.signoff_set is not None else None,
            "interval_widening": evaluator.widen,
            "interval_widening_per_check": evaluator.widening,
            "widening_rule": "sqrt(dev bootstrap blocks / sign-off bootstrap blocks) per check, at least 1 "
            "(blocks: speakers when known, else utterances)",
            "confidence": s.confidence,
            "block_ratio_per_check": evaluator.ratios,
            "prediction_rule": "per check: half-widths x max(1, sqrt(ratio)), both ends moved out by "
            "z(confidence) x se_dev x sqrt(1 + ratio), se_dev = dev interval width / "
            "(2 z(level)), ratio = dev blocks / sign-off blocks (1 without a sign-off set)",
            "margin": s.margin,
            "judged_against": {
                "max_wer_delta_points": evaluator.gates.max_wer_delta_points,
                "max_condition_wer_delta_points": evaluator.gates.max_condition_wer_delta_points,
            },
        },
        "dev_set": {
            "name": s.dev_set.name,
            "path": str(s.dev_set.path),
            "content_hash": s.dev_set.content_hash,
            "utterances": len(evaluator.utterances),
            "is_calibration_set": s.dev_set.content_hash == prepared.calib_set.content_hash,
            "warning": CALIBRATION_AS_DEV.format(name=s.dev_set.name)
            if s.dev_set.content_hash == prepared.calib_set.content_hash
            else None,
        },
        "inference": s.inference.to_json(),
        "strategy": describe(s.strategy, s.keep, s.refine, s.finer),
        "objective": goal.to_json() if goal is not None else None,
        "order": ORDER_WORDS.get(s.order, s.order),
        "macs": macs.to_json() if macs is not None else None,
        "sequential": {
            "blocks": len(evaluator.ends),
            "block_ends": evaluator.ends,
            "rule": SEQUENTIAL_RULE,
            "futility": evaluator.futility,
            "utterances_transcribed": sum(c.evaluation.utterances for c in result.candidates),
            "utterances_if_whole_set": len(evaluator.utterances) * len(result.candidates),
        },
        "batching": {"batch_size": evaluator.batch_size, "backend": s.backend},
        "sensitivity_path": str(sensitivity),
        "ranking": ranking,
        "groups": {g.name: list(g.nodes) for g in groups},
        "baseline": {
            "name": "fp32",
            "wer": base.overall.wer.to_json(),
            "per_condition": {c: g.wer.to_json() for c, g in sorted(base.per_condition.items())},
            "mean_ms_per_utterance": base.mean_ms_per_utterance,
        },
        "candidates": [candidate_json(c, ranking, nodes, macs, goal) for c in result.candidates],
        "evaluations": result.evaluations,
        "one_at_a_time_evaluations": result.one_at_a_time_evaluations,
        "per_group_evaluations": len(groups),
        "int8_everywhere_passes": result.int8_everywhere_passes,
        "found": found_json,
        "latency_objective": timed.to_json() if timed else None,
    }


def candidate_json(
    c: Candidate,
    ranking: list[str],
    nodes: list[str],
    macs: NodeMacs | None = None,
    goal: Objective | None = None,
) -> dict[str, Any]:
    """One evaluated plan in the search record: its INT8 shares, the objective's score, the evidence bought."""
    return {
        "step": c.step,
        "phase": c.phase,
        "k": c.k,
        "name": c.evaluation.plan.name,
        "plan": c.evaluation.plan.to_json(),
        "fp16_groups": [g for g in ranking if g in c.kept],
        "fp16_parts": sorted(c.kept - set(ranking)),
        "int8_share": c.evaluation.plan.int8_share(nodes),
        "int8_macs_share": macs.int8_share(c.evaluation.plan) if macs is not None else None,
        "objective": goal(c.evaluation.plan) if goal is not None else None,
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
    criterion = data.get("dev_criterion") or {}
    if criterion.get("criterion") == disagreement.DISAGREEMENT:
        out.append(disagreement.summary_line(criterion))
    elif "judged_against" in budget:
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
    if data.get("latency_objective"):
        chosen = data["latency_objective"]
        ratio = chosen["ratios"].get(chosen["chosen"], {})
        out.append(
            f"objective: latency on {chosen['target']}; the fastest passing plan is x{ratio.get('estimate', float('nan')):.3f} "
            f"FP32 [{ratio.get('low', float('nan')):.3f}, {ratio.get('high', float('nan')):.3f}] at batch {ratio.get('batch')}"
        )
    macs = (
        f"{found['int8_macs_share'] * 100:.1f}% of MACs and "
        if found.get("int8_macs_share") is not None
        else ""
    )
    out.append(
        f"found plan {found['name']}: INT8 share {macs}{found['int8_share'] * 100:.1f}% of MatMul/Gemm/Conv "
        f"nodes, {len(found['fp16_groups'])} groups kept in FP16"
        + (
            f" and {len(found['fp16_parts'])} narrowed to one part ({', '.join(found['fp16_parts'])})"
            if found.get("fp16_parts")
            else ""
        )
    )
    fc = data.get("signoff_forecast")
    if fc and fc.get("pass_chance") is not None:
        size = f"{fc['signoff_utterances']:,}-utterance" if fc.get("signoff_utterances") else "a dev-like"
        out.append(
            f"predicted chance that the sign-off on {size} evaluation set passes it: {fc['pass_chance']:.0%} "
            f"(at most {fc['pass_chance_upper']:.0%}; from its {fc['basis']} reading, best of "
            f"{fc['plans_compared']} plans; selection {data.get('selection', {}).get('rule', 'as-read')}; "
            "assumptions in the record's signoff_forecast)"
        )
    seq = data.get("sequential")
    if seq:
        out.append(
            f"dev utterances transcribed: {seq['utterances_transcribed']} (the whole dev set for every "
            f"candidate: {seq['utterances_if_whole_set']})"
        )
    return out

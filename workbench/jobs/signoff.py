"""The sign-off job: candidates (ONNX files, FP32 baseline first) + evaluation set -> judged record -> report.

Without candidates, FP32, FP16 and INT8 variants are built from the model and calibration set (the
calibrate job: export, cache reused when its keys match, FP16 guard, Q/DQ), together with the mixed plan of a
finished search on the same export and cache (``workbench.search.found``) unless that search used the
evaluation set as its dev set. A calibration set that shares speakers or texts with the evaluation set is
refused, and evaluation clips outside the deployment profile are refused, scored or skipped as asked,
never silently (``select_utterances``). With a calibration set every candidate is first checked for inf/NaN
on it (``workbench.quantize.overflow``; a candidate with an overflow fails, the tensor named). Every candidate
runs on ``backend`` (``workbench.backends.factory``: ort-cpu, ort-cuda, or TensorRT engines built from the
candidates and checked against their plans with the engine inspector), is transcribed, scored (WER, or CER
for character languages, with paired bootstrap intervals per condition), timed with the other candidates
interleaved and judged by the gates; the verdict (``workbench.evaluate.verdict``) picks a winner only from
latency measured on ``target``. The candidates judged are the files the target runs
(``workbench.quantize.targets``): for ``ort-cpu`` the CPU flavour of every INT8 candidate and ONNX Runtime's
dynamic INT8 quantization of the baseline. ``workbench.report`` renders the record.

The model description decides how clips are fed and transcripts decoded and scored. It comes from the
model given or from the candidates themselves (every export and variant carries it in its metadata);
``resolve_model`` refuses candidates of different models and a baseline that names no model when none
was given, so the record always names the model that was actually used.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from workbench.artifacts import read_json_artifact
from workbench.backends.devices import device_of
from workbench.backends.factory import RunnerFactory, check_backend, ort_providers
from workbench.backends.tensorrt.builder import BuildSettings
from workbench.backends.tensorrt.inspector import (
    EnginePrecisionCheck,
    check_plan,
    engine_information,
    parse_engine_information,
)
from workbench.backends.tensorrt.profile import samples_from_durations
from workbench.calibration.cache import load as load_cache
from workbench.calibration.methods import MethodSpec
from workbench.calibration.recovery import RecoveryOptions, cache_recovered_source
from workbench.cluster.address import ClusterAddress, require_ray
from workbench.compare.outputs import SENSITIVITY_FORMAT
from workbench.config import (
    BACKENDS,
    DEFAULT_BACKEND,
    DEFAULT_METHOD,
    DEFAULT_TARGET,
    EVIDENCE,
    FP16_GUARD,
    MIN_RESAMPLES,
    ORT_CPU_WEIGHTS,
    OUTSIDE_PROFILE_DEFAULT,
    EvidenceConfig,
)
from workbench.errors import WorkbenchError
from workbench.evaluate.accuracy import compare_accuracy
from workbench.evaluate.added_checks import add_overflow_checks, engine_precision_check
from workbench.evaluate.batching import BatchPolicy, batching_note, default_batch_size
from workbench.evaluate.deployed import decoder_accuracy, select_for_inference
from workbench.evaluate.evidence import add_evidence_checks
from workbench.evaluate.evidence import rule_text as evidence_rule
from workbench.evaluate.gates import GateConfig, judge
from workbench.evaluate.inference import GREEDY, DecoderSettings, InferenceConfig
from workbench.evaluate.latency import LatencyConfig, bucket_clips, measure_interleaved
from workbench.evaluate.machine import machine_info, package_versions
from workbench.evaluate.transcribe import BatchCheck, Transcripts, check_sample, transcribe_checked
from workbench.evaluate.verdict import Candidate, decide
from workbench.evaluate.wer import Scoring
from workbench.inputs.candidates import check_candidate
from workbench.inputs.out_folder import check_out_folder
from workbench.jobs import calibrate
from workbench.jobs.label_free import UnlabelledSelection, check_unlabelled, gate_checks, label_free
from workbench.jobs.signoff_defaults import Recipe, resolve_recipe
from workbench.jobs.signoff_memo import Key, SignoffMemo
from workbench.model.description import ModelDescription, describe_model, description_of_onnx
from workbench.model.folders import artifact_folder_name
from workbench.model.loading import check_model_source
from workbench.quantize.macs import compute_shares, node_macs, opt_samples
from workbench.quantize.overflow import OverflowReport, check_overflow, every_tensor_sample
from workbench.quantize.plan import precision_counts, precisions_of_onnx
from workbench.quantize.recovered import RecoveredSource
from workbench.quantize.targets import CPU_TARGET, candidates_for_target, check_target_inputs
from workbench.report.record import artifact_entry, build_record
from workbench.report.render import write_report
from workbench.search.found import chosen_search
from workbench.serving.choose import add_serving_checks, decide_by_capacity
from workbench.serving.measure import CandidateServing, RequestSet, measure_serving, serving_record
from workbench.speech import missing
from workbench.speech.overlap import require_disjoint
from workbench.speech.profiles import deployment_profile
from workbench.speech.records import Utterance
from workbench.speech.select import require_calibration_role
from workbench.speech.store import SpeechSet, load_set
from workbench.speech.unlabelled import require_labelled
from workbench.workspace import area_path, default_area

logger = logging.getLogger(__name__)


@dataclass
class SignoffInputs:
    """Candidates (name, ONNX path; the first is the baseline) or, when empty, the model + calibration set
    their FP32/FP16/INT8 (+ mixed) variants are built from; the evaluation set; gates and timing."""

    eval_set: SpeechSet | str | Path
    out_dir: Path
    candidates: list[tuple[str, Path]] = field(default_factory=list)
    model: Path | str | ModelDescription | None = None  # folder, hub id or description; None: the model the
    # candidates name in their metadata
    calib_set: SpeechSet | str | Path | None = None
    method: str = DEFAULT_METHOD  # calibration method of the built INT8 variant
    recovery: RecoveryOptions | None = (
        None  # accuracy recovery of the built INT8 (and the mixed plan's search)
    )
    cache: Path | None = None
    gates: GateConfig = field(default_factory=GateConfig)
    evidence: EvidenceConfig = EVIDENCE  # the least evidence a PASS needs (workbench.evaluate.evidence)
    latency: LatencyConfig | None = field(default_factory=LatencyConfig)
    sensitivity: Path | None = None
    threads: int | None = None
    backend: str = DEFAULT_BACKEND  # where WER and latency are measured: ort-cpu, ort-cuda or tensorrt
    target: str = (
        DEFAULT_TARGET  # where the candidate will run; latency picks a winner only when measured there
    )
    resamples: int = 2000
    seed: int = 0
    limit: int | None = None
    batch_size: int | None = None  # evaluation batch (default: per backend; a TensorRT profile caps it)
    pad_batches: bool = (
        False  # the deployment pads: a model without an attention mask is zero-padded in batches
    )
    engines: Path = field(default_factory=default_area("engines"))
    calib_root: Path = field(default_factory=default_area("calib_sets"))
    outside_profile: str = (
        OUTSIDE_PROFILE_DEFAULT  # refuse, score or skip clips outside the deployment profile
    )
    profile_min_s: float | None = None  # deployment profile (default: the calibration set's)
    profile_max_s: float | None = None
    error_unit: str | None = None  # wer or cer; None: what the model's vocabulary calls for
    overflow_check: bool = True  # inf/NaN check of every candidate on the calibration set (needs calib_set)
    # outputs checked on this many calibration clips (the longest half, the rest spread over the set; None: every
    # clip); every tensor is checked on FP16_GUARD.overflow_every_tensor_clips of them either way
    overflow_clips: int | None = None
    as_given: bool = False  # judge the candidates as given, not the files the target runs (quantize.targets)
    ort_cpu_weights: str = (
        ORT_CPU_WEIGHTS  # the CPU flavours' int8 weights: auto, u8 or s8 (backends.cpu_int8)
    )
    inference: InferenceConfig = GREEDY  # chunking and the decoder the verdict is judged under
    also_decoders: list[DecoderSettings] = field(default_factory=list)  # scored too, on the same logits
    # the also_decoders score this many utterances spread evenly over the set (None: all); the verdict decoder
    # always scores every utterance
    also_limit: int | None = None
    ray: str | None = None  # transcribe on a Ray cluster in utterance shards (``workbench.cluster``)
    serving: bool = (
        False  # the serving benchmark (``workbench.serving``) under the gate file's [serving] table
    )
    # unlabelled audio every candidate is checked on against FP32 (``workbench.jobs.label_free``)
    unlabelled_sets: list[SpeechSet | str | Path] = field(default_factory=list)
    search: Path | None = None  # the search whose plan is signed off (--search); None: the only matching one
    use_search: bool = True  # False: built candidates leave any search's plan out (--no-search)
    # False: method and recovery are the defaults, not asked for: refused when the model's caches and searches on
    # this calibration set were made with other recipes (``workbench.jobs.signoff_defaults``)
    recipe_given: bool = True
    assumed: list[str] = field(
        default_factory=list
    )  # what the verb assumed for a left-out option (the record says)

    def settings(self) -> dict[str, Any]:
        """Every option that shapes the verdict beside the gates, the inference and the candidates (the record's
        ``settings``)."""
        return {
            "target": self.target,
            "as_given": self.as_given,
            "backend": self.backend,
            "outside_profile": self.outside_profile,
            "profile_min_s": self.profile_min_s,
            "profile_max_s": self.profile_max_s,
            "limit": self.limit,
            "resamples": self.resamples,
            "seed": self.seed,
            "error_unit": self.error_unit,
            "batch_size": self.batch_size,
            "pad_batches": self.pad_batches,
            "serving": self.serving,
            "overflow_check": self.overflow_check,
            "overflow_clips": self.overflow_clips,
            "also_limit": self.also_limit,
            "ort_cpu_weights": self.ort_cpu_weights,
            "method": None if self.candidates else self.method,
            "recovery": None
            if self.candidates or self.recovery is None
            else self.recovery.params().get("recovery"),
            "search": str(self.search) if self.search is not None else None,
            "use_search": self.use_search,
            "latency": None
            if self.latency is None
            else {
                "batch_sizes": list(self.latency.batch_sizes),
                "warmup": self.latency.warmup,
                "repeats": self.latency.repeats,
            },
            "unlabelled_sets": [str(getattr(u, "path", u)) for u in self.unlabelled_sets],
        }


@dataclass
class SignoffResult:
    """The judged record and the report files (``record``, ``markdown``, ``html``)."""

    record: dict[str, Any]
    paths: dict[str, Path]

    @property
    def recommendation(self) -> str | None:
        return self.record["recommendation"]

    def lines(self) -> list[str]:
        decision = self.record["decision"]
        return (
            [f"  {v['candidate']:>12}: {v['summary']}" for v in self.record["verdicts"]]
            + [f"  {r}" for r in decision["reasons"]]
            + (self.record.get("label_free") or {}).get("lines", [])
            + [f"report: {self.paths['html']}", f"verdict: {decision['line']}"]
        )


@dataclass(frozen=True)
class DefaultVariants:
    candidates: list[tuple[str, Path]]  # fp32 first
    cache: Path
    sensitivity: Path | None = None  # the ranking the mixed plan's search used, when there is one
    mixed_note: str | None = None
    search_note: str | None = None  # which search the mixed plan came from, and its dev set (for the record)


def build_default_variants(
    model: Path | str | ModelDescription,
    calib_set: str | Path,
    method: str = DEFAULT_METHOD,
    root: Path | None = None,
    eval_hash: str | None = None,
    calib_root: Path | None = None,
    recovery: RecoveryOptions | None = None,
    search: Path | None = None,
    use_search: bool = True,
) -> DefaultVariants:
    """Export/calibrate (reusing a matching cache; with the accuracy-recovery options ``recovery``) and write FP16
    beside FP32 and INT8; add the mixed plan of the finished ``search`` given, else of the one search on this export,
    cache and recovery options (not searched on the evaluation set ``eval_hash``; several are refused,
    ``workbench.search.found.chosen_search``); ``use_search`` False: no mixed plan."""
    result = calibrate.run(
        calibrate.CalibrateInputs(
            model,
            calib_set,
            MethodSpec(method),
            engines=area_path("engines", root),
            calib_root=area_path("calib_sets", calib_root),
            recovery=recovery or RecoveryOptions(),
        )
    )
    candidates = [("fp32", result.fp32_onnx)]
    if result.fp16_onnx is not None:
        candidates.append(("fp16", result.fp16_onnx))
    candidates.append((f"int8-{method}", result.int8_onnx))
    found = chosen_search(result.fp32_onnx, result.cache, eval_hash, search) if use_search else None
    if found is None:
        return DefaultVariants(
            candidates, result.cache, search_note=None if use_search else "no mixed plan: --no-search"
        )
    note = f"mixed = {found.name}: {found.int8_share * 100:.1f}% INT8, from {found.search}"
    return DefaultVariants(
        candidates + [("mixed", found.onnx)],
        result.cache,
        found.sensitivity,
        note,
        f"mixed plan from the search {found.line()}",
    )


def engine_settings(
    utts: list[Utterance], latency: LatencyConfig | None, eval_batch: int = 1
) -> BuildSettings:
    """TensorRT build settings of a sign-off: the profile spans the judged clips' durations, the timed batch
    sizes (batch 1 only without latency runs) and the evaluation batch."""
    durations = [u.duration_s for u in utts] or [1.0]
    batches = set(latency.batch_sizes) if latency else {1}
    return BuildSettings(
        batches=tuple(sorted(batches | {eval_batch})), samples=samples_from_durations(durations)
    )


def inspect_engine_precisions(engine: Path, onnx_path: Path) -> EnginePrecisionCheck:
    """The engine's per-layer precisions (inspector, detailed verbosity) against the plan in its ONNX graph."""
    plan = {node: precision for node, _, precision in precisions_of_onnx(onnx_path)}
    return check_plan(parse_engine_information(engine_information(engine), f"inspector of {engine}"), plan)


def overflow_reports(
    candidates: list[tuple[str, Path]],
    calib_set: SpeechSet | None,
    prepare: Callable[[np.ndarray], np.ndarray] | None = None,
    memo: SignoffMemo | None = None,
    model_hash: str = "",
    limit: int | None = None,
) -> dict[str, OverflowReport]:
    """Each candidate's inf/NaN check on the calibration set (clips made ``input_values`` by ``prepare``, the
    model's feature settings), before anything is judged ({} without a set); a check of the same file, set and
    model already in ``memo`` is reused. ``limit``: outputs on that many clips only (``every_tensor_sample``: the
    longest half, where sums are largest, the rest spread over the set)."""
    if calib_set is None:
        return {}
    clips: list[np.ndarray] | None = None
    reports = {}
    for name, path in candidates:
        key = (
            memo.overflow_key(
                Path(path), calib_set.content_hash, model_hash, FP16_GUARD.overflow_every_tensor_clips, limit
            )
            if memo is not None
            else None
        )
        found = memo.find_overflow(key, name) if memo is not None and key is not None else None
        if found is not None:
            reports[name] = found
            logger.info(f"[{name}] overflow check of this file on {calib_set.name} reused: {found.summary()}")
            continue
        if clips is None:
            clips = [audio for _, audio in calib_set.iter_audio()]
            if limit is not None and limit < len(clips):
                clips = [clips[i] for i in sorted(every_tensor_sample(clips, limit))]
        logger.info(f"[{name}] overflow check on {len(clips)} clips of {calib_set.name}")
        reports[name] = check_overflow(Path(path), clips, prepare=prepare)
        logger.info(f"[{name}] {reports[name].summary()}")
        if memo is not None and key is not None:
            memo.overflow[key] = reports[name]
    return reports


def resolve_model(candidates: list[tuple[str, Path]], given: ModelDescription | None) -> ModelDescription:
    """The model the candidates were made from: ``given`` (``--model``) checked against what they carry, or,
    without it, the description in the candidates' metadata. Refused: candidates of different models, a
    given model that is not theirs, and no model at all (nothing would say how to feed and decode them)."""
    carried = [
        (name, found) for name, path in candidates if (found := description_of_onnx(Path(path))) is not None
    ]
    hashes = {d.model_hash for _, d in carried}
    if len(hashes) > 1:
        listing = ", ".join(f"{n}: {d.model_hash[:12]}" for n, d in carried)
        raise WorkbenchError(
            f"the candidates come from different models ({listing}); compare variants of one model"
        )
    if given is not None:
        if hashes and given.model_hash not in hashes:
            raise WorkbenchError(
                f"--model {given.source} (hash {given.model_hash[:12]}) is not the model the "
                f"candidates were exported from (hash {next(iter(hashes))[:12]}); give that model's "
                "folder, or drop --model to use the description the candidates carry"
            )
        return given
    if not carried or carried[0][0] != candidates[0][0]:
        raise WorkbenchError(
            f"the baseline {candidates[0][1]} does not say which model it was exported from; give "
            "--model FOLDER (its vocabulary and features decide how the candidates are fed and "
            "decoded)"
        )
    return carried[0][1]


def _speech_set(value: SpeechSet | str | Path, root: Path) -> SpeechSet:
    return value if isinstance(value, SpeechSet) else load_set(value, root=root)


def select_utterances(
    eval_set: SpeechSet,
    calib_set: SpeechSet | None,
    policy: str = OUTSIDE_PROFILE_DEFAULT,
    min_s: float | None = None,
    max_s: float | None = None,
    limit: int | None = None,
    inference: InferenceConfig = GREEDY,
) -> tuple[list[Utterance], list[str]]:
    """The evaluation utterances to score and the notes they need: refuses a calibration set that shares
    speakers or texts with the evaluation set, and applies ``policy`` to clips outside the deployment
    profile (explicit seconds, else the calibration set's profile); a chunked ``inference`` is judged by
    its chunks (``select_for_inference``)."""
    if calib_set is not None:
        require_disjoint(calib_set, eval_set)
    profile, origin = deployment_profile(
        calib_set.card if calib_set is not None else None,
        [u.duration_s for u in calib_set.utterances] if calib_set is not None else None,
        min_s,
        max_s,
    )
    utts = eval_set.utterances[:limit] if limit else eval_set.utterances
    return select_for_inference(utts, profile, policy, origin, inference)


def check_candidates(candidates: list[tuple[str, Path]]) -> None:
    """Unique names, and every file the ONNX speech model the workbench runs (``workbench.inputs.candidates``)."""
    if not candidates:
        raise WorkbenchError("give at least one candidate (the FP32 baseline first)")
    names = [n for n, _ in candidates]
    if len(set(names)) != len(names):
        raise WorkbenchError(f"candidate names must be unique, got {names}")
    for name, path in candidates:
        check_candidate(f"candidate {name}", Path(path))


def check_cache_apart(eval_set: SpeechSet, cache: Path | None) -> None:
    """Refuse a calibration cache whose scales were computed on the evaluation set itself."""
    if cache is not None and load_cache(Path(cache)).keys.get("calibration_set") == eval_set.content_hash:
        raise WorkbenchError(
            f"the calibration cache {cache} was made from the evaluation set {eval_set.name}; judge "
            "on an evaluation set the model was not calibrated on (data build writes a disjoint pair)"
        )


def read_sensitivity(path: Path) -> dict[str, Any]:
    return read_json_artifact(
        path,
        SENSITIVITY_FORMAT,
        "give a sensitivity-*.json written by python -m workbench compare, or drop --sensitivity",
        what="sensitivity file",
    )


def check(
    inputs: SignoffInputs,
) -> tuple[
    SpeechSet, SpeechSet | None, list[Utterance], list[str], dict[str, Any] | None, list[UnlabelledSelection]
]:
    """Every input check that needs no model work: an overlapping pair, a cache made from the evaluation set,
    out-of-profile clips, the candidate files (or what builds them: model folder, calibration set, method) and
    the sensitivity file; the gates were checked when the ``GateConfig`` was made. ``run`` starts with it; so
    does the dashboard's Run page before it starts a job. Returns the evaluation and calibration sets, the
    utterances to judge, the profile notes, the parsed sensitivity file and the checked unlabelled sets (each loaded
    and hashed once, here)."""
    if inputs.target not in BACKENDS:
        raise WorkbenchError(f"unknown deployment target {inputs.target!r}: use one of {', '.join(BACKENDS)}")
    check_backend(inputs.backend)
    if inputs.resamples < MIN_RESAMPLES:
        raise WorkbenchError(f"--resamples must be at least {MIN_RESAMPLES}, got {inputs.resamples}")
    if inputs.overflow_clips is not None and inputs.overflow_clips < 1:
        raise WorkbenchError(f"--overflow-clips must be at least 1, got {inputs.overflow_clips}")
    if inputs.also_limit is not None and inputs.also_limit < 1:
        raise WorkbenchError(f"--decoder-limit must be at least 1, got {inputs.also_limit}")
    check_out_folder(inputs.out_dir)
    if inputs.serving and inputs.gates.serving is None:
        raise WorkbenchError(
            "--serving needs a [serving] table in the gate file (--gates), at least p99_ms = <target>; "
            "see docs/serving.md"
        )
    eval_set = require_labelled(_speech_set(inputs.eval_set, inputs.calib_root), "--eval-set")
    calib_set = _speech_set(inputs.calib_set, inputs.calib_root) if inputs.calib_set else None
    if calib_set is not None:
        require_calibration_role(calib_set)
    utts, profile_notes = select_utterances(
        eval_set,
        calib_set,
        inputs.outside_profile,
        inputs.profile_min_s,
        inputs.profile_max_s,
        inputs.limit,
        inputs.inference.check(),
    )
    check_cache_apart(eval_set, inputs.cache)
    if inputs.candidates:
        check_candidates(list(inputs.candidates))
        check_target_inputs(inputs.target, list(inputs.candidates), inputs.cache is not None, inputs.as_given)
    else:
        if not inputs.calib_set:
            raise WorkbenchError(
                "give --calib-set to build FP32/FP16/INT8 variants from --model, or the candidates "
                "as --candidate fp32=model.onnx --candidate int8=model.int8.onnx (FP32 first)"
            )
        if inputs.model is None:
            raise WorkbenchError(
                "give --model to build FP32/FP16/INT8 variants, or the candidates as --candidate"
            )
        MethodSpec(inputs.method)
    if inputs.model is not None and not isinstance(inputs.model, ModelDescription):
        check_model_source(
            inputs.model
        )  # an unsupported model stops here, before anything is built or written
    sensitivity = read_sensitivity(inputs.sensitivity) if inputs.sensitivity is not None else None
    if inputs.ray is not None:
        ClusterAddress.parse(inputs.ray)
        require_ray()
        if inputs.backend == "tensorrt":
            raise WorkbenchError(
                "--ray transcribes with ONNX Runtime (--backend ort-cpu or ort-cuda); sign off TensorRT "
                "engines without --ray"
            )
        if inputs.also_limit is not None and inputs.also_decoders:
            raise WorkbenchError("--decoder-limit is not spread over Ray: drop --ray or --decoder-limit")
        if inputs.pad_batches:
            raise WorkbenchError("--pad-batches is not spread over Ray: drop --ray or --pad-batches")
    unlabelled = unlabelled_selections(inputs, calib_set)
    return eval_set, calib_set, utts, profile_notes, sensitivity, unlabelled


def unlabelled_selections(inputs: SignoffInputs, calib_set: SpeechSet | None) -> list[UnlabelledSelection]:
    """The ``--unlabelled-set`` sets, checked (``workbench.jobs.label_free.check_unlabelled``)."""
    return check_unlabelled(
        inputs.unlabelled_sets,
        inputs.calib_root,
        calib_set,
        inputs.outside_profile,
        inputs.profile_min_s,
        inputs.profile_max_s,
        inputs.inference.check(),
    )


def target_calibration(
    cache: Path | None, cpu_flavours: bool
) -> tuple[dict[str, float] | None, RecoveredSource | None]:
    """The activation ranges of ``cache`` (None: no cache) and, when the target's CPU flavours are made
    (``cpu_flavours``), its recovered source (None: made without accuracy recovery), which they are built from."""
    if cache is None:
        return None, None
    loaded = load_cache(Path(cache))
    return loaded.amax(), cache_recovered_source(Path(cache), loaded) if cpu_flavours else None


def run(inputs: SignoffInputs, memo: SignoffMemo | None = None) -> SignoffResult:
    """Check every input (``check``), build the default candidates if none are given, then transcribe, score,
    time and judge every candidate and write report.json/.md/.html. ``memo``: overflow checks and transcripts
    shared with other sign-offs of this process (``workbench.jobs.signoff_memo``; the record names each reuse)."""
    eval_set, calib_set, utts, profile_notes, sensitivity, unlabelled_sets = check(inputs)
    reused_before = len(memo.reused) if memo is not None else 0
    assumed = list(inputs.assumed)
    method = inputs.method
    candidates, cache, sensitivity_path = list(inputs.candidates), inputs.cache, inputs.sensitivity
    for note in profile_notes:
        logger.info(f"note: {note}")
    given = (
        inputs.model
        if isinstance(inputs.model, ModelDescription) or inputs.model is None
        else describe_model(inputs.model, inputs.error_unit)
    )
    if not candidates:
        if given is None or inputs.calib_set is None:  # ``check`` refused this already
            raise WorkbenchError("give --model and --calib-set to build FP32/FP16/INT8 variants")
        calib_source = inputs.calib_set.path if isinstance(inputs.calib_set, SpeechSet) else inputs.calib_set
        if calib_set is None:  # ``check`` loaded it
            raise WorkbenchError("give --calib-set to build FP32/FP16/INT8 variants")
        recipe, recipe_notes = resolve_recipe(
            Recipe.asked(inputs.method, inputs.recovery),
            inputs.recipe_given,
            inputs.search if inputs.use_search else None,
            area_path("engines", inputs.engines) / artifact_folder_name(given.model_hash),
            calib_set.content_hash,
            eval_set.content_hash,
        )
        for line in recipe_notes:
            logger.info(f"note: {line}")
        assumed += recipe_notes
        method = recipe.method
        logger.info(
            f"building FP32/FP16/INT8 variants of {given.source} calibrated on {calib_source} ({method})"
        )
        built = build_default_variants(
            given,
            calib_source,
            method,
            root=inputs.engines,
            eval_hash=eval_set.content_hash,
            calib_root=inputs.calib_root,
            recovery=recipe.options(),
            search=inputs.search,
            use_search=inputs.use_search,
        )
        if built.search_note:
            assumed.append(built.search_note)
        candidates, cache = built.candidates, cache or built.cache
        if built.mixed_note:
            logger.info(built.mixed_note)
        if sensitivity_path is None and built.sensitivity is not None:
            sensitivity_path, sensitivity = built.sensitivity, read_sensitivity(built.sensitivity)
        check_candidates(candidates)
    amax, recovered = target_calibration(cache, inputs.target == CPU_TARGET and not inputs.as_given)
    targeted = candidates_for_target(
        inputs.target,
        candidates,
        amax,
        weights=inputs.ort_cpu_weights,
        as_given=inputs.as_given,
        recovered=recovered,
    )
    candidates = targeted.pairs()
    for note in targeted.notes():
        logger.info(f"{inputs.target}: {note}")
    model = resolve_model(candidates, given).with_error_unit(inputs.error_unit)
    logger.info(f"model: {model.source} ({model.model_hash[:12]}): {model.summary()}")
    names = [n for n, _ in candidates]
    machine = machine_info()
    overflow = overflow_reports(
        candidates,
        calib_set if inputs.overflow_check else None,
        model.prepare,
        memo,
        model.model_hash,
        inputs.overflow_clips,
    )
    batch = inputs.batch_size or default_batch_size(inputs.backend)
    factory = RunnerFactory(
        inputs.backend,
        inputs.threads,
        inputs.engines,
        engine_settings(utts + [u for sel in unlabelled_sets for u in sel.utterances], inputs.latency, batch),
    )
    runners = {name: factory.runner(path, name) for name, path in candidates}
    # the serving benchmark first: its bad input (a target below one request, a batch over the profile or the
    # memory limit, a load this machine cannot generate) stops the sign-off before any transcription
    serving = (
        measure_serving_of(inputs, factory, candidates, eval_set, utts, model) if inputs.serving else None
    )
    hyps: dict[str, list[str]] = {}
    batch_checks: dict[str, BatchCheck] = {}
    policy: dict[str, Any] = {}
    inference, also = (
        inputs.inference,
        [d for d in inputs.also_decoders if d.name != inputs.inference.decoder.name],
    )
    by_decoder: dict[str, dict[str, list[str]]] = {inference.decoder.name: hyps, **{d.name: {} for d in also}}
    # the other decoders on an even spread of the utterances when limited (the verdict decoder on all of them)
    also_on = (
        check_sample(len(utts), inputs.also_limit)
        if also and inputs.also_limit is not None and inputs.also_limit < len(utts)
        else None
    )
    logger.info(f"inference: {inference.summary()}")
    audios = [eval_set.audio(u) for u in utts]
    references = [u.text for u in utts]
    ids = [u.id for u in utts]
    runs = {
        "backend": inputs.backend,
        "threads": inputs.threads,
        "batch": batch,
        "inference": inference.to_json(),
    }
    done: dict[str, tuple[Transcripts, BatchCheck | None]] = {}
    keys: dict[str, Key | None] = {}
    for name, path in candidates:
        key = memo.transcripts_key(path, eval_set.content_hash, ids, model.model_hash, runs) if memo else None
        keys[name] = key
        found = (
            memo.find_transcripts(key, also, name, also_on) if memo is not None and key is not None else None
        )
        if found is not None:
            logger.info(f"[{name}] transcripts of this file on {eval_set.name} reused")
            done[name] = found
    pending = [(name, path) for name, path in candidates if name not in done]
    if pending and inputs.ray is not None:
        logger.info(f"transcribing {len(utts)} utterances x {len(pending)} candidates on Ray ({inputs.ray})")
        from workbench.cluster.signoff import spread_transcription

        done.update(
            spread_transcription(
                ClusterAddress.parse(inputs.ray),
                pending,
                runners,
                audios,
                model,
                batch,
                references,
                inference,
                also,
                ort_providers(inputs.backend),
            )
        )
    else:
        for name, _ in pending:
            logger.info(
                f"[{name}] transcribing {len(utts)} utterances of {eval_set.name} on {inputs.backend}, batch {batch}"
            )
            done[name] = transcribe_checked(
                runners[name],
                audios,
                model,
                name,
                batch,
                references,
                inference=inference,
                also=also,
                also_on=also_on,
                pad=inputs.pad_batches,
            )
    for name, _ in pending:
        key = keys[name]
        if memo is not None and key is not None:
            memo.keep_transcripts(key, *done[name], also, also_on)
    for name in names:
        result, agreement = done[name]
        hyps[name], policy = result.texts, result.batching
        for decoder, texts in result.by_decoder.items():
            by_decoder[decoder][name] = texts
        if agreement is not None:
            batch_checks[name] = agreement
            logger.info(f"[{name}] {agreement.summary()}")
    del audios
    latencies = {}
    if inputs.latency:
        buckets = bucket_clips(eval_set)
        logger.info(
            f"timing {', '.join(names)} interleaved on {inputs.backend}: batch sizes "
            f"{list(inputs.latency.batch_sizes)} x buckets {list(buckets)}"
        )
        latencies = measure_interleaved(runners, buckets, inputs.latency, machine, model.prepare)
    accuracy = compare_accuracy(
        utts, hyps, names[0], resamples=inputs.resamples, seed=inputs.seed, scoring=Scoring.for_model(model)
    )
    decoded = utts if also_on is None else [utts[i] for i in also_on]
    if (
        also_on is not None
    ):  # every decoder judged on the same utterances: the verdict decoder's texts cut down
        by_decoder[inference.decoder.name] = {n: [t[i] for i in also_on] for n, t in hyps.items()}
    decoders = decoder_accuracy(
        decoded,
        by_decoder,
        {d.name: d.to_json() for d in [inference.decoder, *also]},
        names[0],
        Scoring.for_model(model),
        inputs.resamples,
        inputs.seed,
        total=len(utts),
    )
    verdicts = judge(accuracy, latencies, inputs.gates)
    if serving is not None and inputs.gates.serving is not None:
        add_serving_checks(verdicts, serving[0], inputs.gates.serving)
    add_overflow_checks(verdicts, overflow)
    unlabelled = None
    if inputs.unlabelled_sets:  # the label-free check on the user's own audio
        unlabelled = label_free(
            unlabelled_sets,
            names,
            runners,
            model,
            eval_set,
            utts,
            hyps,
            accuracy,
            fp32_onnx=Path(candidates[0][1]),
            amax=amax,
            calib_set=calib_set,
            inference=inference,
            batch=batch,
            resamples=inputs.resamples,
            seed=inputs.seed,
            shift_margin=None
            if inputs.gates.unlabelled_shift_margin is None
            else inputs.gates.unlabelled_shift_margin / 100,
        )
        gate_checks(unlabelled, inputs.gates, verdicts)
    held = add_evidence_checks(verdicts, accuracy, utts, inputs.evidence)
    engine_checks = {}
    if inputs.backend == "tensorrt":  # the built engines' own precisions against each candidate's plan
        engine_checks = {n: inspect_engine_precisions(factory.engine_of(p), p) for n, p in candidates}
        for verdict in verdicts:
            verdict.add(engine_precision_check(engine_checks[verdict.candidate]))
    decision = decide(
        verdicts,
        latencies,
        names[0],
        tie_info := [Candidate(n, precision_counts(p), Path(p).stat().st_size) for n, p in candidates],
        inputs.target,
        inputs.backend if latencies else None,
        inputs.gates.latency_batch,
        evidence_rule=evidence_rule(inputs.evidence, accuracy.unit),
    )
    if serving is not None:
        decision = decide_by_capacity(decision, serving[0], tie_info, inputs.backend)
    artifacts = [artifact_entry("evaluation set", eval_set.path, "speech set")]
    if model.folder is not None:
        artifacts.insert(0, artifact_entry("model", model.folder, "model"))
    if calib_set is not None:
        artifacts.append(artifact_entry("calibration set", calib_set.path, "speech set"))
    if cache is not None:
        artifacts.append(artifact_entry("calibration cache", cache, "cache"))
    if sensitivity_path is not None:
        artifacts.append(artifact_entry("sensitivity", sensitivity_path, "json"))
    artifacts += [artifact_entry(f"candidate {n}", p, "onnx") for n, p in candidates]
    lacking = missing.report_note(eval_set.name, eval_set.card, "evaluation set")
    if lacking:
        artifacts[[a["role"] for a in artifacts].index("evaluation set")]["missing"] = lacking
    notes = [
        *assumed,
        f"evaluation set {eval_set.name} content hash {eval_set.content_hash}",
        *([lacking] if lacking else []),
        f"model {model.source} (hash {model.model_hash[:12]}): {model.summary()}",
        f"inference: {inference.summary()}; the verdict is judged under {inference.decoder.name}",
    ]
    notes += [f"engine of {n}: {c.summary()}" for n, c in engine_checks.items()]
    notes += [str(n) for r in runners.values() if (n := getattr(r, "session_note", None))]
    if inputs.limit:
        notes.append(f"only the first {inputs.limit} utterances of the evaluation set were scored")
    if also_on is not None:
        notes.append(
            f"decoders {', '.join(d.name for d in also)} scored on {len(also_on)} of {len(utts)} utterances "
            f"(spread evenly over the set; the per-decoder table compares every decoder on those); the verdict "
            f"is judged under {inference.decoder.name} on all {len(utts)}"
        )
    notes += profile_notes
    notes += targeted.notes()
    notes += [f"{name}: {report.summary()}" for name, report in overflow.items()]
    if not overflow:
        notes.append("no overflow check (it needs the calibration set)")
    elif (
        calib_set is not None
        and inputs.overflow_clips is not None
        and inputs.overflow_clips < len(calib_set.utterances)
    ):
        notes.append(
            f"overflow check: outputs on {inputs.overflow_clips} of the {len(calib_set.utterances)} calibration "
            f"clips (the longest half, the rest spread over the set)"
        )
    if memo is not None:
        notes += memo.reused[reused_before:]
    backend = {
        "backend": inputs.backend,
        "device": device_of(inputs.backend),
        "target": inputs.target,
        "measured": "transcription (WER) and latency of every candidate",
        "candidates": targeted.to_json(),  # what the target runs: as given, or made for it
        "batching": {**policy, "batch_check": [c.to_json() for c in batch_checks.values()]},
    }
    notes += [f"batched transcription, {c.summary()}" for c in batch_checks.values()]
    notes += [n for n in [batching_note(policy)] if n]
    if serving is not None:
        notes.append(f"serving on {inputs.backend}: {serving[1]['summary']}; {serving[1]['requests']}")
    compute = compute_of(candidates, utts)
    record = build_record(
        accuracy=accuracy.to_json(),
        latency={n: r.to_json() for n, r in latencies.items()},
        verdicts=[v.to_json() for v in verdicts],
        recommendation=decision.recommendation,
        decision={**decision.to_json(), "evidence": {check: asdict(g) for check, g in held.items()}},
        backend=backend,
        gates=inputs.gates.to_json(),
        artifacts=artifacts,
        machine=machine,
        packages=package_versions(),
        sensitivity=sensitivity,
        notes=notes,
        model=model.record(),
        compute=compute,
        inference=inference.to_json(),
        decoders=decoders,
        serving=serving[1] if serving is not None else None,
        label_free=None if unlabelled is None else unlabelled.to_json(),
        settings={**inputs.settings(), "method": None if inputs.candidates else method, "assumed": assumed},
    )
    return SignoffResult(record, write_report(record, inputs.out_dir))


def measure_serving_of(
    inputs: SignoffInputs,
    factory: RunnerFactory,
    candidates: list[tuple[str, Path]],
    eval_set: SpeechSet,
    utts: list[Utterance],
    model: ModelDescription,
) -> tuple[dict[str, CandidateServing], dict[str, Any]]:
    """The serving benchmark of every candidate on ``inputs.backend`` (``workbench.serving``): fresh runners behind
    the dynamic batcher, the judged clips (or ``request_s`` requests) as the load; the results and their record."""
    config = inputs.gates.serving
    if config is None:  # ``check`` refused this already
        raise WorkbenchError("--serving needs a [serving] table in the gate file")
    requests = RequestSet.of([eval_set.audio(u) for u in utts], model.prepare, config.request_s)
    logger.info(f"serving benchmark on {inputs.backend}: {config.summary()}; {requests.description}")
    results = measure_serving(
        [(n, partial(factory.runner, p, n)) for n, p in candidates],
        lambda runner: BatchPolicy.for_runner(runner, model, config.max_batch, inputs.pad_batches),
        requests,
        config,
        logger.info,
    )
    return results, serving_record(results, config, inputs.backend, requests)


def compute_of(candidates: list[tuple[str, Path]], utts: list[Utterance]) -> dict[str, Any]:
    """Each candidate's INT8 share of multiply-accumulates (the baseline's graph at the judged clips' median
    length, the engine profile's opt) beside its INT8 node count."""
    import onnx

    macs = node_macs(
        onnx.load(str(candidates[0][1]), load_external_data=False), opt_samples([u.duration_s for u in utts])
    )
    return {
        **macs.to_json(),
        "candidates": {n: compute_shares(macs, precisions_of_onnx(Path(p))) for n, p in candidates},
    }

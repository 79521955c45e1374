"""``python -m workbench demo``: run the whole job on the embedded defaults.

The demo is a list of steps (``STEPS``), each a named function of a shared ``DemoContext`` that calls
one job (``workbench.jobs``) and reads what earlier steps left in ``context.results``: build the
default speech sets (``demo``: 100 utterances per condition for calibration, ``DEMO_EVAL_PER_CONDITION`` per
condition for evaluation, ``DEMO_DEV_PER_CONDITION`` per condition for a dev set held out from both), calibrate
the demo model, compare it
layer by layer against INT8 and rank the layer groups' sensitivity, search the mixed INT8/FP16 plan on
the held-out dev set, and sign off on the evaluation set for two deployment targets: TensorRT (FP32, FP16,
INT8 and the mixed plan; timed here on ONNX Runtime CPU, so an accuracy sign-off) and ONNX Runtime CPU (FP32,
the CPU flavours of INT8 and the mixed plan and ONNX Runtime's dynamic INT8, timed on the target: a winner).

A step may also have a ``start``: it runs before an earlier step (``start_with``) and begins work in the background
that the step itself then waits for (the language model: estimated from the training texts in a worker process
during the layer comparison, which leaves most of a core idle).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.commands.options import print_lines
from workbench.config import DEMO_DEV_PER_CONDITION, DEMO_EVAL_PER_CONDITION, SetBuildConfig
from workbench.resources import demo_model_dir
from workbench.values import whole_number
from workbench.workspace import area_default

if TYPE_CHECKING:
    from workbench.evaluate.latency import LatencyConfig
    from workbench.jobs.signoff_memo import SignoffMemo

# The demo's calibration method. Percentile 99.99 rather than TensorRT's entropy: with entropy as NVIDIA's
# reference computes it, INT8-everywhere loses +4.13 WER points on demo-eval [95 % CI +2.83, +5.41] and the
# mixed search keeps 46.6 % of the groups in INT8 (benchmarks/results/calibration_methods_entropy_reference.json;
# entropy still clips attention-probability ranges to ~0.12), percentile 99.99 loses +0.93 [+0.16, +2.24] and
# keeps 75.9 % (benchmarks/results/calibration_methods.json). The verbs' default (config.DEFAULT_METHOD) is the same.
DEMO_METHOD = "percentile"
DEMO_PERCENTILE = 99.99
# beam search over the demo's evaluation set with flashlight-text (its word scores in Python): a beam of 32 keeps the step to
# minutes on a CPU; --quick (tests) estimates the language model from the first 2000 training sentences
DEMO_BEAM_WIDTH = 32
DEMO_QUICK_LM_SENTENCES = 2000
# What the demo scales down to fit a few minutes on a 2-core machine (``demo --full`` runs each at full size; each
# sign-off record and the demo's output say what was cut). Beam search with the LM (flashlight-text, its word scores in Python) costs
# more than the model on the CPU, so it decodes an even spread of the evaluation set; greedy decoding judges the
# verdict on every utterance.
DEMO_BEAM_UTTERANCES = 120
# the overflow check's outputs on the longest half of this many calibration clips and the rest spread over the set
# (every tensor on 16 of them, as at full size)
DEMO_OVERFLOW_CLIPS = 64
# finer steps of the demo's search (workbench.search.finer): each costs up to a whole dev-set evaluation
DEMO_FINER = 1


@dataclass
class DemoContext:
    """What the steps share: the set configuration, where artifacts go (the workspace's folders unless
    overridden), and each step's results."""

    sets: SetBuildConfig
    calib_root: Path
    engines_root: Path
    reports_root: Path
    quick: bool = False
    full: bool = False  # every step at full size (demo --full)
    shift_scale: bool = (
        False  # the calibration adds the shift and scale of conv and MatMul inputs (demo --shift-scale)
    )
    results: dict[str, Any] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)  # each step's wall time
    cpu_seconds: dict[str, float] = field(
        default_factory=dict
    )  # each step's CPU time (every thread and worker)
    memo: SignoffMemo | None = None  # overflow checks and transcripts the two sign-offs share (FP32's)
    background: dict[str, Any] = field(default_factory=dict)  # the futures of steps started in the background


@dataclass(frozen=True)
class Step:
    """One stage of the demo: a short name, a one-line purpose and the function that runs it; ``start``, when
    given, runs before the step named ``start_with`` and begins this step's work in the background (``run`` waits
    for it)."""

    name: str
    purpose: str
    run: Callable[[DemoContext], None]
    start: Callable[[DemoContext], None] | None = None
    start_with: str | None = None


def _speech_sets(ctx: DemoContext) -> None:
    from workbench.jobs import sets

    result = sets.run(sets.SetsInputs(ctx.sets, root=ctx.calib_root))
    print_lines(result.lines())
    ctx.results["speech_sets"] = result.built


def _calibrate(ctx: DemoContext) -> None:
    from workbench.calibration.methods import MethodSpec
    from workbench.calibration.recovery import RecoveryOptions
    from workbench.config import DEMO_RECOVERY
    from workbench.jobs import calibrate

    built = ctx.results["speech_sets"]
    result = calibrate.run(
        calibrate.CalibrateInputs(
            demo_model_dir(),
            str(built.calib.path),
            MethodSpec(DEMO_METHOD, DEMO_PERCENTILE),
            engines=ctx.engines_root,
            calib_root=ctx.calib_root,
            recovery=replace(RecoveryOptions(**asdict(DEMO_RECOVERY)), shift_scale=ctx.shift_scale),
        )
    )
    print_lines(result.lines())
    ctx.results["calibrate"] = result


def _analysis(ctx: DemoContext) -> dict[str, Any]:
    """The fields compare and search share: the demo model, its calibration set, method and cache."""
    built, calibrated = ctx.results["speech_sets"], ctx.results["calibrate"]
    return {
        "model": demo_model_dir(),
        "calib_set": str(built.calib.path),
        "method": DEMO_METHOD,
        "cache": calibrated.cache,
        "engines": ctx.engines_root,
        "calib_root": ctx.calib_root,
    }


def _compare(ctx: DemoContext) -> None:
    from workbench.jobs import compare

    result = compare.run(compare.CompareInputs(**_analysis(ctx), per_condition=1 if ctx.quick else 2))
    print_lines(result.lines())
    ctx.results["compare"] = result


def _search(ctx: DemoContext) -> None:
    from workbench.jobs import search

    built = ctx.results["speech_sets"]
    dev = built.dev or built.calib
    print(
        f"dev set: {dev.name}, {'held out from calibration and evaluation' if built.dev else 'the calibration set'}"
        f" (the sign-off judges the found plan on {built.eval.name})"
    )
    result = search.run(
        search.SearchInputs(
            **_analysis(ctx),
            signoff_set=str(built.eval.path),
            dev_set=str(built.dev.path) if built.dev else None,
            sensitivity=ctx.results["compare"].files["sensitivity_json"],
            refine=0,
            # one finer step: on the demo's dev set a second and more only add evaluations that fail
            finer=0 if ctx.quick else DEMO_FINER,
            resamples=200 if ctx.quick else 1000,
        )
    )
    print_lines(result.lines())
    ctx.results["search"] = result


def _lm_available() -> bool:
    from workbench.optional import has_module

    return has_module("flashlight.lib.text.decoder.kenlm")


def _lm_path(ctx: DemoContext) -> Path:
    return ctx.engines_root / "demo-lm.arpa"


def _start_language_model(ctx: DemoContext) -> None:
    """Estimate the language model in a worker process from the training texts alone: none of them is an evaluation
    text by construction (``workbench.speech.text`` splits texts by a hash), and ``_language_model`` checks that
    against the evaluation set."""
    if not _lm_available():
        return
    limit = DEMO_QUICK_LM_SENTENCES if ctx.quick else None
    ctx.background["language-model"] = _in_background(_build_training_lm, _lm_path(ctx), limit)


def _in_background(fn: Callable[..., Any], *args: Any) -> Future:
    """``fn(*args)`` (an importable function) in a fresh worker process that ends with this one: spawned, not
    forked, since this process has run ONNX Runtime's thread pools by then."""
    import multiprocessing
    import os

    from workbench.speech.workers import die_with_parent

    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(1, mp_context=context, initializer=die_with_parent, initargs=(os.getpid(),))
    future = pool.submit(fn, *args)
    pool.shutdown(wait=False)  # the worker ends after its one task
    return future


def _build_training_lm(path: Path, limit: int | None) -> tuple[int, int, int]:
    """(order, sentences, words) of the training-text language model written to ``path`` (in a worker process)."""
    from workbench.evaluate.ngram import training_text_lm

    model = training_text_lm(path, limit=limit)
    return model.order, model.sentences, model.words


def _language_model(ctx: DemoContext) -> None:
    from workbench.evaluate.inference import DecoderSettings
    from workbench.evaluate.ngram import shared_texts, training_text_lm

    if not _lm_available():
        print(
            "note: beam search needs flashlight-text (./setup.sh installs it); the sign-off scores "
            "greedy decoding only"
        )
        return
    built = ctx.results["speech_sets"]
    path = _lm_path(ctx)
    exclude = [u.text for u in built.eval.utterances]
    limit = DEMO_QUICK_LM_SENTENCES if ctx.quick else None
    running = ctx.background.pop("language-model", None)
    built_aside = running.result() if running is not None else None  # waited for: it writes ``path``
    if built_aside is not None and not shared_texts(exclude, limit):  # (shared: never, by construction)
        order, sentences, words = built_aside
        print("language model estimated in the background during the layer comparison")
    else:
        model = training_text_lm(path, exclude, limit=limit)
        order, sentences, words = model.order, model.sentences, model.words
    print(
        f"language model: {path} ({order}-gram interpolated Kneser-Ney from {sentences} training "
        f"sentences, {words} words; none of them an evaluation text)"
    )
    ctx.results["lm"] = DecoderSettings("beam", beam_width=DEMO_BEAM_WIDTH, lm=path)


def _candidates(ctx: DemoContext, say: bool = True) -> list[tuple[str, Path]]:
    """FP32, FP16, INT8 and, when the search found one, the mixed plan (the TensorRT-bound files)."""
    calibrated = ctx.results["calibrate"]
    candidates = [
        ("fp32", calibrated.fp32_onnx),
        ("fp16", calibrated.fp16_onnx),
        (f"int8-{DEMO_METHOD}", calibrated.int8_onnx),
    ]
    search = ctx.results.get("search")
    found = search.data["found"] if search else None
    if found:
        candidates.append(("mixed", Path(found["onnx_path"])))
        macs = found.get("int8_macs_share")
        if say:
            print(
                f"mixed candidate: {found['name']} ("
                + (f"{macs * 100:.1f}% of multiply-accumulates, " if macs is not None else "")
                + f"{found['int8_share'] * 100:.1f}% of MatMul/Conv nodes in INT8)"
            )
    elif search and say:
        print("no mixed plan met the budget on the dev set; signing off FP32, FP16 and INT8 only")
    return candidates


def _signoff_for(
    ctx: DemoContext, target: str, folder: str, latency: LatencyConfig | None, say: bool = True
) -> None:
    """Sign off the demo's candidates for ``target`` on the evaluation set (report under ``folder``)."""
    from workbench.jobs import signoff

    built = ctx.results["speech_sets"]
    calibrated = ctx.results["calibrate"]
    compared = ctx.results.get("compare")
    inputs = signoff.SignoffInputs(
        eval_set=str(built.eval.path),
        out_dir=ctx.reports_root / folder,
        candidates=_candidates(ctx, say),
        model=demo_model_dir(),
        calib_set=str(built.calib.path),
        cache=calibrated.cache,
        engines=ctx.engines_root,
        calib_root=ctx.calib_root,
        sensitivity=compared.files["sensitivity_json"] if compared else None,
        latency=None if ctx.quick else latency,
        target=target,
        also_decoders=[ctx.results["lm"]] if "lm" in ctx.results and target == "tensorrt" else [],
        also_limit=None if ctx.full else DEMO_BEAM_UTTERANCES,
        overflow_clips=None if ctx.full else DEMO_OVERFLOW_CLIPS,
    )
    if not ctx.full:
        print(
            f"{target} sign-off scaled down (demo --full runs it at full size): overflow check outputs on "
            f"{DEMO_OVERFLOW_CLIPS} of {len(built.calib.utterances)} calibration clips"
            + (
                f", beam search with the LM on {DEMO_BEAM_UTTERANCES} of {len(built.eval.utterances)} evaluation "
                "utterances (greedy judges all of them)"
                if inputs.also_decoders
                else ""
            )
            + (
                ", no latency (--quick)"
                if ctx.quick
                else f", latency: {_latency_words(latency)}"
                if latency is not None
                else ", no latency (timed here it would be ONNX Runtime CPU's, which says nothing of the target)"
            )
        )
    if ctx.memo is None:
        from workbench.jobs.signoff_memo import SignoffMemo

        ctx.memo = SignoffMemo()
    print_lines(signoff.run(inputs, ctx.memo).lines())


def _latency_words(latency: LatencyConfig) -> str:
    batches = ", ".join(str(b) for b in latency.batch_sizes)
    budget = f" within about {latency.point_budget_s:g} s a point" if latency.point_budget_s else ""
    return (
        f"batch {batches}, up to {latency.repeats} interleaved rounds{budget}, never fewer than "
        f"{min(latency.repeats, latency.min_repeats)}"
    )


def signoff_latency(target: str, full: bool) -> LatencyConfig | None:
    """The latency rounds of the demo's sign-off for ``target`` (``full``: demo --full); None: not timed."""
    from workbench.evaluate.latency import LatencyConfig

    if target == "tensorrt":
        # timed on ONNX Runtime CPU, not on the target: the times inform and pick nothing, so only the full-size demo
        # takes them (batch 1 and 8, up to 15 rounds within about 10 s a point, never fewer than 5)
        return (
            LatencyConfig((1, 8), warmup=1, repeats=15, point_budget_s=10.0, min_repeats=5) if full else None
        )
    # the winner is judged at batch 1 (the gate batch): 10 interleaved rounds there either way; at full size the
    # batch-8 points (throughput, they pick nothing) get as many rounds as fit in about 15 s, never fewer than 5
    return (
        LatencyConfig((1, 8), warmup=1, repeats=10, point_budget_s=15.0, min_repeats=5)
        if full
        else LatencyConfig((1,), warmup=1, repeats=10, point_budget_s=15.0, min_repeats=5)
    )


def _signoff(ctx: DemoContext) -> None:
    _signoff_for(ctx, "tensorrt", "demo-signoff", signoff_latency("tensorrt", ctx.full))


def _signoff_cpu(ctx: DemoContext) -> None:
    _signoff_for(ctx, "ort-cpu", "demo-signoff-cpu", signoff_latency("ort-cpu", ctx.full), say=False)


STEPS: tuple[Step, ...] = (
    Step(
        "speech-sets",
        "build balanced calibration, evaluation and held-out dev sets from synthetic speech",
        _speech_sets,
    ),
    Step(
        "calibrate",
        "export the demo model to ONNX, calibrate (percentile 99.99, bias correction), write cache and INT8 model",
        _calibrate,
    ),
    Step(
        "compare",
        "layer-by-layer FP32 vs INT8 table (Polygraphy) and per-group sensitivity ranking",
        _compare,
    ),
    Step(
        "search", "mixed INT8/FP16 plan with the most INT8 within the WER budget (dev set: held out)", _search
    ),
    Step(
        "language-model",
        "a 3-gram language model from the training texts (none an evaluation text) for beam search",
        _language_model,
        start=_start_language_model,
        start_with="compare",
    ),
    Step(
        "signoff",
        "for TensorRT: FP32, FP16, INT8 and the mixed plan: WER with CIs (greedy, and beam search with the LM), "
        "latency, gates; accuracy sign-off",
        _signoff,
    ),
    Step(
        "signoff-cpu",
        "for ONNX Runtime CPU: FP32, the CPU flavours of INT8 and the mixed plan, ORT dynamic INT8; a winner",
        _signoff_cpu,
    ),
)


def run_steps(ctx: DemoContext, steps: tuple[Step, ...] = STEPS) -> DemoContext:
    """Run ``steps`` in order, printing a header and the time each took: wall time (``ctx.seconds``) and CPU time
    of this process's threads and its finished worker processes (``ctx.cpu_seconds``; on a loaded machine the wall
    time grows, the CPU time much less). Steps with a ``start`` begin their background work first; a background
    worker's CPU time counts in the step during which it ends."""
    for number, step in enumerate(steps, 1):
        for early in steps[number - 1 :]:  # background work that begins alongside this step (or at its own)
            if early.start is not None and (early.start_with or early.name) == step.name:
                early.start(ctx)
        print(f"\n=== [{number}/{len(steps)}] {step.name}: {step.purpose}", flush=True)
        started, cpu = time.perf_counter(), _cpu_seconds()
        step.run(ctx)
        ctx.seconds[step.name] = time.perf_counter() - started
        ctx.cpu_seconds[step.name] = _cpu_seconds() - cpu
        print(
            f"=== {step.name} done in {ctx.seconds[step.name]:.1f} s (CPU {ctx.cpu_seconds[step.name]:.1f} s)",
            flush=True,
        )
    return ctx


def _cpu_seconds() -> float:
    """User + system time of this process and of its children that have ended (the TTS workers)."""
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timing_lines(ctx: DemoContext) -> list[str]:
    """Each step's seconds and the total, for the end of the demo's output."""
    total = sum(ctx.seconds.values())
    lines = [
        "step times: " + ", ".join(f"{name} {sec:.1f} s" for name, sec in ctx.seconds.items()),
        f"total: {total:.1f} s ({int(total // 60)} min {total % 60:04.1f} s)",
    ]
    if ctx.cpu_seconds:
        cpu = sum(ctx.cpu_seconds.values())
        lines.append(
            "CPU time: "
            + ", ".join(f"{name} {sec:.1f} s" for name, sec in ctx.cpu_seconds.items())
            + f"; total {cpu:.1f} s"
        )
    return lines


def add_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = SetBuildConfig()
    parser.add_argument(
        "--workers", type=whole_number(1), default=defaults.workers, help="parallel TTS workers"
    )
    # smaller runs for tests and quick looks; the documented demo uses the defaults
    parser.add_argument(
        "--calib-per-condition",
        type=whole_number(1),
        default=defaults.calib_per_condition,
        help=argparse.SUPPRESS,
    )
    parser.add_argument(
        "--eval-per-condition",
        type=whole_number(1),
        default=DEMO_EVAL_PER_CONDITION,
        help=f"evaluation utterances per condition (default {DEMO_EVAL_PER_CONDITION}; fewer make the demo faster "
        "and the sign-off's intervals wider, docs/demo.md)",
    )
    parser.add_argument(
        "--dev-per-condition",
        type=whole_number(0),
        default=DEMO_DEV_PER_CONDITION,
        help=f"held-out dev utterances per condition, what the search judges on (default {DEMO_DEV_PER_CONDITION})",
    )
    parser.add_argument(
        "--seed", type=whole_number(0), default=defaults.seed, help=argparse.SUPPRESS
    )  # other texts and voices
    parser.add_argument("--root", type=Path, default=area_default("calib_sets"), help=argparse.SUPPRESS)
    parser.add_argument("--engines-root", type=Path, default=area_default("engines"), help=argparse.SUPPRESS)
    parser.add_argument("--reports-root", type=Path, default=area_default("reports"), help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help=argparse.SUPPRESS)  # tests: no latency runs
    parser.add_argument(
        "--full",
        action="store_true",
        help=f"every step at full size: beam search with the LM on every evaluation utterance (default: "
        f"{DEMO_BEAM_UTTERANCES} spread over the set), the overflow check on every calibration clip (default: "
        f"{DEMO_OVERFLOW_CLIPS}), latency at batch 1 and 8 (default: batch 1)",
    )
    parser.add_argument(
        "--shift-scale",
        action="store_true",
        help="calibrate with the per-channel shift and scale of the convolution and one-sided MatMul inputs too "
        "(calibrate --shift-scale, docs/recovery.md), and so compare, search and sign off with it",
    )


def run(args: argparse.Namespace) -> int:
    sets = replace(
        SetBuildConfig(),
        calib_per_condition=args.calib_per_condition,
        eval_per_condition=args.eval_per_condition,
        dev_per_condition=args.dev_per_condition,
        seed=args.seed,
        workers=max(1, args.workers),
    )
    print(
        f"workspace: {args.workspace.root} (sets -> {args.root}, engines -> {args.engines_root}, "
        f"reports -> {args.reports_root})"
    )
    ctx = run_steps(
        DemoContext(
            sets=sets,
            calib_root=Path(args.root),
            engines_root=Path(args.engines_root),
            reports_root=Path(args.reports_root),
            quick=args.quick,
            full=args.full,
            shift_scale=args.shift_scale,
        )
    )
    print(
        f"\ndemo finished: {len(STEPS)} step(s); sets under {ctx.calib_root}, reports under "
        f"{ctx.reports_root / 'demo-signoff'} (TensorRT) and {ctx.reports_root / 'demo-signoff-cpu'} "
        "(ONNX Runtime CPU)"
    )
    print_lines(timing_lines(ctx))
    return 0

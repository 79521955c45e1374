"""``python -m workbench signoff``: candidates + evaluation set -> sign-off report (JSON, Markdown, HTML).

Candidates are ONNX files given as ``--candidate name=path.onnx``; the first is the FP32 baseline.
Without ``--candidate``, FP32, FP16 and INT8 variants are built from ``--model`` and ``--calib-set``
(export, calibration cache reused when its keys match, Q/DQ) and compared, together with the mixed plan
of a finished ``search`` on the same export and cache (its sensitivity ranking is plotted) unless that
search used the evaluation set as its dev set. With ``--candidate`` and no ``--model``, the model is the
one the candidates carry in their metadata (the record names it); a baseline that carries none needs
``--model``. Errors are counted in the model's unit (WER, or CER for character languages) unless
``--error-unit`` says otherwise. See ``workbench.jobs.signoff``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
from pathlib import Path

from workbench.commands.options import (
    add_backend_argument,
    add_batch_size_argument,
    add_error_unit,
    add_inference_arguments,
    add_ray_argument,
    add_recovery_arguments,
    default_recovery,
    inference_from,
    model_or_demo,
    print_lines,
    recovery_from,
)
from workbench.config import (
    BACKENDS,
    DEFAULT_METHOD,
    DEFAULT_TARGET,
    MIN_RESAMPLES,
    OUTSIDE_PROFILE_DEFAULT,
    OUTSIDE_PROFILE_POLICIES,
)
from workbench.errors import WorkbenchError
from workbench.inputs.out_folder import refuse_inside_set
from workbench.inputs.replace import add_replace_argument, refuse_replacing
from workbench.values import batch_sizes, seconds, whole_number
from workbench.workspace import area_default


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--candidate",
        action="append",
        default=[],
        metavar="NAME=PATH.onnx",
        help="an ONNX candidate (repeat; the first is the FP32 baseline); without it, "
        "FP32/FP16/INT8 are built from --model and --calib-set",
    )
    parser.add_argument(
        "--method",
        help=f"calibration method for the built INT8 variant (default {DEFAULT_METHOD}; with --search: the search's; "
        "refused when this model's caches and searches on the calibration set were made with another recipe)",
    )
    parser.add_argument(
        "--search",
        type=Path,
        metavar="RECORD",
        help="the search-*.json whose found plan is signed off as 'mixed' (its calibration recipe is taken); "
        "without it, the one finished search of this export and cache (several are refused, naming them)",
    )
    parser.add_argument(
        "--no-search", action="store_true", help="leave any search's plan out of the built candidates"
    )
    parser.add_argument("--eval-set", required=True, help="evaluation set name under calib_sets/ or a path")
    parser.add_argument(
        "--unlabelled-set",
        action="append",
        default=[],
        metavar="SET",
        help="unlabelled audio (data import --role unlabelled) every candidate is checked on against FP32: "
        "disagreement, the bound on the WER delta, calibration coverage and the shift check (repeatable)",
    )
    parser.add_argument(
        "--calib-set", "--set", dest="calib_set", help="calibration set (recorded in provenance)"
    )
    parser.add_argument(
        "--model",
        help="model folder or hub id (default: the model the candidates name in their "
        "metadata; without --candidate, the demo model, refused when the workspace holds other models' artifacts)",
    )
    parser.add_argument("--cache", type=Path, help="calibration cache file (provenance)")
    add_recovery_arguments(parser)
    parser.add_argument("--gates", type=Path, help="gate limits, JSON or TOML")
    parser.add_argument("--sensitivity", type=Path, help="per-layer sensitivity JSON to plot")
    parser.add_argument(
        "--batch-sizes", type=batch_sizes(), default="1,8,32", help="latency batch sizes, comma separated"
    )
    parser.add_argument("--warmup", type=whole_number(0), default=2, help="untimed runs before timing")
    parser.add_argument("--repeats", type=whole_number(1), default=10, help="timed runs per batch size")
    parser.add_argument("--no-latency", action="store_true", help="skip timing (accuracy only)")
    parser.add_argument("--threads", type=whole_number(1), help="ONNX Runtime intra-op threads")
    add_backend_argument(parser, "transcription and timing")
    add_batch_size_argument(parser)
    parser.add_argument(
        "--serving",
        action="store_true",
        help="also run the serving benchmark: Poisson load through a dynamic batcher, p50/p95/p99 against "
        "offered load, capacity under the gate file's [serving] p99_ms (docs/serving.md)",
    )
    parser.add_argument(
        "--pad-batches",
        action="store_true",
        help="the deployment pads clips of different lengths into one batch: evaluate a model without an "
        "attention mask padded too (default: such a model batches equal lengths only; the report says so)",
    )
    add_ray_argument(
        parser, "the transcription (utterance shards per candidate; latency stays on this machine)"
    )
    parser.add_argument(
        "--target",
        choices=BACKENDS,
        default=DEFAULT_TARGET,
        help="where the candidate will be deployed (default tensorrt): latency picks a winner only "
        "when it was measured there; otherwise the verdict is an accuracy sign-off",
    )
    parser.add_argument(
        "--as-given",
        action="store_true",
        help="judge the candidates as given; without it --target ort-cpu judges what a CPU deployment runs "
        "(FP32, the ONNX Runtime CPU flavour of every INT8 candidate, ONNX Runtime's dynamic INT8)",
    )
    parser.add_argument(
        "--resamples",
        type=whole_number(MIN_RESAMPLES),
        default=2000,
        help=f"bootstrap resamples (at least {MIN_RESAMPLES})",
    )
    parser.add_argument("--seed", type=whole_number(0), default=0)
    parser.add_argument("--limit", type=whole_number(1), help="score only the first N evaluation utterances")
    parser.add_argument(
        "--overflow-clips",
        type=whole_number(1),
        help="check candidates' outputs for inf/NaN on N calibration clips (the longest half, the rest spread "
        "over the set; every tensor on 16 of them either way); default: every calibration clip",
    )
    parser.add_argument(
        "--decoder-limit",
        type=whole_number(1),
        help="score the further --decoder entries (e.g. beam+lm) on N utterances spread evenly over the set; "
        "the first decoder still judges every utterance (default: all)",
    )
    parser.add_argument(
        "--out", type=Path, help="report folder (default: reports/signoff-<time> of the workspace)"
    )
    add_replace_argument(parser, "a sign-off report already in --out")
    parser.add_argument("--reports-root", type=Path, default=area_default("reports"), help=argparse.SUPPRESS)
    parser.add_argument(
        "--engines",
        type=Path,
        default=area_default("engines"),
        help="where variants built from --model go (default: engines/ of the workspace)",
    )
    parser.add_argument(
        "--outside-profile",
        choices=OUTSIDE_PROFILE_POLICIES,
        default=OUTSIDE_PROFILE_DEFAULT,
        help="evaluation clips outside the deployment profile: refuse (default), score them "
        "anyway, or skip them; the report says which",
    )
    parser.add_argument(
        "--min-seconds",
        type=seconds(),
        help="deployment profile's shortest clip (default: the calibration set's profile)",
    )
    parser.add_argument(
        "--max-seconds",
        type=seconds(),
        help="deployment profile's longest clip (default: the calibration set's profile)",
    )
    parser.add_argument("--root", type=Path, default=area_default("calib_sets"), help=argparse.SUPPRESS)
    add_error_unit(parser)
    add_inference_arguments(parser)


def parse_candidates(values: list[str]) -> list[tuple[str, Path]]:
    out = []
    for value in values:
        name, sep, path = value.partition("=")
        if not sep or not name or not path:
            raise WorkbenchError(f"--candidate takes NAME=PATH.onnx, got {value!r}")
        out.append((name, Path(path)))
    return out


def run(args: argparse.Namespace) -> int:
    from workbench.evaluate.gates import load_gate_config
    from workbench.evaluate.latency import LatencyConfig
    from workbench.jobs import signoff
    from workbench.report.render import HTML_NAME, MARKDOWN_NAME, RECORD_NAME

    candidates = parse_candidates(args.candidate)
    inference, also = inference_from(args)
    if args.decoder_limit is not None and not also:
        raise WorkbenchError(
            "--decoder-limit limits the further --decoder entries (e.g. --decoder greedy,beam+lm); with one decoder "
            "drop it, or use --limit to score fewer utterances"
        )
    latency = None if args.no_latency else LatencyConfig(args.batch_sizes, args.warmup, args.repeats)
    if args.search is not None and (args.no_search or candidates):
        raise WorkbenchError("--search names the plan of built candidates: drop --no-search and --candidate")
    given = recovery_from(args)
    # none given: the default recipe's recovery (with --cache: the cache's own), refused by the job when this model's
    # caches and searches on the calibration set were all made with other recipes (jobs.signoff_defaults)
    recovery = given if given is not None or args.cache is not None else default_recovery()
    assumed = [] if candidates else list(model_or_demo(args, "signed off"))
    out = args.out or args.reports_root / f"signoff-{_dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"
    refuse_inside_set(args.engines, "--engines")
    refuse_inside_set(out, "--out")
    refuse_replacing(
        [Path(out) / name for name in (RECORD_NAME, MARKDOWN_NAME, HTML_NAME)],
        "sign-off report",
        "give another --out",
        args.replace,
    )
    inputs = signoff.SignoffInputs(
        eval_set=args.eval_set,
        unlabelled_sets=list(args.unlabelled_set),
        out_dir=out,
        candidates=candidates,
        calib_set=args.calib_set,
        error_unit=args.error_unit,
        model=args.model,
        method=args.method or DEFAULT_METHOD,
        recovery=recovery,
        recipe_given=args.method is not None or given is not None,
        search=args.search,
        use_search=not args.no_search,
        assumed=assumed,
        cache=args.cache,
        gates=load_gate_config(args.gates),
        latency=latency,
        sensitivity=args.sensitivity,
        threads=args.threads,
        backend=args.backend,
        batch_size=args.batch_size,
        pad_batches=args.pad_batches,
        serving=args.serving,
        target=args.target,
        as_given=args.as_given,
        resamples=args.resamples,
        seed=args.seed,
        limit=args.limit,
        engines=args.engines,
        calib_root=args.root,
        outside_profile=args.outside_profile,
        profile_min_s=args.min_seconds,
        profile_max_s=args.max_seconds,
        inference=inference,
        also_decoders=also,
        also_limit=args.decoder_limit,
        overflow_clips=args.overflow_clips,
        ray=args.ray,
    )
    print_lines(signoff.run(inputs).lines())
    return 0

"""Option parsers and option groups shared by several CLI verbs (no verb imports another)."""

from __future__ import annotations

import argparse
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from workbench.config import BACKENDS, DEFAULT_BACKEND, DEFAULT_METHOD, DEFAULT_RECOVERY
from workbench.errors import WorkbenchError
from workbench.resources import demo_model_dir
from workbench.values import chunk_seconds, finite_number, number_in, stride_seconds, whole_number
from workbench.workspace import area_default


def add_model_and_calib_set(parser: argparse.ArgumentParser) -> None:
    """``--model`` (default: the demo model, see ``model_or_demo``) and ``--calib-set`` (alias ``--set``, default
    ``demo-calib``)."""
    parser.add_argument(
        "--model",
        help="CTC model folder or hub id: Wav2Vec2, HuBERT, WavLM, Data2VecAudio, Wav2Vec2-Conformer "
        "(default: the demo model shipped in the package, said on one line; refused when the workspace holds "
        "other models' artifacts)",
    )
    parser.add_argument(
        "--calib-set",
        "--set",
        dest="calib_set",
        default="demo-calib",
        help="calibration set name under calib_sets/ or a path",
    )


def model_or_demo(args: argparse.Namespace, done: str) -> tuple[str, ...]:
    """Fill a left-out ``--model`` with the embedded demo model when the workspace (``--engines``, and ``--cache``
    where the verb has it) holds no other model's artifacts, else refuse naming them
    (``jobs.signoff_defaults.check_default_model``); the line that says so is printed and returned, for the record.
    ``done``: what the verb does to the model ("calibrated", "compared", "searched")."""
    if args.model is not None:
        return ()
    from workbench.jobs.signoff_defaults import check_default_model

    line = check_default_model(args.engines, None, getattr(args, "cache", None), done)
    print(f"note: {line}")
    args.model = str(demo_model_dir())
    return (line,)


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``compare`` and ``search``: the fields of ``jobs.prepare.AnalysisInputs``."""
    add_model_and_calib_set(parser)
    parser.add_argument(
        "--method", default=DEFAULT_METHOD, help="calibration method (entropy, max, percentile, mse)"
    )
    parser.add_argument("--cache", type=Path, help="calibration cache to use (checked against the model)")
    parser.add_argument(
        "--per-condition",
        type=whole_number(1),
        default=2,
        help="clips per speech condition for the layer table and the sensitivity ranking",
    )
    parser.add_argument(
        "--granularity",
        choices=("group", "node"),
        default="group",
        help="rank layer groups (conv layer, q/k/v, FFN, ...) or single MatMul/Conv nodes",
    )
    parser.add_argument("--threads", type=whole_number(1), help="ONNX Runtime intra-op threads")
    parser.add_argument("--out", type=Path, help="output folder (default engines/<model hash>/compare)")
    parser.add_argument(
        "--engines",
        type=Path,
        default=area_default("engines"),
        help="artifact root (default: engines/ of the workspace)",
    )
    parser.add_argument("--root", type=Path, default=area_default("calib_sets"), help=argparse.SUPPRESS)
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    add_backend_argument(parser, "the model")
    add_error_unit(parser)
    add_recovery_arguments(parser, with_cache=True)


def add_recovery_arguments(parser: argparse.ArgumentParser, with_cache: bool = False) -> None:
    """``--smoothquant``, ``--bias-correction``, ``--refine-ranges``, ``--clip-search``, ``--shift-scale`` (each
    with its ``--no-`` form) and ``--no-recovery``: the accuracy-recovery options of the calibration
    (``workbench.calibration.recovery``). None given: the default recipe's (``config.DEFAULT_RECOVERY``, bias
    correction and the clipping search, the best measured), as a project file's; options turned on: exactly those;
    only ``--no-`` forms: the default's without them. ``with_cache``: the verb also takes ``--cache``, whose own
    recovery options are used when none is given here (a cache made with others is refused)."""
    also = (
        "; with --cache: as the cache was made (a cache made with other recovery options is refused)"
        if with_cache
        else ""
    )
    on = ", ".join(f"--{name.replace('_', '-')}" for name in default_recovery_names())
    group = parser.add_argument_group(
        f"accuracy recovery (docs/recovery.md; none given: the default recipe's {on}, the best measured; options "
        "turned on: exactly those; only --no- forms: the default's without them)"
    )
    group.add_argument(
        "--no-recovery",
        action="store_true",
        help="calibrate with no accuracy recovery at all (the plain recipe)",
    )
    group.add_argument(
        "--smoothquant",
        metavar="auto|ALPHA",
        type=smoothquant_strength,
        help="SmoothQuant: migrate activation outliers of MatMul/Gemm inputs into the weights (scales folded "
        "into the FP32 graph); 'auto' searches the strength per tensor by output error on the calibration "
        "clips, a number in [0, 1] fixes it. Costs a second calibration pass" + also,
    )
    group.add_argument(
        "--bias-correction",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="remove the mean output shift that INT8 weight rounding causes (folded into each INT8 layer's bias)"
        + also,
    )
    group.add_argument(
        "--refine-ranges",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="per tensor, the range among the methods' (max, entropy, percentile, MSE) with the least "
        "layer output error" + also,
    )
    group.add_argument(
        "--clip-search",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="per convolution input, the clipping threshold (the method's, percentiles 99.7-99.99, max) with the "
        "least KL of the model's logits from FP32 on 32 calibration clips, that conv alone in INT8 (the feature "
        "encoder's long-tailed GELU outputs)" + also,
    )
    group.add_argument(
        "--shift-scale",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="per convolution input and one-sided MatMul input (a GELU's output), a per-channel shift and scale "
        "(folded into the layer's weights and bias, a pointwise op before the quantize) that centres every channel "
        "and evens their widths, with the shifted "
        "tensor's threshold, chosen by the KL of the logits on the clipping search's clips ('off' a candidate)"
        + also,
    )


def smoothquant_strength(text: str) -> str:
    """An argparse ``type`` for ``--smoothquant``: ``auto`` or a strength in [0, 1], kept as typed."""
    if text != "auto":
        number_in(0.0, 1.0)(text)
    return text


RECOVERY_FLAGS = ("bias_correction", "refine_ranges", "clip_search", "shift_scale")


def default_recovery_names() -> list[str]:
    """The techniques the default recipe turns on (``config.DEFAULT_RECOVERY``)."""
    return [name for name in RECOVERY_FLAGS if getattr(DEFAULT_RECOVERY, name)]


def default_recovery() -> Any:
    """``config.DEFAULT_RECOVERY`` as ``RecoveryOptions``: the recipe a verb and a project file take by default."""
    from workbench.calibration.recovery import RecoveryOptions

    return RecoveryOptions(**asdict(DEFAULT_RECOVERY))


def recovery_from(args: argparse.Namespace) -> Any:
    """The ``RecoveryOptions`` ``add_recovery_arguments``' values ask for, or None when none was given: options turned
    on are exactly those; ``--no-`` forms alone take the default recipe's without them; ``--no-recovery`` none."""
    from workbench.calibration.recovery import RecoveryOptions

    flags = {name: getattr(args, name) for name in RECOVERY_FLAGS}
    on = args.smoothquant is not None or any(v is True for v in flags.values())
    off = [name for name, v in flags.items() if v is False]
    if getattr(args, "no_recovery", False):
        if on or off:
            raise WorkbenchError(
                "--no-recovery turns every accuracy-recovery technique off: drop it, or the other recovery options"
            )
        return RecoveryOptions()
    if on:
        return RecoveryOptions(smoothquant=args.smoothquant, **{n: v is True for n, v in flags.items()})
    if off:
        return replace(default_recovery(), **{name: False for name in off})
    return None


def recovery_or_default(args: argparse.Namespace, cache: Path | None) -> tuple[Any, tuple[str, ...]]:
    """The recovery a verb calibrates (or checks a cache) with and the line that says when it is the default: the
    options given; None with ``cache`` (the cache's own); else the default recipe's, said on one line (printed, and
    for the record)."""
    from workbench.jobs.prepare import describe_recovery

    given = recovery_from(args)
    if given is not None or cache is not None:
        return given, ()
    options = default_recovery()
    line = (
        f"no recovery option: the default recipe's accuracy recovery ({describe_recovery(options)}; the best "
        "measured, docs/recovery.md); --no-recovery for none"
    )
    print(f"note: {line}")
    return options, (line,)


def add_backend_argument(parser: argparse.ArgumentParser, what: str) -> None:
    """``--backend``: where the model runs for this step (every record says which backend and device)."""
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default=DEFAULT_BACKEND,
        help=f"where {what} runs: ONNX Runtime on the CPU (default), ONNX Runtime CUDA "
        "(needs onnxruntime-gpu) or TensorRT (needs TensorRT and a GPU it supports)",
    )


def add_ray_argument(parser: argparse.ArgumentParser, what: str) -> None:
    """``--ray ADDRESS``: spread ``what`` over a Ray cluster (needs the ``ray`` extra)."""
    parser.add_argument(
        "--ray",
        metavar="ADDRESS",
        help=f"spread {what} over a Ray cluster: local:N (a local cluster of N workers, stopped after), auto "
        "(the cluster this machine belongs to) or a cluster address (ray://head:10001); needs "
        "pip install 'workbench[ray]'. Records equal a run without it but for timings (docs/ray.md)",
    )


def add_batch_size_argument(parser: argparse.ArgumentParser) -> None:
    """``--batch-size``: clips of similar length transcribed together (default: per backend)."""
    from workbench.config import EVAL_BATCH_BY_BACKEND

    defaults = ", ".join(f"{b} {n}" for b, n in EVAL_BATCH_BY_BACKEND.items())
    parser.add_argument(
        "--batch-size",
        type=whole_number(1),
        help=f"utterances per evaluation batch, length-bucketed (default per backend: {defaults}; "
        "a TensorRT engine's profile caps it; 1: one clip at a time); a model without an attention mask "
        "batches clips of equal length only",
    )


def add_error_unit(parser: argparse.ArgumentParser) -> None:
    """``--error-unit``: count errors per word or per character (default: what the model's vocabulary calls for)."""
    from workbench.evaluate.wer import UNITS

    parser.add_argument(
        "--error-unit",
        choices=sorted(UNITS),
        help="count errors per word (wer) or character (cer); default: from the model's vocabulary "
        "(CER for scripts written without spaces)",
    )


def add_inference_arguments(parser: argparse.ArgumentParser) -> None:
    """How audio becomes text for every WER this verb measures (``workbench.evaluate.inference``)."""
    group = parser.add_argument_group("inference as deployed")
    group.add_argument(
        "--chunk-seconds",
        type=chunk_seconds(),
        help="feed long audio in chunks of this many seconds (transformers' pipeline chunk_length_s); "
        "default: every clip whole",
    )
    group.add_argument(
        "--stride-seconds",
        type=stride_seconds(),
        help="left,right (or one value for both) seconds of each chunk whose logits are dropped "
        "(default: chunk / 6)",
    )
    group.add_argument(
        "--decoder",
        default="greedy",
        help="greedy, beam or beam+lm (flashlight-text; beam+lm needs --lm); comma separated to score several "
        "on the same logits where the verb reports them, the first judging (default greedy)",
    )
    group.add_argument("--beam-width", type=whole_number(1), help="beam width (default 100)")
    group.add_argument("--lm", type=Path, help="n-gram language model for beam search (ARPA or KenLM binary)")
    group.add_argument(
        "--lm-alpha", type=finite_number(), help="language model weight (default 0.5; needs --lm)"
    )
    group.add_argument(
        "--lm-beta", type=finite_number(), help="word insertion bonus (default 1.0; needs --lm)"
    )
    group.add_argument(
        "--hotword", action="append", default=[], help="a word to favour (repeatable; single words)"
    )
    group.add_argument(
        "--blank-penalty",
        type=finite_number(),
        default=0.0,
        help="subtracted from the CTC blank's logit before decoding (default 0)",
    )


def inference_from(args: argparse.Namespace):
    """The ``InferenceConfig`` the inference options describe (its decoder: the first of ``--decoder``) and
    the further decoders named there; checked, so bad values are one error line."""
    from workbench.errors import WorkbenchError
    from workbench.evaluate.decoders import require_decoder_packages
    from workbench.evaluate.inference import ChunkSettings, InferenceConfig, decoders_from_names

    stride: float | tuple[float, float] | None = args.stride_seconds
    if stride is not None and args.chunk_seconds is None:
        raise WorkbenchError("--stride-seconds needs --chunk-seconds")
    decoders = decoders_from_names(
        args.decoder, args.beam_width, args.lm, args.lm_alpha, args.lm_beta, args.hotword, args.blank_penalty
    )
    chunks = ChunkSettings.of(args.chunk_seconds, stride) if args.chunk_seconds is not None else None
    for decoder in decoders:  # a missing flashlight-text is refused before any model work, not after it
        require_decoder_packages(decoder)
    return InferenceConfig(chunks, decoders[0]).check(), decoders[1:]


def analysis_fields(args: argparse.Namespace, done: str) -> dict[str, Any]:
    """``add_model_arguments``' values as keyword arguments of ``AnalysisInputs`` (and its subclasses); an
    ``--engines`` inside a speech set's folder is refused (``--out`` is checked with the job's inputs); a left-out
    ``--model`` is ``model_or_demo``'s (``done``: what the verb does to the model)."""
    from workbench.inputs.out_folder import refuse_inside_set

    refuse_inside_set(args.engines, "--engines")
    assumed = model_or_demo(args, done)
    recovery, said = recovery_or_default(args, args.cache)
    return {
        "assumed": (*assumed, *said),
        "model": args.model,
        "calib_set": args.calib_set,
        "method": args.method,
        "cache": args.cache,
        "per_condition": args.per_condition,
        "granularity": args.granularity,
        "threads": args.threads,
        "out": args.out,
        "engines": args.engines,
        "calib_root": args.root,
        "progress": not args.no_progress,
        "backend": args.backend,
        "error_unit": args.error_unit,
        "recovery": recovery,
    }


def print_lines(lines: list[str]) -> None:
    """Print what a job reports, one line each."""
    for line in lines:
        print(line)

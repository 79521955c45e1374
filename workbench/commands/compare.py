"""``python -m workbench compare``: layer-by-layer FP32 vs quantized table and per-group sensitivity ranking.

Writes ``layers-<candidate>.json/.csv`` and ``sensitivity-<method>-<calib12>-rest-<rest>.json/.csv``
under ``engines/<model hash 12>/compare/`` (or ``--out``). ``add_model_arguments`` and
``prepare_from_args`` are shared with the ``search`` verb.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.config import CALIB_SETS_DIR, DEMO_MODEL_DIR, ENGINES_DIR
from workbench.errors import WorkbenchError

if TYPE_CHECKING:
    from workbench.compare.setup import Prepared
    from workbench.speech.store import SpeechSet


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default=str(DEMO_MODEL_DIR), help="HF Wav2Vec2ForCTC folder or hub id")
    parser.add_argument("--calib-set", default="demo-calib", help="calibration set name under calib_sets/ or a path")
    parser.add_argument("--method", default="entropy", help="calibration method (entropy, max, percentile, mse)")
    parser.add_argument("--cache", type=Path, help="calibration cache to use (checked against the model)")
    parser.add_argument("--per-condition", type=int, default=2,
                        help="clips per speech condition for the layer table and the sensitivity ranking")
    parser.add_argument("--granularity", choices=("group", "node"), default="group",
                        help="rank layer groups (conv layer, q/k/v, FFN, ...) or single MatMul/Conv nodes")
    parser.add_argument("--threads", type=int, help="ONNX Runtime intra-op threads")
    parser.add_argument("--out", type=Path, help="output folder (default engines/<model hash>/compare)")
    parser.add_argument("--engines", type=Path, default=ENGINES_DIR, help="artifact root (default: engines/)")
    parser.add_argument("--root", type=Path, default=CALIB_SETS_DIR, help=argparse.SUPPRESS)
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    parser.add_argument("--clips-set", help="set the clips come from (default: the calibration set)")
    parser.add_argument("--candidate", type=Path, help="quantized ONNX to compare (default: INT8 everywhere)")
    parser.add_argument("--plan", type=Path, help="precision plan JSON: its variant is compared (and its "
                                                  "precisions shown) instead of INT8 everywhere")
    parser.add_argument("--rest", choices=("fp32", "fp16"), default="fp32",
                        help="precision of everything outside the group under test")
    parser.add_argument("--inverse", action="store_true", help="also run all-INT8-except-the-group variants")
    parser.add_argument("--no-layers", action="store_true", help="skip the layer-by-layer table")
    parser.add_argument("--no-sensitivity", action="store_true", help="skip the sensitivity ranking")
    parser.add_argument("--atol", type=float, default=1e-2, help="Polygraphy absolute tolerance per tensor")
    parser.add_argument("--rtol", type=float, default=1e-2, help="Polygraphy relative tolerance per tensor")


def prepare_from_args(args: argparse.Namespace) -> Prepared:
    """Check the shared options, then the FP32 ONNX + cache for ``--model`` (see ``compare.setup.prepare``)."""
    from workbench.calibration.methods import METHODS
    from workbench.compare.setup import prepare

    if args.method not in METHODS:
        raise WorkbenchError(f"--method must be one of {', '.join(METHODS)}, not {args.method!r}")
    if args.per_condition < 1:
        raise WorkbenchError("--per-condition must be at least 1")
    return prepare(args.model, args.calib_set, args.method, root=args.engines, cache_path=args.cache,
                   calib_root=args.root)


def print_files(files: dict[str, Path]) -> None:
    """The files a verb wrote, one per line."""
    for key, path in files.items():
        print(f"  {key:>16}: {path}")


def user_set(name: str | None, role: str, args: argparse.Namespace) -> SpeechSet | None:
    """The set named by an option (``None`` when not given), loaded and checked before any model work."""
    from workbench.compare.clips import require_utterances
    from workbench.speech.store import load_set

    return require_utterances(load_set(name, root=args.root), role) if name else None


def run(args: argparse.Namespace) -> int:
    from workbench.compare.jobs import run_compare
    from workbench.quantize.plan import PrecisionPlan

    # what the user names is read first, so a bad file fails before the model is loaded or calibrated
    plan = PrecisionPlan.load(args.plan) if args.plan else None
    if args.candidate is not None and not args.candidate.is_file():
        raise WorkbenchError(f"--candidate {args.candidate} is not a file; give a quantized ONNX model "
                             "(or drop --candidate to compare INT8 everywhere)")
    clips_set = user_set(args.clips_set, "clips", args)
    prepared = prepare_from_args(args)
    result = run_compare(prepared, clips_set or prepared.calib_set, args.per_condition, candidate=args.candidate, plan=plan,
                         layers=not args.no_layers, sensitivity=not args.no_sensitivity, rest=args.rest,
                         inverse=args.inverse, granularity=args.granularity, out=args.out, threads=args.threads,
                         atol=args.atol, rtol=args.rtol, progress=not args.no_progress)
    if result.layers:
        print_layer_summary(result.layers)
    if result.sensitivity:
        print_ranking(result.sensitivity)
    print_files(result.files)
    return 0


def print_layer_summary(data: dict[str, Any], top: int = 12) -> None:
    """The layer table's compute rows (first ``top`` and the logits) and where the error starts."""
    first = data["first_significant"]
    compute = [r for r in data["rows"] if r["compute"] or r is data["rows"][-1]]
    print(f"layers: {data['summary']['tensors']} shared tensors, {data['summary']['significant']} below "
          f"cosine {data['thresholds']['cosine']} / SQNR {data['thresholds']['sqnr_db']} dB")
    print(f"  {'#':>4} {'module':<48} {'prec':<5} {'cosine':>8} {'SQNR dB':>8} {'rel L2':>8} {'max abs':>9}")
    for r in compute[:top] + ([compute[-1]] if len(compute) > top else []):
        print(f"  {r['index']:>4} {r['module'][-48:]:<48} {str(r['precision'] or '-'):<5} {r['cosine']:>8.4f} "
              f"{r['sqnr_db']:>8.1f} {r['rel_l2']:>8.3f} {r['max_abs_error']:>9.3g}")
    if first:
        print(f"  error first significant at row {first['index']}: {first['module']} ({first['tensor']}), "
              f"cosine {first['cosine']:.4f}, SQNR {first['sqnr_db']:.1f} dB")
    else:
        print("  no tensor below the thresholds")


def print_ranking(data: dict[str, Any], top: int = 10) -> None:
    """The ``top`` most sensitive groups of a ranking."""
    print(f"sensitivity (quantize one {data['granularity']} to INT8, rest {data['rest']}; KL vs FP32 logits): "
          f"INT8 everywhere KL {data['int8_everywhere']['kl']:.4f}, token disagreement "
          f"{data['int8_everywhere']['token_disagreement']:.3f}")
    for layer in data["layers"][:top]:
        print(f"  {layer['rank']:>3}. {layer['name']:<45} KL {layer['kl']:.4f}  tokens changed "
              f"{layer['token_disagreement'] * 100:5.1f}%")

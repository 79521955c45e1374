"""Batched evaluation against batch 1: utterances per second and the transcripts batching changes.

For each model (``--models``: ``demo``, the shipped demo model; ``base``, a Wav2Vec2-base-size model with
random weights from ``workbench/model/synthetic.py``, nothing downloaded) the FP32 ONNX export transcribes the
evaluation set (``--eval-set``, a stored speech set, e.g. ``calib_sets/demo-eval`` as the demo builds it) on
``--backend`` at each batch size, through the workbench's own path (``workbench.evaluate.transcribe``: length-
bucketed batches, padding as the model expects). Batch 1 is the reference: every other batch size reports its
speed-up, how many transcripts differ from batch 1 and the WER difference that makes (WER against the set's
texts; a random-weight model transcribes noise, so its WER says nothing, but its transcripts still show
whether batching changes them). One untimed warm-up batch first; each pass is timed whole (features,
padding, inference, decoding).

    python benchmarks/batched_eval.py --backend ort-cpu --eval-set calib_sets/demo-eval
    python benchmarks/batched_eval.py --backend ort-cuda --eval-set calib_sets/demo-eval --batch-sizes 1,8,32,64

Prints a table and writes ``benchmarks/results/batched_eval_<backend>.json`` (``--out`` to change). Speed
ratios are only meaningful on an otherwise idle machine: the load average before and after is recorded, and the
cores other processes used during the run (``common.MachineCpu``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from common import MachineCpu  # noqa: E402

MODELS = ("demo", "base")
DEFAULT_BATCHES = {"ort-cpu": "1,4,8,16", "ort-cuda": "1,8,32,64"}


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=tuple(DEFAULT_BATCHES), default="ort-cpu")
    parser.add_argument("--eval-set", required=True, help="a stored speech set (folder or name under --root)")
    parser.add_argument("--root", type=Path, default=Path("calib_sets"), help="where set names are looked up")
    parser.add_argument("--models", default=",".join(MODELS), help="comma separated: demo, base")
    parser.add_argument("--batch-sizes", help="comma separated; 1 first (default per backend)")
    parser.add_argument("--limit", type=int, help="only the first N utterances of the set")
    parser.add_argument("--threads", type=int, help="ONNX Runtime intra-op threads")
    parser.add_argument(
        "--pad-batches",
        action="store_true",
        help="zero-pad clips of different lengths into a batch for a model without an attention mask, as a "
        "deployment that pads does (the sign-off's --pad-batches); without it such a model batches equal lengths",
    )
    parser.add_argument(
        "--work", type=Path, default=Path("/tmp/workbench-batched-eval"), help="exports go here"
    )
    parser.add_argument(
        "--out", type=Path, help="results JSON (default benchmarks/results/batched_eval_<backend>.json)"
    )
    args = parser.parse_args(argv)
    sizes = [int(b) for b in (args.batch_sizes or DEFAULT_BATCHES[args.backend]).split(",") if b.strip()]
    if not sizes or min(sizes) < 1:
        parser.error("--batch-sizes: positive whole numbers, comma separated")
    args.batch_sizes = [1] + sorted(set(sizes) - {1})
    args.models = [m for m in args.models.split(",") if m]
    unknown = [m for m in args.models if m not in MODELS]
    if unknown:
        parser.error(f"--models: unknown {unknown}; choose from {', '.join(MODELS)}")
    return args


def export(name: str, work: Path) -> tuple[Path, Any]:
    """The FP32 ONNX of ``name`` (exported once into ``work``) and its model description."""
    from transformers import AutoModelForCTC

    from workbench.model.description import describe_model
    from workbench.model.export import export_onnx
    from workbench.model.synthetic import save_random_wav2vec2
    from workbench.resources import demo_model_dir

    folder = demo_model_dir() if name == "demo" else work / "base-random"
    if name != "demo" and not (folder / "config.json").is_file():
        save_random_wav2vec2(folder, "base", seed=0)
    description = describe_model(folder)
    onnx_path = work / f"{name}.fp32.onnx"
    if not onnx_path.is_file():
        model = AutoModelForCTC.from_pretrained(str(folder)).eval()
        export_onnx(model, onnx_path, description)
    return onnx_path, description


def error_rate(texts: list[str], references: list[str], description: Any) -> float:
    from workbench.evaluate.wer import Scoring, corpus_wer, score_utterances

    ids = [str(i) for i in range(len(texts))]
    return corpus_wer(score_utterances(ids, references, texts, Scoring.for_model(description)))


def measure(args: argparse.Namespace, name: str, clips: list[Any], references: list[str]) -> dict[str, Any]:
    from workbench.backends.factory import ORT_PROVIDERS
    from workbench.backends.onnxruntime import OnnxRuntimeRunner
    from workbench.evaluate.transcribe import transcribe

    onnx_path, description = export(name, args.work)
    audio_s = sum(len(c) for c in clips) / 16000
    rows: list[dict[str, Any]] = []
    reference_texts: list[str] | None = None
    for batch in args.batch_sizes:
        runner = OnnxRuntimeRunner(onnx_path, providers=ORT_PROVIDERS[args.backend], threads=args.threads)
        with runner:
            transcribe(
                runner, clips[: max(1, batch)], description, name, batch_size=batch, pad=args.pad_batches
            )  # warm-up, untimed
            started = time.perf_counter()
            result = transcribe(runner, clips, description, name, batch_size=batch, pad=args.pad_batches)
            seconds = time.perf_counter() - started
        if reference_texts is None:
            reference_texts = result.texts
        wer = error_rate(result.texts, references, description)
        rows.append(
            {
                "batch_size": batch,
                "policy": result.batching,
                "seconds": seconds,
                "utterances_per_s": len(clips) / seconds,
                "audio_s_per_s": audio_s / seconds,
                "wer": wer,
                "differing_from_batch1": sum(a != b for a, b in zip(result.texts, reference_texts)),
            }
        )
    base = rows[0]
    for row in rows:
        row["speedup_vs_batch1"] = row["utterances_per_s"] / base["utterances_per_s"]
        row["wer_difference_points"] = 100.0 * (row["wer"] - base["wer"])
    return {
        "model": name,
        "onnx": str(onnx_path),
        "description": description.summary(),
        "utterances": len(clips),
        "audio_seconds": audio_s,
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    from workbench.backends.devices import device_of
    from workbench.backends.factory import check_backend
    from workbench.evaluate.machine import machine_info, package_versions
    from workbench.speech.store import load_set

    check_backend(args.backend)
    args.work.mkdir(parents=True, exist_ok=True)
    speech_set = load_set(args.eval_set, root=args.root)
    utts = speech_set.utterances[: args.limit] if args.limit else speech_set.utterances
    clips = [speech_set.audio(u) for u in utts]
    references = [u.text for u in utts]
    load_before = list(os.getloadavg())
    before = MachineCpu.now(include_self=True)
    results = [measure(args, name, clips, references) for name in args.models]
    others = MachineCpu.now(include_self=True).foreign_cores(before)
    out = {
        "benchmark": "batched_eval",
        "command": "python benchmarks/batched_eval.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "backend": args.backend,
        "device": device_of(args.backend),
        "eval_set": {
            "name": speech_set.name,
            "content_hash": speech_set.content_hash,
            "utterances": len(utts),
        },
        "load_average_before": load_before,
        "load_average_after": list(os.getloadavg()),
        "other_processes_cores": round(others, 3),
        "machine": machine_info(),
        "packages": package_versions(),
        "python": platform.python_version(),
        "results": results,
    }
    path = args.out or HERE / "results" / f"batched_eval_{args.backend.replace('-', '_')}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(out, indent=2, default=str) + "\n", encoding="utf-8")
    tmp.replace(path)
    print(
        f"{'model':<6} {'batch':>5} {'utt/s':>8} {'x batch1':>8} {'differ':>6} {'WER %':>7} {'dWER pts':>8}"
    )
    for result in results:
        for row in result["rows"]:
            print(
                f"{result['model']:<6} {row['batch_size']:>5} {row['utterances_per_s']:>8.1f} "
                f"{row['speedup_vs_batch1']:>8.2f} {row['differing_from_batch1']:>6} {row['wer'] * 100:>7.2f} "
                f"{row['wer_difference_points']:>+8.2f}"
            )
    print(
        f"load average before {load_before}, after {out['load_average_after']}; other processes used "
        f"{others:.2f} cores; wrote {path}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Transcription on ONNX Runtime CPU: one run at a time against concurrent runs of one session (``infer_each``).

Each ONNX file (``--onnx NAME=PATH``: the demo's FP32 export, its FP16 and INT8 variants, its mixed plan) transcribes
the first ``--limit`` utterances of ``--eval-set`` through the workbench's own path (``workbench.evaluate.
transcribe``, batches of ``--batch-size``) two ways, interleaved over ``--rounds`` rounds after an untimed warm-up:
``one_run`` (``OnnxRuntimeRunner(streams=1)``: one run at a time with every thread, as before) and ``concurrent``
(the default: ``cpu_streams`` runs at once, the threads split between them). Per file: the median seconds of each,
their ratio and how many transcripts differ (concurrent runs must not change a logit).

    python benchmarks/cpu_streams.py --eval-set WS/calib_sets/demo-eval --limit 400 \\
        --onnx fp32=WS/engines/<hash>/model.fp32.onnx --onnx mixed=WS/engines/<hash>/model.mixed-....onnx

Prints a table and writes ``benchmarks/results/cpu_streams.json`` (``--out`` to change), with the load average
before and after and the cores other processes used (run it on an otherwise idle machine).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from common import load_line, run_per_file, time_transcription_ways  # noqa: E402
from integer_nodes import parse as parse_per_file  # noqa: E402


def measure(
    args: argparse.Namespace, name: str, path: Path, clips: list, texts: list[str], model: Any
) -> dict:
    from workbench.backends.onnxruntime import OnnxRuntimeRunner

    ways = {"one_run": 1, "concurrent": None}
    runners = {
        way: OnnxRuntimeRunner(path, threads=args.threads, streams=streams, name=f"{name}-{way}")
        for way, streams in ways.items()
    }
    times = time_transcription_ways(runners, clips, model, name, args.batch_size, args.rounds)
    median = times.median_seconds
    return {
        "name": name,
        "onnx": str(path),
        "seconds": times.seconds,
        "median_seconds": median,
        "ratio_concurrent_to_one_run": median["concurrent"] / median["one_run"],
        "utterances_per_second": {way: len(clips) / sec for way, sec in median.items()},
        "transcripts_differing": sum(
            a != b for a, b in zip(times.texts["one_run"], times.texts["concurrent"])
        ),
        "streams": times.described["concurrent"].get("transcription_streams"),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_per_file(argv, default_out=HERE / "results" / "cpu_streams.json")
    out = run_per_file(args, "cpu_streams", measure, argv)
    print(f"{'model':<8} {'one run s':>10} {'concurrent s':>13} {'ratio':>6} {'differ':>6}  streams")
    for row in out["rows"]:
        med = row["median_seconds"]
        print(
            f"{row['name']:<8} {med['one_run']:>10.2f} {med['concurrent']:>13.2f} "
            f"{row['ratio_concurrent_to_one_run']:>6.2f} {row['transcripts_differing']:>6}  {row['streams']}"
        )
    print(load_line(out, args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""TensorRT-bound FP16 Q/DQ variants on ONNX Runtime CPU: as written against their INT8 nodes on the integer kernels.

Each ONNX file (``--onnx NAME=PATH``, e.g. the demo's FP32 export, its INT8 variant and its mixed plan) transcribes
the evaluation set (``--eval-set``) twice per round through the workbench's own path
(``workbench.evaluate.transcribe``, batches of ``--batch-size``): once with the graph as written (FP16 Q/DQ:
float GEMMs on dequantized values) and once with ``workbench.backends.integer_nodes`` (int8 GEMMs with exact int32
sums), the two interleaved over ``--rounds`` rounds after an untimed warm-up. Per file: the median seconds of
each, their ratio, how many transcripts differ and the WER of each against the set's texts. A graph without FP16
Q/DQ INT8 nodes (the FP32 export) runs the same both ways and is the in-process control: its ratio shows the
noise.

    python benchmarks/integer_nodes.py --eval-set WS/calib_sets/demo-eval --limit 240 \\
        --onnx fp32=WS/engines/<hash>/model.fp32.onnx --onnx int8=WS/engines/<hash>/model.int8-....onnx

Prints a table and writes ``benchmarks/results/integer_nodes.json`` (``--out`` to change); the load average before
and after and the cores other processes used are recorded (run it on an otherwise idle machine).
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


def parse(
    argv: list[str] | None, default_out: Path = HERE / "results" / "integer_nodes.json"
) -> argparse.Namespace:
    """The options of a benchmark over ONNX files on a set's first utterances (``cpu_streams`` takes them too)."""
    parser = argparse.ArgumentParser(description=(sys.modules["__main__"].__doc__ or __doc__).splitlines()[0])
    parser.add_argument("--eval-set", required=True, help="a stored speech set (folder or name under --root)")
    parser.add_argument("--root", type=Path, default=Path("calib_sets"), help="where set names are looked up")
    parser.add_argument("--onnx", action="append", required=True, help="NAME=PATH, repeatable")
    parser.add_argument("--limit", type=int, default=240, help="the first N utterances of the set")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, help="ONNX Runtime intra-op threads")
    parser.add_argument("--out", type=Path, default=default_out)
    args = parser.parse_args(argv)
    try:
        args.onnx = [(name, Path(path)) for name, path in (item.split("=", 1) for item in args.onnx)]
    except ValueError:
        parser.error("--onnx takes NAME=PATH")
    if args.rounds < 1 or args.limit < 1 or args.batch_size < 1:
        parser.error("--rounds, --limit and --batch-size must be at least 1")
    return args


def measure(
    args: argparse.Namespace, name: str, path: Path, clips: list, texts: list[str], model: Any
) -> dict:
    from workbench.backends.onnxruntime import OnnxRuntimeRunner
    from workbench.evaluate.wer import Scoring, corpus_wer, score_utterances

    ways = {"as_written": False, "integer_nodes": True}
    runners = {
        way: OnnxRuntimeRunner(path, threads=args.threads, integer_nodes=flag, name=f"{name}-{way}")
        for way, flag in ways.items()
    }
    times = time_transcription_ways(runners, clips, model, name, args.batch_size, args.rounds)
    seconds, outputs, described, median = times.seconds, times.texts, times.described, times.median_seconds
    ids = [str(i) for i in range(len(texts))]
    scoring = Scoring.for_model(model)
    wer = {way: corpus_wer(score_utterances(ids, texts, outputs[way], scoring)) for way in ways}
    return {
        "name": name,
        "onnx": str(path),
        "seconds": seconds,
        "median_seconds": median,
        "ratio_integer_to_as_written": median["integer_nodes"] / median["as_written"],
        "transcripts_differing": sum(a != b for a, b in zip(outputs["as_written"], outputs["integer_nodes"])),
        "wer": wer,
        "rewritten": described["integer_nodes"].get("int8_nodes"),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    out = run_per_file(args, "integer_nodes", measure, argv)
    rows = out["rows"]
    print(f"{'model':<8} {'as written s':>12} {'integer s':>10} {'ratio':>6} {'differ':>6} {'WER %':>13}")
    for row in rows:
        med, wer = row["median_seconds"], row["wer"]
        print(
            f"{row['name']:<8} {med['as_written']:>12.2f} {med['integer_nodes']:>10.2f} "
            f"{row['ratio_integer_to_as_written']:>6.2f} {row['transcripts_differing']:>6} "
            f"{wer['as_written'] * 100:>6.2f}/{wer['integer_nodes'] * 100:<6.2f}"
        )
    print(load_line(out, args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""WER against input length: one speaker's utterances joined into clips of 1-3, 3-6, 6-10, 10-20 and 20-30 s.

For each length bucket the evaluation set's utterances are grouped by speaker and condition and joined
(``workbench.speech.longform``: every part at the recording's speech level, room-tone pauses of 0.3-1.0 s) into
clips whose length falls in the bucket; each clip is transcribed whole by the model in FP32 with transformers
(greedy CTC, one clip at a time, no padding), and the same parts one by one, so a bucket's WER can be read
against the model's WER on those very utterances. Long recordings (20-60 s by default) are read three ways:
whole, in chunks with transformers' ASR pipeline arithmetic (``workbench.evaluate.chunking``; 10 s chunks with
2 s strides by default) and utterance by utterance. Every WER has a 95 % bootstrap interval over clips, and
each bucket its ratio to the 1-3 s bucket.

    python benchmarks/length_wer.py --eval-set calib_sets/demo-eval --models workbench/demo_model \
        --out benchmarks/results/length_wer_demo.json

Prints a table per model and writes JSON with the host and the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import load_averages  # noqa: E402

from workbench.evaluate.bootstrap import wer_interval  # noqa: E402
from workbench.evaluate.chunking import chunked_logits, samples_per_frame  # noqa: E402
from workbench.evaluate.inference import ChunkSettings  # noqa: E402
from workbench.evaluate.wer import Scoring, UtteranceErrors, score_utterances  # noqa: E402
from workbench.model.description import describe_model  # noqa: E402
from workbench.speech.longform import LongFormConfig, join, plan_recordings  # noqa: E402
from workbench.speech.records import Clip, Utterance  # noqa: E402
from workbench.speech.store import SpeechSet, load_set  # noqa: E402

DEFAULT_BUCKETS = "1-3,3-6,6-10,10-20,20-30"


def parse_ranges(text: str) -> list[tuple[float, float]]:
    """``1-3,3-6``: seconds ranges, each ``low-high`` with 0 < low < high."""
    out = []
    for item in (t.strip() for t in text.split(",") if t.strip()):
        low, sep, high = item.partition("-")
        try:
            pair = (float(low), float(high))
        except ValueError:
            raise SystemExit(
                f"error: {item!r} is no seconds range; write it as LOW-HIGH, e.g. 10-20"
            ) from None
        if not sep or not 0 < pair[0] < pair[1]:
            raise SystemExit(f"error: {item!r} is no seconds range; write it as LOW-HIGH with 0 < LOW < HIGH")
        out.append(pair)
    if not out:
        raise SystemExit("error: no length range given")
    return out


def clips_in(
    source: SpeechSet, low: float, high: float, pauses: tuple[float, float], limit: int, seed: int
) -> list[tuple[Clip, list[Utterance]]]:
    """Joined clips of ``low``-``high`` seconds (their parts beside them), at most ``limit``, drawn by ``seed``."""
    config = LongFormConfig(low, high, pauses, seed)
    plans, _ = plan_recordings(list(source.utterances), config)
    rng = np.random.default_rng(seed)
    made = []
    for number, plan in enumerate(plans):
        clip = join([Clip(u, source.audio(u)) for u in plan], rng, config, number)
        if low <= clip.utterance.duration_s <= high:
            made.append((clip, plan))
    if len(made) > limit:
        keep = sorted(np.random.default_rng(seed).choice(len(made), size=limit, replace=False))
        made = [made[i] for i in keep]
    return made


class Transcriber:
    """FP32 greedy transcription with transformers, one clip at a time: whole, or chunked as the pipeline does."""

    def __init__(self, folder: Path, threads: int | None) -> None:
        import torch
        from transformers import AutoModelForCTC

        if threads:
            torch.set_num_threads(threads)
        self.torch = torch
        self.description = describe_model(folder)
        self.network = AutoModelForCTC.from_pretrained(str(folder)).eval()
        self.rate = self.description.features.sampling_rate
        self.align = samples_per_frame(self.description)

    def logits(self, row: np.ndarray) -> np.ndarray:
        with self.torch.inference_mode():
            x = self.torch.from_numpy(np.ascontiguousarray(row, dtype=np.float32))[None, :]
            return self.network(x).logits[0].float().numpy()

    def whole(self, audio: np.ndarray) -> str:
        return self.description.decode(self.logits(self.description.prepare(audio)))

    def chunked(self, audio: np.ndarray, settings: ChunkSettings) -> str:
        merged = chunked_logits(audio, settings, self.logits, self.description.prepare, self.rate, self.align)
        return self.description.decode(merged)


def rate_of(scores: Sequence[UtteranceErrors], resamples: int) -> dict[str, Any]:
    interval = wer_interval(
        [s.errors for s in scores], [s.reference_words for s in scores], resamples=resamples
    )
    return {
        "wer": round(interval.estimate, 5),
        "low": round(interval.low, 5),
        "high": round(interval.high, 5),
        "clips": len(scores),
        "words": int(sum(s.reference_words for s in scores)),
        "deletions": int(sum(s.deletions for s in scores)),
        "insertions": int(sum(s.insertions for s in scores)),
        "substitutions": int(sum(s.substitutions for s in scores)),
    }


def measure(
    transcriber: Transcriber,
    source: SpeechSet,
    clips: list[tuple[Clip, list[Utterance]]],
    scoring: Scoring,
    resamples: int,
    reads: dict[str, Callable[[np.ndarray], str]],
) -> dict[str, Any]:
    """One bucket: the clips read each way of ``reads`` (name -> reader), and the same parts read one by one
    (``one_by_one``, transcribed once whatever the number of ways)."""
    ids = [c.utterance.id for c, _ in clips]
    refs = [c.utterance.text for c, _ in clips]
    by_one = [" ".join(transcriber.whole(source.audio(u)) for u in parts) for _, parts in clips]
    seconds = [c.utterance.duration_s for c, _ in clips]
    rates = {
        name: rate_of(score_utterances(ids, refs, [read(c.audio) for c, _ in clips], scoring), resamples)
        for name, read in reads.items()
    }
    return {
        "mean_s": round(float(np.mean(seconds)), 2),
        "audio_s": round(float(np.sum(seconds)), 1),
        **rates,
        "one_by_one": rate_of(score_utterances(ids, refs, by_one, scoring), resamples),
    }


def host() -> dict[str, Any]:
    import torch

    from workbench.evaluate.machine import machine_info

    return {**machine_info(), "torch": torch.__version__, "torch_threads": torch.get_num_threads()}


def ratio(value: float, base: float) -> float | None:
    return round(value / base, 3) if base > 0 else None


def run_model(folder: Path, source: SpeechSet, args: argparse.Namespace) -> dict[str, Any]:
    transcriber = Transcriber(folder, args.threads)
    scoring = Scoring.for_model(transcriber.description)
    settings = ChunkSettings.of(args.chunk_seconds, args.stride_seconds)
    started = time.time()
    buckets = []
    for low, high in parse_ranges(args.buckets):
        clips = clips_in(source, low, high, args.pause, args.per_bucket, args.seed)
        if not clips:
            print(f"  {low:g}-{high:g} s: no clips (the set's speakers have too little speech)", flush=True)
            continue
        row = {
            "low_s": low,
            "high_s": high,
            **measure(transcriber, source, clips, scoring, args.resamples, {"read": transcriber.whole}),
        }
        buckets.append(row)
        print(
            f"  {low:g}-{high:g} s: {row['read']['clips']} clips, whole {row['read']['wer']:.2%}", flush=True
        )
    base = buckets[0]["read"]["wer"] if buckets else float("nan")
    for row in buckets:
        row["ratio_to_first"] = ratio(row["read"]["wer"], base)
    long_rows = []
    for low, high in parse_ranges(args.long):
        clips = clips_in(source, low, high, args.pause, args.per_bucket, args.seed)
        if not clips:
            continue
        reads = {"chunked": lambda a: transcriber.chunked(a, settings), "whole": transcriber.whole}
        row = measure(transcriber, source, clips, scoring, args.resamples, reads)
        long_rows.append(
            {
                "low_s": low,
                "high_s": high,
                "mean_s": row["mean_s"],
                "audio_s": row["audio_s"],
                "chunk_s": args.chunk_seconds,
                "stride_s": args.stride_seconds,
                "chunked": row["chunked"],
                "whole": row["whole"],
                "one_by_one": row["one_by_one"],
                "chunked_over_one_by_one": ratio(row["chunked"]["wer"], row["one_by_one"]["wer"]),
            }
        )
        r = long_rows[-1]
        print(
            f"  long {low:g}-{high:g} s: {r['chunked']['clips']} recordings, chunked {r['chunked']['wer']:.2%}, "
            f"whole {r['whole']['wer']:.2%}, one by one {r['one_by_one']['wer']:.2%}",
            flush=True,
        )
    return {
        "model": str(folder),
        "buckets": buckets,
        "long": long_rows,
        "seconds": round(time.time() - started, 1),
    }


def table(result: dict[str, Any]) -> str:
    lines = [
        f"model {result['model']}",
        "| seconds | clips | mean s | WER whole | 95 % CI | one by one | x 1-3 s |",
    ]
    lines.append("|---|---|---|---|---|---|---|")
    for r in result["buckets"]:
        lines.append(
            f"| {r['low_s']:g}-{r['high_s']:g} | {r['read']['clips']} | {r['mean_s']} | {r['read']['wer']:.2%} | "
            f"{r['read']['low']:.2%}-{r['read']['high']:.2%} | {r['one_by_one']['wer']:.2%} | {r['ratio_to_first']} |"
        )
    for r in result["long"]:
        lines.append(
            f"long {r['low_s']:g}-{r['high_s']:g} s ({r['chunked']['clips']} recordings): chunked "
            f"{r['chunk_s']:g}/{r['stride_s']:g} s {r['chunked']['wer']:.2%}, whole {r['whole']['wer']:.2%}, "
            f"one by one {r['one_by_one']['wer']:.2%}, chunked / one by one {r['chunked_over_one_by_one']}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--eval-set", type=Path, required=True, help="a stored speech set with transcripts")
    p.add_argument("--models", default="workbench/demo_model", help="model folders, comma-separated")
    p.add_argument("--buckets", default=DEFAULT_BUCKETS, help="clip lengths in seconds, LOW-HIGH,...")
    p.add_argument("--long", default="20-60", help="recording lengths read whole, chunked and one by one")
    p.add_argument("--chunk-seconds", type=float, default=10.0)
    p.add_argument("--stride-seconds", type=float, default=2.0, help="seconds dropped at each chunk edge")
    p.add_argument("--pause", type=float, nargs=2, default=(0.3, 1.0), metavar=("MIN_S", "MAX_S"))
    p.add_argument("--per-bucket", type=int, default=150, help="most clips per bucket (a seeded draw)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--resamples", type=int, default=2000)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--out", type=Path, default=HERE / "results" / "length_wer.json")
    args = p.parse_args(argv)
    args.pause = tuple(args.pause)
    if args.per_bucket < 1:
        raise SystemExit("error: --per-bucket must be at least 1")
    parse_ranges(args.buckets), parse_ranges(args.long)
    from workbench.errors import WorkbenchError

    try:
        source = load_set(args.eval_set)
    except WorkbenchError as exc:
        raise SystemExit(f"error: {exc}") from None
    if not all(u.text for u in source.utterances):
        raise SystemExit(f"error: {source.name} has utterances without transcripts; WER needs a labelled set")
    load_before, started = load_averages(), time.time()
    out: dict[str, Any] = {
        "benchmark": "length_wer",
        "command": "python benchmarks/length_wer.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "eval_set": {
            "name": source.name,
            "content_hash": source.content_hash,
            "utterances": len(source.utterances),
        },
        "host": host(),
        "load_average_before": load_before,
        "models": [],
    }
    for folder in (Path(m.strip()) for m in args.models.split(",") if m.strip()):
        print(f"model {folder}", flush=True)
        out["models"].append(run_model(folder, source, args))
        print(table(out["models"][-1]), flush=True)
    out["load_average_after"] = load_averages()
    out["wall_s"] = round(time.time() - started, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

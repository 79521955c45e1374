"""Whole-set import speed and memory on a LibriSpeech test-clean-sized tree (2,620 utterances, 5.4 h).

Generates (once, cached under ``--corpus``) a LibriSpeech-layout split of synthetic speech-like audio:
40 speakers x 2 chapters, 2,620 FLAC files whose durations follow test-clean's shape (log-normal,
1.3-35 s, total 19,440 s = 5.4 h). Then, each in a fresh process so that peak RSS is that run's own:

- ``import w=1`` / ``import w=2``: ``data import`` of the whole split with 1 and 2 worker processes
  (utterances/s, audio seconds per wall second, peak RSS of the main process and of the largest worker);
- ``import w=2 quarter``: the same on a seeded quarter (``--take 655``): memory-flat means its peak RSS
  is about the full run's;
- ``hold-all quarter``: the baseline, decoding the same quarter into memory the way ``data build``
  collects a source (``sources.collect``), to show what streaming saves.

Ratios are within this run: w=2 vs w=1 throughput, full vs quarter peak RSS, streaming vs hold-all RSS.
Writes ``benchmarks/results/import_speed.json`` with the machine and the load average before and after
each run (the machine may be shared: compare within a run, re-run idle for absolute numbers).

    python benchmarks/import_speed.py                  # generate if needed, then measure
    python benchmarks/import_speed.py --corpus /data/bench-ls --utterances 2620 --hours 5.4
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import cpu_seconds, load_averages  # noqa: E402

REPO = HERE.parent
RESULTS = HERE / "results" / "import_speed.json"
SPEAKERS = 40
CHAPTERS = 2
MIN_S, MAX_S, SIGMA = 1.3, 35.0, 0.6  # test-clean: 1.29-34.96 s, right-skewed


def durations(n: int, total_s: float, seed: int = 0) -> list[float]:
    """``n`` log-normal durations in [MIN_S, MAX_S] summing to ``total_s`` (to within a second)."""
    import numpy as np

    raw = np.exp(np.random.default_rng(seed).normal(0.0, SIGMA, n))
    values = raw
    for _ in range(50):  # scale to the total, clip to the range, repeat until both hold
        values = np.clip(values * (total_s / values.sum()), MIN_S, MAX_S)
        if abs(values.sum() - total_s) < 1.0:
            break
    return [round(float(v), 3) for v in values]


def generate(corpus: Path, n: int, hours: float) -> Path:
    """The LibriSpeech-layout split (written once; a marker file records what it holds)."""
    sys.path.insert(0, str(REPO / "tests"))
    from conftest import _speech_like
    from layoutkit import write_librispeech

    marker = corpus / "GENERATED.json"
    want = {"utterances": n, "hours": hours, "speakers": SPEAKERS, "chapters": CHAPTERS, "sigma": SIGMA}
    split = corpus / "LibriSpeech" / "test-clean"
    if marker.exists() and json.loads(marker.read_text()) == want:
        return split
    lengths = durations(n, hours * 3600.0)
    per_chapter = -(-n // (SPEAKERS * CHAPTERS))
    started = time.perf_counter()
    print(f"generating {n} utterances ({sum(lengths) / 3600:.2f} h) under {corpus} ...", flush=True)
    write_librispeech(
        corpus,
        "test-clean",
        [str(1000 + s) for s in range(SPEAKERS)],
        CHAPTERS,
        per_chapter,
        lambda i: lengths[i],
        _speech_like,
        limit=n,
    )
    marker.write_text(json.dumps(want))
    print(f"generated in {time.perf_counter() - started:.0f} s", flush=True)
    return split


def child(mode: str, split: Path, workers: int, take: int | None) -> dict[str, Any]:
    """One measured run in this (fresh) process."""
    from workbench.speech.importer import ImportConfig, import_set
    from workbench.speech.layouts import open_source
    from workbench.speech.sources import collect

    source = open_source("librispeech", split)
    load_before = load_averages()
    started = time.perf_counter()
    cpu0 = cpu_seconds()
    with tempfile.TemporaryDirectory(prefix="import-bench-", dir=split.parent.parent) as root:
        if mode == "import":
            result = import_set(
                source,
                ImportConfig(name="bench", workers=workers, take=take),
                "bench",
                root=Path(root),
                progress=False,
            )
            utts = result.speech_set.card["utterances"]
            audio_s = result.speech_set.card["total_duration_s"]
        else:  # hold-all baseline: every decoded clip in memory at once, as data build collects a source
            from workbench.speech.importer import _ordered_entries

            ordered, _ = _ordered_entries(source.entries(), ImportConfig(name="bench", take=take), True)
            entries = list(ordered)[:take]  # the same seeded sample the streamed quarter keeps

            class _Some:
                def __iter__(self):
                    from workbench.speech.entries import load_entry

                    return (load_entry(e) for e in entries)

            clips, _ = collect(_Some())
            utts = len(clips)
            audio_s = sum(c.utterance.duration_s for c in clips)
    wall = time.perf_counter() - started
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "mode": mode,
        "workers": workers,
        "take": take,
        "utterances": utts,
        "audio_s": round(audio_s, 1),
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu_seconds() - cpu0, 1),
        "utterances_per_s": round(utts / wall, 2),
        "audio_s_per_s": round(audio_s / wall, 1),
        "peak_rss_mb_main": round(own.ru_maxrss / 1024, 1),
        "peak_rss_mb_largest_worker": round(kids.ru_maxrss / 1024, 1)
        if workers > 1 and mode == "import"
        else None,
        "loadavg_before": load_before,
        "loadavg_after": load_averages(),
    }


def run_child(split: Path, mode: str, workers: int, take: int | None) -> dict[str, Any]:
    argv = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        mode,
        "--split",
        str(split),
        "--workers",
        str(workers),
    ] + (["--take", str(take)] if take else [])
    out = subprocess.run(
        argv,
        check=True,
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--corpus", type=Path, default=Path(tempfile.gettempdir()) / "workbench-import-bench")
    parser.add_argument("--utterances", type=int, default=2620)
    parser.add_argument("--hours", type=float, default=5.4)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--child", choices=["import", "hold-all"], help=argparse.SUPPRESS)
    parser.add_argument("--split", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=int, default=2, help=argparse.SUPPRESS)
    parser.add_argument("--take", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.split, args.workers, args.take)))
        return 0

    from workbench.artifacts import write_json_atomic
    from workbench.evaluate.machine import machine_info, package_versions

    split = generate(args.corpus, args.utterances, args.hours)
    quarter = args.utterances // 4
    plan = [
        ("import w=1", "import", 1, None),
        ("import w=2", "import", 2, None),
        ("import w=2 quarter", "import", 2, quarter),
        ("hold-all quarter", "hold-all", 1, quarter),
    ]
    runs = {}
    for label, mode, workers, take in plan:
        print(f"{label} ...", flush=True)
        runs[label] = run_child(split, mode, workers, take)
    full1, full2, q2, hold = (runs[p[0]] for p in plan)
    ratios = {
        "throughput_w2_over_w1": round(full2["utterances_per_s"] / full1["utterances_per_s"], 2),
        "peak_rss_main_full_over_quarter": round(full2["peak_rss_mb_main"] / q2["peak_rss_mb_main"], 2),
        "peak_rss_hold_all_over_streaming_quarter": round(
            hold["peak_rss_mb_main"] / q2["peak_rss_mb_main"], 2
        ),
    }
    print(
        f"\n{'run':<20} {'utts':>5} {'audio h':>7} {'wall s':>7} {'utt/s':>6} {'x realtime':>10} "
        f"{'RSS main MB':>11} {'RSS worker MB':>13} {'load before':>11}"
    )
    for label, r in runs.items():
        worker = f"{r['peak_rss_mb_largest_worker']:.0f}" if r["peak_rss_mb_largest_worker"] else "-"
        print(
            f"{label:<20} {r['utterances']:>5} {r['audio_s'] / 3600:>7.2f} {r['wall_s']:>7.1f} "
            f"{r['utterances_per_s']:>6.1f} {r['audio_s_per_s']:>10.0f} {r['peak_rss_mb_main']:>11.0f} "
            f"{worker:>13} {r['loadavg_before'][0]:>11.2f}"
        )
    print("ratios: " + ", ".join(f"{k} {v}" for k, v in ratios.items()))
    record = {
        "benchmark": "data import of a LibriSpeech-layout split (test-clean size), streamed",
        "command": "python benchmarks/import_speed.py "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "corpus": {
            "utterances": args.utterances,
            "hours": args.hours,
            "speakers": SPEAKERS,
            "chapters_per_speaker": CHAPTERS,
            "durations": f"log-normal sigma {SIGMA}, {MIN_S}-{MAX_S} s",
            "audio": "synthetic speech-like signal (tests/conftest.py), 16 kHz FLAC",
        },
        "runs": runs,
        "ratios": ratios,
        "machine": {
            **machine_info(),
            "cpu_count": os.cpu_count(),
            "loadavg_at_end": load_averages(),
        },
        "packages": package_versions(),
        "note": "each run in a fresh process; peak RSS is the main process's (and the largest worker's); the "
        "machine may be shared (load averages recorded per run): compare within a run",
    }
    write_json_atomic(args.out, record)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

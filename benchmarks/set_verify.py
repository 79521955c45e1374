"""What verifying a stored set by its content costs: ``load_set`` with the index, without it, and unchecked.

Writes a set of ``--clips`` utterances (``--seconds`` each, 16 kHz FLAC, synthetic voiced signal) with the
store's own writer into a temporary folder, then times, ``--repeats`` times each (median and max, seconds):

- ``unverified``: ``load_set(verify=False)`` (card + manifest checks only: the floor);
- ``index``: ``load_set`` with a current index (one ``lstat`` per clip, no audio read): every step's cost;
- ``rehash``: ``load_set`` with the index deleted before each run (every clip hashed again: a copied or
  restored set, once).

Absolute times of one machine, no ratios; the file cache is warm for every run (the set was just written).
Prints one JSON object and writes it to ``--out`` (default ``benchmarks/results/set_verify.json``) with the
load average and the command.

    python benchmarks/set_verify.py                       # 600 clips of 5 s
    python benchmarks/set_verify.py --clips 20 --repeats 2 --out /tmp/set_verify.json   # smoke
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from workbench.artifacts import write_json_atomic  # noqa: E402
from workbench.speech.integrity import INDEX  # noqa: E402
from workbench.speech.records import Clip, Utterance  # noqa: E402
from workbench.speech.store import load_set, write_set  # noqa: E402


def _signal(seconds: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * 16_000)) / 16_000
    voiced = np.sin(2 * np.pi * (120 + 20 * rng.uniform()) * t) * (0.5 + 0.5 * np.sin(2 * np.pi * 3 * t) ** 2)
    return (0.3 * voiced + 0.02 * rng.standard_normal(len(t))).astype(np.float32)


def _timed(fn, repeats: int) -> dict[str, float]:
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - start)
    return {"median_s": round(statistics.median(runs), 4), "max_s": round(max(runs), 4), "runs": repeats}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=600)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "set_verify.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="set-verify-") as tmp:
        clips = [
            Clip(
                Utterance(f"u{i:04d}", "A CLIP", f"s{i % 20}", "v", "us", "quiet", args.seconds, "bench"),
                _signal(args.seconds, i),
            )
            for i in range(args.clips)
        ]
        path = write_set(Path(tmp) / "bench", clips, {"role": "calib"}, [], {}).path
        audio_bytes = sum(p.stat().st_size for p in (path / "audio").iterdir())
        load_set(path)  # warm imports and the file cache

        def rehash() -> None:
            (path / INDEX).unlink()
            load_set(path)

        result = {
            "clips": args.clips,
            "seconds_each": args.seconds,
            "audio_mb": round(audio_bytes / 1e6, 1),
            "unverified": _timed(lambda: load_set(path, verify=False), args.repeats),
            "index": _timed(lambda: load_set(path), args.repeats),
            "rehash": _timed(rehash, args.repeats),
            "load_average": os.getloadavg(),
            "cpus": os.cpu_count(),
            "machine": platform.platform(),
            "command": " ".join([Path(sys.executable).name, *sys.argv]),
        }
    print(json.dumps(result, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(args.out, result)


if __name__ == "__main__":
    main()

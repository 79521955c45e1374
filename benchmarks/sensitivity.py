"""Sensitivity-ranking benchmark: cost of ranking every layer group of a Wav2Vec2-base-sized model.

On a random Wav2Vec2-base-sized model (hidden 768, 12 layers, conv 512; 58 groups at the default
granularity) with N speech-like clips of 4 s (one condition label per clip), the command measures in
one process:

- ``fp32 pass``: ONNX Runtime FP32 inference of the clips (session creation + runs), the yardstick;
- ``ranking``: ``workbench.compare.sensitivity.rank_groups`` over every group (one FP32 reference run,
  the all-rest and INT8-everywhere variants, then one in-memory variant per group), ranges from a
  ``max`` calibration on the same clips (not timed).

Prints a table and writes ``benchmarks/results/sensitivity.json`` with wall times, the ratio
ranking / fp32 pass, and seconds per group. The question it answers: is ranking every group of
Wav2Vec2-base cheap (minutes on a CPU, a bounded multiple of one FP32 pass per group)?

    python benchmarks/sensitivity.py                 # 3 clips, group granularity
    python benchmarks/sensitivity.py --clips 6 --granularity node
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "sensitivity.json"
SECONDS = 4.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=3)
    parser.add_argument("--size", default="base", choices=("tiny", "base"))
    parser.add_argument("--granularity", default="group", choices=("group", "node"))
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    import onnx

    sys.path.insert(0, str(HERE))
    from calibration import speech_like_clips  # the calibration benchmark's clip generator

    from workbench.artifacts import write_json_atomic
    from workbench.calibration.methods import MethodSpec
    from workbench.calibration.runner import calibrate_ranges
    from workbench.compare.groups import node_groups
    from workbench.compare.sensitivity import VariantRunner, rank_groups
    from workbench.evaluate.machine import machine_info, package_versions
    from workbench.model.export import export_onnx
    from workbench.model.synthetic import random_wav2vec2
    from workbench.speech.records import Clip, Utterance

    audio = speech_like_clips(args.clips)[:, : int(SECONDS * 16_000)]
    conditions = ("quiet", "noisy", "accented")
    clips = [
        Clip(Utterance(f"clip{i}", "", "spk", "voice", "us", conditions[i % 3], SECONDS, "benchmark"), a)
        for i, a in enumerate(audio)
    ]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.fp32.onnx"
        export_onnx(random_wav2vec2(args.size, seed=0), path)
        amax = calibrate_ranges(path, iter(audio), len(audio), MethodSpec("max"))
        model = onnx.load(str(path))
    groups = node_groups(model, args.granularity)
    variants = VariantRunner(model, amax)
    from workbench.quantize.plan import FP32

    started = time.perf_counter()
    variants.logits(FP32, clips)
    plain = time.perf_counter() - started
    started = time.perf_counter()
    result = rank_groups(variants, groups, clips, granularity=args.granularity)
    ranking = time.perf_counter() - started
    record = {
        "benchmark": "sensitivity ranking",
        "size": args.size,
        "granularity": args.granularity,
        "groups": len(groups),
        "clips": len(clips),
        "clip_seconds": SECONDS,
        "fp32_pass_s": round(plain, 2),
        "ranking_s": round(ranking, 2),
        "ranking_over_fp32_pass": round(ranking / plain, 1),
        "seconds_per_group": round(ranking / len(groups), 2),
        "top5": [r.group.name for r in result.results[:5]],
        "machine": machine_info(),
        "packages": package_versions(),
        "note": "random weights; wall times on a shared machine, compare ratios within one run only",
    }
    print(f"{'job':<12} {'wall s':>8}  note")
    print(f"{'fp32 pass':<12} {plain:>8.2f}  {len(clips)} clips of {SECONDS:.0f} s")
    print(
        f"{'ranking':<12} {ranking:>8.2f}  {len(groups)} groups, {ranking / len(groups):.2f} s per group, "
        f"{ranking / plain:.1f}x the FP32 pass"
    )
    write_json_atomic(args.out, record)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

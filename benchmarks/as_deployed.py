"""Sign-off as it will run: long audio in chunks, and beam search with a language model, on the demo model.

In one process, under ``--workspace`` (sets in calib_sets/, artifacts in engines/):

1. the demo's sets (``workbench.jobs.sets``, synthetic speech; ``--eval-per-condition`` as the demo: 200),
   the demo's calibration (percentile 99.99: FP32, FP16 and INT8 variants), and with ``--search`` the demo's
   mixed-precision search on the held-out dev set (its found plan is the ``mixed`` candidate);
2. a long-form set joined from the evaluation set (``workbench.speech.longform``: one speaker and condition
   per recording, ``--long-min/--long-max`` seconds, noise-floor pauses);
3. long-form: FP32 in ``--chunk-seconds`` chunks (``--stride-seconds``, default 1 s; transformers'
   pipeline arithmetic) against FP32 on the same utterances scored one by one (each recording's hypothesis =
   its parts' transcripts joined), every other candidate's paired delta against FP32 under chunking, and
   with ``--sweep`` FP32 under other chunk lengths and strides, each part scored on its own stretch and split
   by whether a seam falls inside it (``benchmarks/chunk_sweep.py``);
4. the evaluation set: every candidate's WER and paired delta against FP32, greedy and beam search
   (width ``--beam-width``) with the demo's 3-gram language model from the training texts.

WER and its intervals do not depend on machine load. Writes ``--out`` (JSON: configuration, set hashes,
results with S/D/I, the command). Tiny proof run (minutes): ``--eval-per-condition 4 --calib-per-condition 4
--dev-per-condition 0 --long-min 4 --long-max 20``.

    python benchmarks/as_deployed.py --workspace /tmp/as-deployed --search
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from chunk_sweep import parse_settings, sweep_row  # noqa: E402
from common import load_averages  # noqa: E402

from workbench.artifacts import write_json_atomic  # noqa: E402
from workbench.backends.onnxruntime import OnnxRuntimeRunner  # noqa: E402
from workbench.calibration.methods import MethodSpec  # noqa: E402
from workbench.config import SetBuildConfig  # noqa: E402
from workbench.evaluate.accuracy import compare_accuracy  # noqa: E402
from workbench.evaluate.inference import DecoderSettings, inference_config  # noqa: E402
from workbench.evaluate.machine import machine_info, package_versions  # noqa: E402
from workbench.evaluate.ngram import training_text_lm  # noqa: E402
from workbench.evaluate.transcribe import transcribe  # noqa: E402
from workbench.evaluate.wer import Scoring  # noqa: E402
from workbench.model.description import describe_model  # noqa: E402
from workbench.resources import demo_model_dir  # noqa: E402
from workbench.speech.longform import LongFormConfig, build_long_form  # noqa: E402


def overall(accuracy: Any) -> dict[str, Any]:
    """Per candidate: WER and delta with intervals, S/D/I, extra S/D/I over the baseline."""
    data = accuracy.to_json()
    base = data["candidates"][data["baseline"]]["overall"]
    out = {}
    for name, c in data["candidates"].items():
        g = c["overall"]
        out[name] = {
            "wer": g["wer"],
            "delta": g["delta"],
            "reference_words": g["reference_words"],
            "S/D/I": [g["substitutions"], g["deletions"], g["insertions"]],
            "extra S/D/I": [
                g["substitutions"] - base["substitutions"],
                g["deletions"] - base["deletions"],
                g["insertions"] - base["insertions"],
            ],
        }
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workspace", type=Path, required=True)
    p.add_argument("--eval-per-condition", type=int, default=SetBuildConfig().eval_per_condition)
    p.add_argument("--calib-per-condition", type=int, default=SetBuildConfig().calib_per_condition)
    p.add_argument("--dev-per-condition", type=int, default=100)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--search", action="store_true", help="run the demo's search for the mixed candidate")
    p.add_argument(
        "--chunk-seconds",
        type=float,
        default=4.0,
        help="chunk length (4: the lowest long-form WER of the sweep in docs/inference.md)",
    )
    p.add_argument("--stride-seconds", type=float, default=1.0, help="seconds dropped at each chunk edge")
    p.add_argument(
        "--sweep",
        default="",
        help="FP32 long-form WER under these chunk/stride seconds too, e.g. 0,4/0.67,8/1.33 (0: whole)",
    )
    p.add_argument("--long-min", type=float, default=30.0)
    p.add_argument("--long-max", type=float, default=120.0)
    p.add_argument("--beam-width", type=int, default=32)
    p.add_argument("--resamples", type=int, default=1000)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--out", type=Path, default=HERE / "results" / "as_deployed.json")
    args = p.parse_args(argv)
    from workbench.jobs import calibrate, search, sets

    started = time.time()
    load_start = load_averages()
    calib_root, engines = args.workspace / "calib_sets", args.workspace / "engines"
    cfg = replace(
        SetBuildConfig(),
        name="demo",
        eval_per_condition=args.eval_per_condition,
        calib_per_condition=args.calib_per_condition,
        dev_per_condition=args.dev_per_condition,
        workers=args.workers,
    )
    built = sets.run(sets.SetsInputs(cfg, root=calib_root)).built
    print(
        f"sets: {built.calib.name} {len(built.calib.utterances)}, {built.eval.name} {len(built.eval.utterances)}"
    )
    model = describe_model(demo_model_dir())
    cal = calibrate.run(
        calibrate.CalibrateInputs(
            model,
            str(built.calib.path),
            MethodSpec("percentile", 99.99),
            engines=engines,
            calib_root=calib_root,
        )
    )
    candidates = {"fp32": cal.fp32_onnx, "fp16": cal.fp16_onnx, "int8": cal.int8_onnx}
    if args.search and built.dev is not None:
        found = search.run(
            search.SearchInputs(
                model=demo_model_dir(),
                calib_set=str(built.calib.path),
                method="percentile",
                cache=cal.cache,
                engines=engines,
                calib_root=calib_root,
                dev_set=str(built.dev.path),
                signoff_set=str(built.eval.path),
                refine=0,
                progress=False,
            )
        ).data.get("found")
        if found:
            candidates["mixed"] = Path(found["onnx_path"])
    long_set = build_long_form(
        built.eval, calib_root / "demo-long", LongFormConfig(args.long_min, args.long_max, seed=0)
    )
    minutes = sum(u.duration_s for u in long_set.utterances) / 60
    print(f"long-form: {len(long_set.utterances)} recordings, {minutes:.1f} min")
    scoring = Scoring.for_model(model)
    chunked = inference_config(chunk_length_s=args.chunk_seconds, stride_s=args.stride_seconds)
    sweep_settings = parse_settings(args.sweep)

    def run(path: Path, audios, inference=None, also=()):
        runner = OnnxRuntimeRunner(path, threads=args.threads)
        return transcribe(runner, audios, model, inference=inference or inference_config(), also=also)

    # long-form: chunked vs the same utterances one by one (FP32), and every candidate under chunking
    by_id = {u.id: u for u in built.eval.utterances}
    parts = [[by_id[i] for i in rec.extra["parts"]] for rec in long_set.utterances]
    flat = [u for group in parts for u in group]
    one_by_one = run(candidates["fp32"], (built.eval.audio(u) for u in flat)).texts
    joined, k = [], 0
    for group in parts:
        joined.append(" ".join(one_by_one[k : k + len(group)]))
        k += len(group)
    long_hyps = {
        name: run(path, (long_set.audio(u) for u in long_set.utterances), chunked).texts
        for name, path in candidates.items()
    }
    seams = compare_accuracy(
        long_set.utterances,
        {"fp32-one-by-one": joined, "fp32-chunked": long_hyps["fp32"]},
        "fp32-one-by-one",
        resamples=args.resamples,
        scoring=scoring,
    )
    under_chunks = compare_accuracy(
        long_set.utterances, long_hyps, "fp32", resamples=args.resamples, scoring=scoring
    )
    sweep = []
    if sweep_settings:
        fp32 = OnnxRuntimeRunner(candidates["fp32"], threads=args.threads)
        fp32.activate()
        try:
            for settings in sweep_settings:
                sweep.append(sweep_row(fp32, model, long_set, built.eval, settings, scoring))
                print(f"sweep {sweep[-1]}", flush=True)
        finally:
            fp32.deactivate()
    # the evaluation set: greedy and beam + LM
    lm_path = engines / "demo-lm.arpa"
    lm = training_text_lm(lm_path, [u.text for u in built.eval.utterances])
    beam = DecoderSettings("beam", beam_width=args.beam_width, lm=lm_path)
    greedy_hyps, beam_hyps = {}, {}
    for name, path in candidates.items():
        done = run(path, (built.eval.audio(u) for u in built.eval.utterances), also=[beam])
        greedy_hyps[name], beam_hyps[name] = done.texts, done.by_decoder[beam.name]
    decoders = {
        "greedy": overall(
            compare_accuracy(
                built.eval.utterances, greedy_hyps, "fp32", resamples=args.resamples, scoring=scoring
            )
        ),
        "beam+lm": overall(
            compare_accuracy(
                built.eval.utterances, beam_hyps, "fp32", resamples=args.resamples, scoring=scoring
            )
        ),
    }
    result = {
        "what": "inference as deployed on the demo model: chunked long-form WER and greedy vs beam+LM deltas",
        "command": " ".join([sys.executable.split("/")[-1], *sys.argv]),
        "sets": {
            "eval": {"name": built.eval.name, "hash": built.eval.content_hash, "utterances": len(flat)},
            "long_form": {
                "hash": long_set.content_hash,
                "recordings": len(long_set.utterances),
                "minutes": round(minutes, 2),
                "seconds": [
                    min(u.duration_s for u in long_set.utterances),
                    max(u.duration_s for u in long_set.utterances),
                ],
            },
        },
        "candidates": {n: str(p) for n, p in candidates.items()},
        "chunks": chunked.to_json(),
        "beam": beam.to_json() | {"lm_sentences": lm.sentences, "lm_words": lm.words, "lm_order": lm.order},
        "long_form_chunked_vs_one_by_one": overall(seams),
        "long_form_deltas_under_chunking": overall(under_chunks),
        "long_form_chunk_sweep_fp32": sweep,
        "eval_deltas_by_decoder": decoders,
        "resamples": args.resamples,
        "machine": machine_info(),
        "load_average_start": load_start,
        "load_average_end": load_averages(),
        "packages": package_versions(),
        "wall_s": round(time.time() - started, 1),
    }
    write_json_atomic(args.out, result)
    print(json.dumps({k: result[k] for k in ("long_form_chunked_vs_one_by_one",)}, indent=1)[:2000])
    for decoder, rows in decoders.items():
        for name, r in rows.items():
            d = r["delta"]
            print(
                f"{decoder:8} {name:6} WER {r['wer']['estimate'] * 100:6.2f} %"
                + (
                    f"  delta {d['estimate'] * 100:+.2f} [{d['low'] * 100:+.2f}, {d['high'] * 100:+.2f}]"
                    if d
                    else ""
                )
                + f"  S/D/I {r['S/D/I']}"
            )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

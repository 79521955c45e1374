"""Beam search with the demo's language model: WER and decoding time per beam width, and the blank-run collapse
against decoding every frame.

The demo scores every TensorRT-bound candidate with a second decoder beside greedy: flashlight-text's beam search
with the demo's 3-gram language model (``workbench/project/demo.py``), the costliest part of the demo's sign-off. This script takes the logits of each candidate on the
evaluation set once (``--eval-set``, as the demo built it; the candidates' ONNX files from the demo's
sign-off record, ``--report``), then decodes them with each beam width in ``--widths`` (the blank-run
collapse on, as the workbench decodes: ``workbench.evaluate.decoders.collapse_blank_runs``) and once more with
``--reference-width`` and every frame given to the beam (collapse off). For every decoding it records the
WER against the set's texts, the seconds spent decoding and how many transcripts differ from the reference.
Where pyctcdecode and the ``kenlm`` module import (the decoder the workbench used before flashlight-text;
``benchmarks/pyctcdecode_reference.py``), each width is decoded by it too, on the same scores with the same
alpha and beta: its WER, seconds and how many transcripts differ from flashlight-text's (``--no-pyctcdecode``
skips it).

    python benchmarks/beam_decoding.py --workspace /tmp/ws --widths 4,8,16,32,64,100 --reference-width 32

Writes ``benchmarks/results/beam_decoding.json`` (``--out`` to change). Times are only comparable within one
run on an otherwise idle machine: the load averages before and after are recorded.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from common import load_averages  # noqa: E402
from pyctcdecode_reference import pyctcdecode_available, pyctcdecode_decoder  # noqa: E402


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspace", type=Path, required=True, help="the demo's workspace")
    parser.add_argument(
        "--eval-set", default="demo-eval", help="a set name under the workspace's calib_sets/"
    )
    parser.add_argument("--report", default="demo-signoff", help="the sign-off folder under reports/")
    parser.add_argument("--lm", type=Path, help="ARPA file (default: engines/demo-lm.arpa of the workspace)")
    parser.add_argument("--candidates", default="fp32,int8-percentile,mixed", help="comma separated names")
    parser.add_argument(
        "--onnx", help="name=path,... : these ONNX files instead of the sign-off record's candidates"
    )
    parser.add_argument("--widths", default="4,8,16,32,64", help="comma separated beam widths (collapse on)")
    parser.add_argument("--reference-width", type=int, default=32, help="decoded with every frame too")
    parser.add_argument("--batch-size", type=int, default=8, help="evaluation batch of the logits pass")
    parser.add_argument("--limit", type=int, help="only the first N utterances")
    parser.add_argument("--no-pyctcdecode", action="store_true", help="skip the pyctcdecode comparison")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "beam_decoding.json")
    args = parser.parse_args(argv)
    args.widths = [int(w) for w in args.widths.split(",") if w.strip()]
    args.candidates = [c for c in args.candidates.split(",") if c]
    if not args.widths or min(args.widths) < 1 or args.reference_width < 1:
        parser.error("--widths and --reference-width: positive whole numbers")
    return args


def candidate_paths(record: dict[str, Any], names: list[str]) -> dict[str, Path]:
    """The ONNX file of each named candidate in a sign-off record's artifacts (``candidate <name>``)."""
    found = {a["role"].removeprefix("candidate "): Path(a["path"]) for a in record["provenance"]["artifacts"]}
    missing = [n for n in names if n not in found]
    if missing:
        raise SystemExit(
            f"error: the sign-off record has no candidate {', '.join(missing)}; pass --candidates"
        )
    return {n: found[n] for n in names}


def logits_per_utterance(path: Path, audios: list, model: Any, batch_size: int) -> list:
    """Each utterance's logits [frames, vocab] from ``path`` on ONNX Runtime CPU, in length-bucketed batches."""
    from workbench.backends.factory import RunnerFactory
    from workbench.evaluate.batching import BatchPolicy, ConvGeometry, utterance_logits

    runner = RunnerFactory("ort-cpu").runner(path, path.stem)
    prepared = [model.prepare(a) for a in audios]
    out: list = [None] * len(prepared)
    with runner:
        policy = BatchPolicy.for_runner(runner, model, batch_size)
        for index, logits in utterance_logits(
            runner, prepared, policy, ConvGeometry.of_model(model), model.vocabulary.size
        ):
            out[index] = logits
    return out


def decode_all(
    settings: Any, model: Any, logits: list, collapse: bool, pyctcdecode: bool = False
) -> tuple[list[str], float]:
    from workbench.evaluate.decoders import decoder_for

    make = pyctcdecode_decoder if pyctcdecode else decoder_for
    decode = make(settings, model.vocabulary, collapse_blanks=collapse)
    decode(logits[0])  # the language model loads once, outside the timing
    start = time.perf_counter()
    texts = [decode(x) for x in logits]
    return texts, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    import numpy as np

    from workbench.evaluate.decoders import beam_alphabet, beam_scores, blank_only_frames, collapse_blank_runs
    from workbench.evaluate.inference import DecoderSettings
    from workbench.evaluate.wer import Scoring, corpus_wer, score_utterances
    from workbench.model.description import describe_model
    from workbench.report.record import load_record
    from workbench.resources import demo_model_dir
    from workbench.speech.store import load_set

    args = parse(argv)
    loads = {"before": load_averages()}
    ws = args.workspace
    if args.onnx:
        paths = {n: Path(p) for n, p in (item.split("=", 1) for item in args.onnx.split(",") if item)}
    else:
        paths = candidate_paths(load_record(ws / "reports" / args.report / "report.json"), args.candidates)
    eval_set = load_set(args.eval_set, root=ws / "calib_sets")
    utts = eval_set.utterances[: args.limit] if args.limit else eval_set.utterances
    audios = [eval_set.audio(u) for u in utts]
    model = describe_model(demo_model_dir())
    lm = args.lm or ws / "engines" / "demo-lm.arpa"
    scoring = Scoring.for_model(model)
    ids, refs = [u.id for u in utts], [u.text for u in utts]

    def wer(texts: list[str]) -> float:
        return round(100.0 * corpus_wer(score_utterances(ids, refs, texts, scoring)), 3)

    results: dict[str, Any] = {}
    compare = pyctcdecode_available() and not args.no_pyctcdecode
    for name, path in paths.items():
        print(f"[{name}] logits of {len(utts)} utterances", flush=True)
        logits = logits_per_utterance(path, audios, model, args.batch_size)
        frames = sum(len(x) for x in logits)
        blank, silent = model.vocabulary.blank_id, beam_alphabet(model.vocabulary)[1]
        scores = [beam_scores(x, model.vocabulary, silent) for x in logits]  # what the beam is given
        kept = sum(len(collapse_blank_runs(x, blank)) for x in scores)
        only = sum(int(blank_only_frames(x, blank).sum()) for x in scores)
        reference = DecoderSettings("beam", beam_width=args.reference_width, lm=lm)
        ref_texts, ref_s = decode_all(reference, model, logits, collapse=False)
        entry: dict[str, Any] = {
            "onnx": path.name,
            "frames": frames,
            "blank_only_frames": only,
            "frames_after_collapse": kept,
            "reference": {"beam_width": args.reference_width, "collapse": False, "wer": wer(ref_texts)},
            "reference_seconds": round(ref_s, 2),
            "widths": {},
        }
        print(f"[{name}] reference width {args.reference_width}, every frame: {ref_s:.1f} s", flush=True)
        for width in args.widths:
            texts, seconds = decode_all(DecoderSettings("beam", beam_width=width, lm=lm), model, logits, True)
            differ = int(np.sum([a != b for a, b in zip(texts, ref_texts)]))
            entry["widths"][str(width)] = {
                "wer": wer(texts),
                "seconds": round(seconds, 2),
                "differ_from_reference": differ,
            }
            print(
                f"[{name}] width {width} collapsed: WER {wer(texts)} {seconds:.1f} s, {differ} differ",
                flush=True,
            )
            if compare:
                settings = DecoderSettings("beam", beam_width=width, lm=lm)
                other, other_s = decode_all(settings, model, logits, True, pyctcdecode=True)
                entry["widths"][str(width)]["pyctcdecode"] = {
                    "wer": wer(other),
                    "seconds": round(other_s, 2),
                    "differ_from_flashlight": int(np.sum([a != b for a, b in zip(texts, other)])),
                }
                print(f"[{name}] width {width} pyctcdecode: WER {wer(other)} {other_s:.1f} s", flush=True)
        results[name] = entry
    loads["after"] = load_averages()
    out = {
        "benchmark": "beam_decoding",
        "command": "python benchmarks/beam_decoding.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "eval_set": {"name": eval_set.name, "content_hash": eval_set.content_hash, "utterances": len(utts)},
        "language_model": lm.name,
        "decoder": "flashlight-text beam search (workbench.evaluate.decoders), alpha/beta from "
        "workbench.config.INFERENCE" + ("; pyctcdecode on the same scores beside it" if compare else ""),
        "machine": {"platform": platform.platform(), "python": platform.python_version()},
        "load_average": loads,
        "candidates": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

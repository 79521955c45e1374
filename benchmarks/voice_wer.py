"""FP32 WER of the demo model per espeak-ng variant: which variants can give evaluation and dev sets more speakers.

Each variant (the basic 12 and the candidates for ``ESPEAK_EXTRA_VARIANTS``) reads the same calibration-split texts
on two accents (US, British), quiet (no noise, no level change), rate 1 and pitch 50; the demo model's FP32 ONNX
transcribes them at batch 1. A variant whose FP32 WER is far above the basic variants' makes a set's WER deltas
noisy (many changed words on every plan) without telling more about quantization.

    python benchmarks/voice_wer.py --onnx WORKSPACE/engines/<model hash>/model.fp32.onnx --texts 12 \
        --out benchmarks/results/voice_wer.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from workbench.backends.factory import RunnerFactory
from workbench.evaluate.transcribe import transcribe
from workbench.evaluate.wer import Scoring, corpus_wer, score_utterances
from workbench.model.description import describe_model
from workbench.resources import demo_model_dir
from workbench.speech.split import stable_hash
from workbench.speech.text import sentence_pool
from workbench.speech.tts import ESPEAK_EXTRA_VARIANTS, ESPEAK_VARIANTS, Voice, synthesize

CANDIDATES: tuple[str, ...] = (
    "Alex", "Alicia", "Andy", "AnxiousAndy", "Denis", "Diogo", "Gene", "Gene2", "Henrique", "Hugo", "Jacky", "Lee",
    "Marco", "Mario", "Michael", "Mike", "Nguyen", "RicishayMax", "RicishayMax2", "RicishayMax3", "adam", "anika",
    "antonio", "aunty", "belinda", "benjamin", "boris", "caleb", "ed", "edward", "edward2", "grandma", "grandpa",
    "gustave", "iven", "iven2", "iven3", "iven4", "john", "kaukovalta", "m8", "marcelo", "michel", "miguel",
    "norbert", "pablo", "paul", "pedro", "quincy", "rob", "robert", "sandro", "serious", "shelby", "steph",
    "steph2", "steph3", "travis", "victor", "zac",
)  # fmt: skip
ACCENTS = {"en-us": "us", "en-gb": "british"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--onnx", type=Path, required=True, help="the demo model's FP32 ONNX (a demo's engines/)"
    )
    parser.add_argument("--texts", type=int, default=6, help="texts per variant and accent")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/voice_wer.json"))
    args = parser.parse_args()
    started = time.perf_counter()
    pool = [t for t in sentence_pool()["calib"] if 5 <= len(t.split()) <= 12]
    texts = sorted(pool, key=stable_hash)[: args.texts]
    model = describe_model(demo_model_dir())
    scoring = Scoring.for_model(model)
    with tempfile.TemporaryDirectory() as tmp:
        runner = RunnerFactory("ort-cpu", None, Path(tmp), None).runner(args.onnx, "fp32")
        rows = []
        for variant in (*ESPEAK_VARIANTS, *CANDIDATES):
            for name, accent in ACCENTS.items():
                voice = Voice("espeak", name, variant, accent)
                audios = [synthesize(voice, t) for t in texts]
                hyps = transcribe(runner, audios, model, "fp32", batch_size=1).texts
                scored = score_utterances([str(i) for i in range(len(texts))], texts, hyps, scoring)
                rows.append({"variant": variant, "accent": accent, "wer": corpus_wer(scored)})
            print(variant, [round(r["wer"], 3) for r in rows[-2:]], flush=True)
    by_variant: dict[str, dict[str, float]] = {}
    for row in rows:
        by_variant.setdefault(row["variant"], {})[row["accent"]] = row["wer"]
    summary = {v: float(np.mean(list(w.values()))) for v, w in by_variant.items()}
    basic = [summary[v] for v in ESPEAK_VARIANTS]
    worst_basic_us = max(by_variant[v]["us"] for v in ESPEAK_VARIANTS)
    result = {
        "what": "FP32 WER of the demo model per espeak-ng variant, quiet, rate 1, pitch 50",
        "command": "python benchmarks/voice_wer.py --onnx WORKSPACE/engines/<model hash>/model.fp32.onnx --texts "
        f"{args.texts}",
        "texts_per_variant_and_accent": len(texts),
        "accents": ACCENTS,
        "basic_variants": list(ESPEAK_VARIANTS),
        "basic_wer_mean": float(np.mean(basic)),
        "basic_wer_max": float(np.max(basic)),
        "extra_variants_chosen": list(ESPEAK_EXTRA_VARIANTS),
        "rule": "extra variants: US-accent FP32 WER at most the worst basic variant's on these texts",
        "note": "en-gb ignores espeak-ng variants (every en-gb+<variant> gives the same audio as en-gb), so the "
        "british column is one voice; the US column decides",
        "meeting_the_rule": [v for v in CANDIDATES if by_variant[v]["us"] <= worst_basic_us],
        "wer_by_variant": dict(sorted(summary.items(), key=lambda kv: kv[1])),
        "wer_by_variant_and_accent": by_variant,
        "seconds": time.perf_counter() - started,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result["wer_by_variant"], indent=0))
    print(
        f"basic: mean {result['basic_wer_mean']:.3f}, max {result['basic_wer_max']:.3f}; {result['seconds']:.0f} s"
    )


if __name__ == "__main__":
    main()

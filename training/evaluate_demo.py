"""FP32 greedy-CTC WER of the demo model on held-out texts, per condition, seen vs unseen voices.

Texts come from the ``eval`` split only (never used in training). Slices: quiet / noisy (0-20 dB,
white/pink/brown/babble/hum) / accented, each for voices seen in training; plus quiet speech by
voices never used in training (festival kal_diphone, ked_diphone). Writes JSON; the model card
quotes it. ``python -m training.evaluate_demo --per-slice 60 --out workbench/demo_model/eval.json``
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import jiwer
import numpy as np
import torch

from workbench.config import NOISE_KINDS
from workbench.model.features import normalise_audio
from workbench.model.vocab import decode_ids
from workbench.resources import demo_model_dir
from workbench.speech.conditions import mix_at_snr
from workbench.speech.text import sentence_pool
from workbench.speech.tts import Prosody, available_voices, synthesize


def slices() -> dict[str, list]:
    voices = available_voices()
    seen_major = [v for v in voices if v.seen_in_training and v.is_majority_accent]
    seen_other = [v for v in voices if v.seen_in_training and not v.is_majority_accent]
    unseen = [v for v in voices if not v.seen_in_training]
    return {
        "quiet/seen": seen_major,
        "noisy/seen": seen_major,
        "accented/seen": seen_other,
        "quiet/unseen": unseen,
        "noisy/unseen": unseen,
    }


def transcribe(model, audio: np.ndarray) -> str:
    x = torch.from_numpy(normalise_audio(audio))[None]
    with torch.inference_mode():
        return decode_ids(model(x).logits[0].argmax(-1).tolist())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", type=Path, default=demo_model_dir())
    ap.add_argument("--per-slice", type=int, default=60)
    ap.add_argument("--seed", type=int, default=123)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    from transformers import Wav2Vec2ForCTC

    torch.set_num_threads(2)
    model = Wav2Vec2ForCTC.from_pretrained(str(args.model)).eval()
    texts = [t for t in sentence_pool()["eval"] if 3 <= len(t.split()) <= 16]
    rng = np.random.default_rng(args.seed)
    result: dict[str, dict] = {}
    t0 = time.time()
    for name, voices in slices().items():
        refs, hyps, used = [], [], set()
        for i in range(args.per_slice):
            voice = voices[int(rng.integers(len(voices)))]
            text = texts[int(rng.integers(len(texts)))]
            speech = synthesize(
                voice, text, Prosody(float(rng.uniform(0.85, 1.2)), float(rng.uniform(35, 65)))
            )
            if name.startswith("noisy"):
                kind = NOISE_KINDS[i % len(NOISE_KINDS)]
                others = (
                    [synthesize(voices[0], texts[int(rng.integers(len(texts)))]) for _ in range(3)]
                    if kind == "babble"
                    else None
                )
                audio = mix_at_snr(
                    speech, float(rng.uniform(0, 20)), float(rng.uniform(-35, -15)), kind, rng, others
                ).audio
            else:
                audio = mix_at_snr(
                    speech, float(rng.uniform(30, 45)), float(rng.uniform(-35, -15)), "pink", rng
                ).audio
            refs.append(text)
            hyps.append(transcribe(model, audio))
            used.add(voice.speaker)
        out = jiwer.process_words(refs, hyps)
        result[name] = {
            "wer": out.wer,
            "utterances": len(refs),
            "words": sum(len(r.split()) for r in refs),
            "cer": jiwer.cer(refs, hyps),
            "voices": sorted({v.split("+")[0] for v in used}),
            "examples": [{"ref": r, "hyp": h} for r, h in list(zip(refs, hyps))[:3]],
        }
        print(
            f"{name:16} WER {out.wer * 100:5.1f} %  CER {result[name]['cer'] * 100:5.1f} %  ({len(refs)} utts)",
            flush=True,
        )
    record = {
        "model": str(args.model),
        "per_slice": args.per_slice,
        "seed": args.seed,
        "slices": result,
        "seconds": time.time() - t0,
        "text_split": "eval (WordNet, never used in training)",
    }
    if args.out:
        args.out.write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()

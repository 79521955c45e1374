"""FP32 greedy-CTC WER of the demo model per slice: the demo's conditions, and what training never saw.

Texts come from WordNet's ``eval`` split (never used in training) unless the slice says otherwise. Slices:
- the demo's conditions on the workbench's voices: quiet, noisy (0-20 dB, white/pink/brown/babble/hum),
  accented;
- held out from training, each quiet: whole voices (festival's three voices, espeak-ng's Dutch, Polish and
  Swahili voices reading English, five espeak-ng variants; ``training.voices``), a channel type (the GSM
  06.10 full-rate codec, an 8 kHz round trip through sox), and a text domain (the fortune categories
  ``songs-poems`` and ``literature``; ``training.corpus``);
- trained augmentations drawn afresh: telephone band, a reverberant room (RT60 0.3-0.9 s), fast speech
  (1.4-1.6 times the default rate).
Writes JSON; the model card and ``training/README.md`` quote it.
``python -m training.evaluate_demo --per-slice 60 --out workbench/demo_model/eval.json``
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import jiwer
import numpy as np
import soundfile as sf
import torch

from training.channels import reverberate, telephone_band
from training.corpus import fortune_texts
from training.voices import held_out_voices
from workbench.config import NOISE_KINDS
from workbench.model.features import normalise_audio
from workbench.model.vocab import decode_ids
from workbench.resources import demo_model_dir
from workbench.speech.conditions import mix_at_snr
from workbench.speech.text import sentence_pool
from workbench.speech.tts import Prosody, Voice, available_voices, synthesize


@dataclass(frozen=True)
class Slice:
    """Voices to draw from, the text pool, and what happens to the clean speech."""

    voices: tuple[Voice, ...]
    texts: tuple[str, ...]
    channel: str = "quiet"  # quiet | noisy | gsm | telephone | reverb
    rate: tuple[float, float] = (0.85, 1.2)


def slices() -> dict[str, Slice]:
    voices = available_voices()
    seen_major = tuple(v for v in voices if v.seen_in_training and v.is_majority_accent)
    seen_other = tuple(v for v in voices if v.seen_in_training and not v.is_majority_accent)
    seen = seen_major + seen_other
    held = held_out_voices()
    eval_texts = tuple(t for t in sentence_pool()["eval"] if 3 <= len(t.split()) <= 16)
    domain_texts = tuple(t for t in fortune_texts()["held_out"] if len(t.split()) <= 16)
    table = {
        "quiet/seen": Slice(seen_major, eval_texts),
        "noisy/seen": Slice(seen_major, eval_texts, "noisy"),
        "accented/seen": Slice(seen_other, eval_texts),
        "held-out voices/festival": Slice(held["festival"], eval_texts),
        "held-out voices/espeak languages": Slice(held["espeak-languages"], eval_texts),
        "held-out voices/espeak variants": Slice(held["espeak-variants"], eval_texts),
        "held-out channel/gsm codec": Slice(seen, eval_texts, "gsm"),
        "held-out text/songs and literature": Slice(seen, domain_texts),
        "augmented/telephone": Slice(seen, eval_texts, "telephone"),
        "augmented/reverberant room": Slice(seen, eval_texts, "reverb"),
        "augmented/fast speech": Slice(seen, eval_texts, rate=(1.4, 1.6)),
    }
    return {name: sl for name, sl in table.items() if sl.voices and sl.texts}


def gsm_round_trip(audio: np.ndarray) -> np.ndarray:
    """Encode with the GSM 06.10 codec at 8 kHz and decode back to 16 kHz (sox)."""
    with tempfile.TemporaryDirectory(prefix="wb-gsm-") as tmp:
        src, coded, back = (str(Path(tmp) / n) for n in ("in.wav", "coded.gsm", "back.wav"))
        sf.write(src, audio, 16000, subtype="PCM_16")
        subprocess.run(["sox", src, "-r", "8000", "-c", "1", coded], check=True, capture_output=True)
        subprocess.run(["sox", coded, "-r", "16000", "-b", "16", back], check=True, capture_output=True)
        samples, _ = sf.read(back, dtype="float32")
        return samples


def apply_channel(speech: np.ndarray, channel: str, rng: np.random.Generator) -> np.ndarray:
    x = torch.from_numpy(speech.astype(np.float32))[None]
    lens = torch.tensor([x.shape[1]])
    if channel == "gsm":
        return gsm_round_trip(speech)
    if channel == "telephone":
        return telephone_band(x, lens, torch.tensor([True]))[0].numpy()
    if channel == "reverb":
        return reverberate(x, lens, torch.tensor([True]), (0.3, 0.9))[0].numpy()
    return speech


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
    rng = np.random.default_rng(args.seed)
    torch.manual_seed(args.seed)
    result: dict[str, dict] = {}
    t0 = time.time()
    for name, sl in slices().items():
        voices, texts = sl.voices, sl.texts
        refs, hyps, used = [], [], set()
        for i in range(args.per_slice):
            voice = voices[int(rng.integers(len(voices)))]
            text = texts[int(rng.integers(len(texts)))]
            speech = synthesize(
                voice, text, Prosody(float(rng.uniform(*sl.rate)), float(rng.uniform(35, 65)))
            )
            speech = apply_channel(speech, sl.channel, rng)
            if sl.channel == "noisy":
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
            f"{name:36} WER {out.wer * 100:5.1f} %  CER {result[name]['cer'] * 100:5.1f} %  ({len(refs)} utts)",
            flush=True,
        )
    record = {
        "model": str(args.model),
        "per_slice": args.per_slice,
        "seed": args.seed,
        "slices": result,
        "seconds": time.time() - t0,
        "text_split": "eval (WordNet, never used in training); held-out text: fortune songs-poems, literature",
    }
    if args.out:
        args.out.write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()

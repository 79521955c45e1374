"""Training data for the demo model: training text spoken by many synthetic voices.

Two catalogues. ``workbench`` (the first training stages): WordNet ``train``-split text spoken by the
workbench's own voices with ``seen_in_training``. ``broad``: the texts of ``training.corpus`` (WordNet plus
fortune categories, read from ``texts_file``) spoken by ``training.voices``' pools, the espeak-ng English
accents with every variant, espeak-ng's other-language voices reading English, every flite voice and festival's
other-language voices reading English, at a wider range of speaking rates and pitches. Clean audio is stored;
noise, reverberation, telephone band, speed and level augmentation happen on the fly in ``train_demo.py``.
``generate`` stops at ``count`` utterances or after ``budget_s`` seconds, whichever comes first.

Festival's voices speak through one long-lived ``festival --pipe`` process per voice and worker (``_festival``):
starting festival and loading a voice takes about ten times as long as synthesising a sentence, which with
text2wave per utterance would make the festival pool dominate the synthesis budget. The speech is the same as
text2wave's for a one-sentence text (``utt.synth`` of the text, saved as RIFF), speaking rate through
``Duration_Stretch``.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import select
import subprocess
import tempfile
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
from tqdm import tqdm

from training.voices import training_voice_pools
from workbench.speech.audio import read_audio
from workbench.speech.text import sentence_pool
from workbench.speech.tts import Prosody, Voice, available_voices, synthesize, trim_silence


@dataclass(frozen=True)
class DataSpec:
    count: int
    split: str
    seed: int
    majority_share: float
    rate_range: tuple[float, float]
    pitch_range: tuple[float, float]
    max_seconds: float
    seen_voices_only: bool = True
    catalogue: str = "workbench"
    texts_file: str = ""
    pool_shares: tuple[float, ...] = (0.45, 0.2, 0.35)  # english, languages, flite[, festival]; missing = 0


def _voice_table(seen_only: bool) -> tuple[list[Voice], list[Voice]]:
    voices = [v for v in available_voices() if v.seen_in_training or not seen_only]
    return [v for v in voices if v.is_majority_accent], [v for v in voices if not v.is_majority_accent]


@lru_cache(maxsize=2)
def _texts_from_file(path: str) -> tuple[str, ...]:
    return tuple(line for line in Path(path).read_text().splitlines() if line.strip())


def _pick_voice_and_text(spec: DataSpec, rng: np.random.Generator) -> tuple[Voice, str]:
    if spec.catalogue == "broad":
        pools = list(training_voice_pools().values())
        # a recipe naming fewer pools gives the rest no share (the same draws as before those pools existed)
        shares = list(spec.pool_shares) + [0.0] * (len(pools) - len(spec.pool_shares))
        weights = np.array(shares, dtype=float) * np.array([len(p) > 0 for p in pools])
        pool = pools[int(rng.choice(len(pools), p=weights / weights.sum()))]
        texts = _texts_from_file(spec.texts_file) if spec.split == "train" else sentence_pool()[spec.split]
    else:
        majority, other = _voice_table(spec.seen_voices_only)
        pool = majority if rng.random() < spec.majority_share else other
        texts = sentence_pool()[spec.split]
    voice = pool[int(rng.integers(len(pool)))]
    return voice, texts[int(rng.integers(len(texts)))]


_FESTIVAL: dict[str, subprocess.Popen] = {}  # per worker process: voice name -> festival --pipe


def _festival_say(proc: subprocess.Popen, scheme: str, tag: str, timeout_s: float = 60.0) -> str:
    """Send ``scheme`` to a ``festival --pipe`` process, then have it print ``tag`` and its current voice, flushed
    (its stdout is block-buffered otherwise): that line marks the end of the commands. Returns the voice."""
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(f'{scheme}(format t "{tag} %s\\n" current-voice)(fflush nil)\n'.encode())
    proc.stdin.flush()
    fd, seen, deadline = proc.stdout.fileno(), b"", time.monotonic() + timeout_s
    marker = f"{tag} ".encode()
    while True:
        lines = seen.split(b"\n")
        for line in lines[:-1]:
            if line.startswith(marker):
                return line[len(marker) :].decode().strip()
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise TimeoutError(f"festival gave no {tag} in {timeout_s:.0f} s")
        chunk = os.read(fd, 4096)
        if not chunk:
            raise RuntimeError("festival exited")
        seen += chunk


def _festival(voice: Voice, text: str, prosody: Prosody) -> np.ndarray:
    """Speak ``text`` with festival voice ``voice`` through this worker's long-lived festival for that voice."""
    proc = _FESTIVAL.get(voice.name)
    wav = os.path.join(tempfile.gettempdir(), f"wb-fest-{os.getpid()}-{voice.name}.wav")
    try:
        if proc is None or proc.poll() is not None:
            proc = subprocess.Popen(
                ["festival", "--pipe"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
            _FESTIVAL[voice.name] = proc
            if _festival_say(proc, f"(voice_{voice.name})", "ready") != voice.name:
                raise RuntimeError(f"festival has no voice {voice.name}")
        if os.path.exists(wav):
            os.unlink(wav)
        spoken = text.replace("\\", " ").replace('"', " ")
        stretch = 1.0 / max(prosody.rate, 0.1)
        _festival_say(
            proc,
            f"(Parameter.set 'Duration_Stretch {stretch:.3f})"
            f'(utt.save.wave (utt.synth (Utterance Text "{spoken}")) "{wav}" \'riff)',
            "done",
        )
        audio = read_audio(Path(wav)).samples
        os.unlink(wav)
    except Exception:
        if proc is not None:
            proc.kill()
            proc.wait()
        _FESTIVAL.pop(voice.name, None)
        raise
    return trim_silence(audio)


def _one(args: tuple[DataSpec, int]) -> tuple[np.ndarray, str, str] | None:
    spec, index = args
    digest = hashlib.sha256(f"{spec.seed}|{spec.split}|{index}".encode()).digest()
    rng = np.random.default_rng(int.from_bytes(digest[:8], "big"))
    voice, text = _pick_voice_and_text(spec, rng)
    prosody = Prosody(float(rng.uniform(*spec.rate_range)), float(rng.uniform(*spec.pitch_range)))
    try:
        audio = (
            _festival(voice, text, prosody)
            if voice.engine == "festival"
            else synthesize(voice, text, prosody)
        )
    except Exception:
        return None
    if len(audio) > spec.max_seconds * 16000 or len(audio) < 8000:
        return None
    return (np.clip(audio * 32767, -32768, 32767).astype(np.int16), text, voice.speaker)


def generate(spec: DataSpec, workers: int, budget_s: float | None = None) -> dict[str, object]:
    """Returns {'audio': int16 concat, 'offsets': int64 [n+1], 'texts': [...], 'speakers': [...]}."""
    sentence_pool()  # warm the caches before forking
    if spec.catalogue == "broad":
        pools = training_voice_pools()
        print(
            f"voice pools ({spec.split}): " + ", ".join(f"{k} {len(v)}" for k, v in pools.items()), flush=True
        )
        if spec.split == "train":
            _texts_from_file(spec.texts_file)
    started = time.monotonic()
    results: list[tuple[np.ndarray, str, str] | None] = []
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        jobs = ((spec, i) for i in range(spec.count))
        for result in tqdm(
            pool.imap(_one, jobs, chunksize=16), total=spec.count, desc=f"tts {spec.split}", mininterval=10
        ):
            results.append(result)
            if budget_s is not None and time.monotonic() - started > budget_s:
                pool.terminate()
                break
    kept = [r for r in results if r is not None]
    offsets = np.cumsum([0] + [len(r[0]) for r in kept]).astype(np.int64)
    return {
        "audio": np.concatenate([r[0] for r in kept]),
        "offsets": offsets,
        "texts": [r[1] for r in kept],
        "speakers": [r[2] for r in kept],
    }

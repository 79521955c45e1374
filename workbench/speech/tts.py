"""Text-to-speech voices from Debian packages: espeak-ng (many accents), flite and festival.

A ``Voice`` is one synthetic speaker: engine, voice name, variant, accent. ``synthesize`` runs the
engine in a subprocess and returns 16 kHz mono float32 audio with leading/trailing silence trimmed.
The programs are looked up on ``PATH`` (``shutil.which``) only when voices are asked for, so every other
verb works without them; when none is found, ``require_voices`` names the Debian packages to install.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from workbench.config import MAJORITY_ACCENT
from workbench.errors import WorkbenchError
from workbench.speech.audio import read_audio

ESPEAK_ACCENTS: dict[str, str] = {
    "en-us": "us",
    "en-gb": "british",
    "en-gb-scotland": "scottish",
    "en-gb-x-rp": "received-pronunciation",
    "en-gb-x-gbclan": "lancastrian",
    "en-gb-x-gbcwmd": "west-midlands",
    "en-029": "caribbean",
    "en-us-nyc": "new-york",
}
ESPEAK_VARIANTS: tuple[str, ...] = ("m1", "m2", "m3", "m4", "m5", "m6", "m7", "f1", "f2", "f3", "f4", "f5")
# More speakers for evaluation and dev sets (``extra_voices``): the espeak-ng named variants the demo model reads as
# well as its basic ones (US accent, quiet, 12 texts: FP32 WER at most the worst basic variant's 0.147; the basic
# variants read 0.101-0.147, benchmarks/results/voice_wer.json), each heard by the demo model in training. A set's
# intervals narrow with its speakers, not its utterances: the bootstrap resamples speakers. The calibration set
# keeps the basic variants only.
ESPEAK_EXTRA_VARIANTS: tuple[str, ...] = (
    "Alex", "Denis", "Diogo", "Gene", "Gene2", "Henrique", "Hugo", "Mario", "Michael", "Mike", "Nguyen", "adam",
    "antonio", "aunty", "benjamin", "boris", "caleb", "ed", "edward", "edward2", "grandma", "grandpa", "iven",
    "iven2", "iven3", "iven4", "john", "m8", "michel", "miguel", "pablo", "paul", "pedro", "quincy", "rob", "robert",
    "sandro", "serious", "steph", "steph2", "steph3", "victor",
)  # fmt: skip
FLITE_VOICES: dict[str, str] = {"kal": "us", "slt": "us", "rms": "us", "awb": "scottish"}
FESTIVAL_VOICES: dict[str, str] = {"kal_diphone": "us", "ked_diphone": "us"}
# Debian packages giving the programs above (espeak-ng, flite, festival's text2wave) and festival's voices
TTS_DEBIAN_PACKAGES: tuple[str, ...] = (
    "espeak-ng",
    "flite",
    "festival",
    "festvox-kallpc16k",
    "festvox-kdlpc16k",
)
INSTALL_HINT = "sudo apt-get install " + " ".join(TTS_DEBIAN_PACKAGES)
# Voices the demo model never hears in training, to report WER on unseen voices.
HELD_OUT_FROM_TRAINING = frozenset({"festival:kal_diphone", "festival:ked_diphone"})


@dataclass(frozen=True, order=True)
class Voice:
    engine: str
    name: str
    variant: str
    accent: str

    @property
    def speaker(self) -> str:
        base = f"{self.engine}:{self.name}"
        return f"{base}+{self.variant}" if self.variant else base

    @property
    def base_id(self) -> str:
        return f"{self.engine}:{self.name}"

    @property
    def is_majority_accent(self) -> bool:
        return self.accent == MAJORITY_ACCENT

    @property
    def seen_in_training(self) -> bool:
        return self.base_id not in HELD_OUT_FROM_TRAINING


@dataclass(frozen=True)
class Prosody:
    """Speaking rate as a multiple of the engine's default, and pitch (0..100 espeak scale); festival's voices keep
    their own (``applies_prosody``)."""

    rate: float = 1.0
    pitch: float = 50.0


def applies_prosody(voice: Voice) -> bool:
    """Whether ``synthesize`` sets ``Prosody``'s rate and pitch for this voice: espeak-ng and flite do; festival's
    voices speak at their own rate and intonation (a clip's record says None for both)."""
    return voice.engine != "festival"


def _espeak_binary() -> str | None:
    return shutil.which("espeak-ng")


def _espeak_listing(option: str) -> list[list[str]]:
    """The rows of ``espeak-ng <option>`` (``--voices``, ``--voices=variant``) below its header, split into
    columns; empty rows left out, and no rows when espeak-ng is not installed."""
    binary = _espeak_binary()
    if binary is None:
        return []
    out = subprocess.run([binary, option], capture_output=True, text=True, check=False).stdout
    return [parts for parts in (line.split() for line in out.splitlines()[1:]) if parts]


@lru_cache(maxsize=1)
def _espeak_voice_names() -> frozenset[str]:
    return frozenset(parts[1] for parts in _espeak_listing("--voices") if len(parts) >= 2)


@lru_cache(maxsize=1)
def available_voices() -> tuple[Voice, ...]:
    """Every voice whose engine is installed on this machine."""
    voices: list[Voice] = []
    espeak_names = _espeak_voice_names()
    for name, accent in ESPEAK_ACCENTS.items():
        if name in espeak_names:
            voices.extend(Voice("espeak", name, v, accent) for v in ESPEAK_VARIANTS)
    if shutil.which("flite"):
        voices.extend(Voice("flite", name, "", accent) for name, accent in FLITE_VOICES.items())
    if shutil.which("text2wave"):
        for name, accent in FESTIVAL_VOICES.items():
            if _festival_has_voice(name):
                voices.append(Voice("festival", name, "", accent))
    return tuple(sorted(voices))


@lru_cache(maxsize=1)
def espeak_variant_files() -> frozenset[str]:
    """The variant files this espeak-ng ships (``espeak-ng --voices=variant``, last column's file name)."""
    return frozenset(Path(parts[-1]).name for parts in _espeak_listing("--voices=variant"))


def _variants_take(name: str) -> bool:
    """Whether espeak-ng's ``name+variant`` changes the voice: some builds resolve a voice name whose variants are
    ignored (this one gives the same audio for every ``en-gb+<variant>``), which would make every variant of it
    one speaker counted as many."""
    probe = "the north wind and the sun"
    spoken = [synthesize(Voice("espeak", name, v, ""), probe) for v in ("m1", "f2")]
    return not (len(spoken[0]) == len(spoken[1]) and np.array_equal(spoken[0], spoken[1]))


@lru_cache(maxsize=1)
def extra_voices() -> tuple[Voice, ...]:
    """``ESPEAK_EXTRA_VARIANTS`` on every English accent of ``ESPEAK_ACCENTS`` this espeak-ng has and whose variants
    change the voice (``_variants_take``; variants it lacks are left out): the extra speakers of evaluation and dev
    sets, never of a calibration set."""
    names, variants = _espeak_voice_names(), espeak_variant_files()
    return tuple(
        sorted(
            Voice("espeak", name, variant, accent)
            for name, accent in ESPEAK_ACCENTS.items()
            if name in names and _variants_take(name)
            for variant in ESPEAK_EXTRA_VARIANTS
            if variant in variants
        )
    )


def _festival_has_voice(name: str) -> bool:
    roots = [Path("/usr/share/festival/voices"), Path(os.environ.get("FESTIVAL_VOICES", "/nonexistent"))]
    short = name.replace("_diphone", "")
    return any(
        (root / "english" / f"{short}_diphone").exists() or (root / "english" / name).exists()
        for root in roots
    )


def require_voices() -> tuple[Voice, ...]:
    voices = available_voices()
    if not voices:
        raise WorkbenchError(
            "the synthetic source needs a text-to-speech program (espeak-ng, flite or festival's text2wave) on "
            f"PATH and found none; install the Debian packages: {INSTALL_HINT} (or build sets from real audio "
            "with --source folder, manifest or hf)"
        )
    return voices


def _command(voice: Voice, text: str, prosody: Prosody, wav: str) -> list[str]:
    if voice.engine == "espeak":
        spec = f"{voice.name}+{voice.variant}" if voice.variant else voice.name
        words_per_min = int(round(165 * prosody.rate))
        return [
            _espeak_binary() or "espeak-ng",
            "-v",
            spec,
            "-s",
            str(words_per_min),
            "-p",
            str(int(round(prosody.pitch))),
            "-w",
            wav,
            text,
        ]
    if voice.engine == "flite":
        stretch = 1.0 / max(prosody.rate, 0.1)
        f0 = 70 + prosody.pitch * 1.6 if voice.name in ("slt",) else 60 + prosody.pitch * 1.0
        return [
            "flite",
            "-voice",
            voice.name,
            "--setf",
            f"duration_stretch={stretch:.3f}",
            "--setf",
            f"int_f0_target_mean={f0:.1f}",
            "-t",
            text,
            "-o",
            wav,
        ]
    if voice.engine == "festival":  # its voices keep their own rate and intonation (applies_prosody)
        return ["text2wave", "-eval", f"(voice_{voice.name})", "-o", wav]
    raise WorkbenchError(f"unknown TTS engine {voice.engine!r}")


def trim_silence(samples: np.ndarray, threshold_db: float = -45.0, margin_s: float = 0.12) -> np.ndarray:
    """Cut leading/trailing audio quieter than ``threshold_db`` below the peak, keeping a margin."""
    if not len(samples):
        return samples
    frame = 160
    n = len(samples) // frame
    if n == 0:
        return samples
    energy = np.sqrt(np.mean(samples[: n * frame].reshape(n, frame) ** 2, axis=1) + 1e-12)
    loud = np.nonzero(20 * np.log10(energy / (energy.max() + 1e-12)) > threshold_db)[0]
    if not len(loud):
        return samples
    margin = int(margin_s * 16000)
    start = max(0, loud[0] * frame - margin)
    end = min(len(samples), (loud[-1] + 1) * frame + margin)
    return samples[start:end]


def synthesize(voice: Voice, text: str, prosody: Prosody = Prosody()) -> np.ndarray:
    """Speak ``text`` with ``voice``; returns 16 kHz mono float32 samples."""
    with tempfile.TemporaryDirectory(prefix="wb-tts-") as tmp:
        wav = str(Path(tmp) / "out.wav")
        cmd = _command(voice, text, prosody, wav)
        stdin = text if voice.engine == "festival" else None
        proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=120, check=False)
        if proc.returncode != 0 or not Path(wav).exists():
            raise WorkbenchError(f"{voice.speaker} failed to synthesise: {proc.stderr.strip()[:300]}")
        audio = read_audio(Path(wav)).samples
    return trim_silence(audio)

"""Audio I/O and checks: read any soundfile format as 16 kHz mono float32, levels, FLAC writes."""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from math import gcd
from pathlib import Path

import numpy as np
import soundfile as sf

from workbench.config import SAMPLE_RATE, AudioPlausibility

SILENCE_DBFS = -60.0
_EPS = 1e-12


class AudioProblem(ValueError):
    """A clip that cannot be used; the message is the reason recorded in the set's card."""


class UnreadableAudio(AudioProblem):
    """A file that holds no audio to judge: empty (0 bytes, no samples), not audio at all, corrupt, or NaN samples.
    An evaluation set imported whole counts it with the missing files (``workbench.speech.missing``)."""


class ImplausibleAudio(AudioProblem):
    """A clip that is no plausible utterance: a header's sample rate no recording has, or a whole recording."""


def check_plausible(rate: int, frames: int, limits: AudioPlausibility = AudioPlausibility()) -> None:
    """Refuse a sample rate or a length no spoken utterance has (from the header: nothing decoded yet)."""
    if not limits.min_rate_hz <= rate <= limits.max_rate_hz:
        raise ImplausibleAudio(
            f"its header claims a sample rate of {rate} Hz, not a rate speech is recorded at "
            f"({limits.min_rate_hz}-{limits.max_rate_hz} Hz): a damaged or mislabelled file"
        )
    seconds = frames / rate
    if seconds > limits.max_clip_s:
        raise ImplausibleAudio(
            f"it runs {seconds / 60:.1f} min, longer than one utterance (at most {limits.max_clip_s:g} s): "
            "cut the recording into utterances first"
        )


@dataclass
class PreparedAudio:
    """Audio converted to the workbench's format, with the fixes that were applied."""

    samples: np.ndarray
    fixes: list[str] = field(default_factory=list)

    @property
    def duration_s(self) -> float:
        return len(self.samples) / SAMPLE_RATE


def rms_dbfs(samples: np.ndarray) -> float:
    """Root-mean-square level in dB relative to full scale (a full-scale sine is -3 dBFS)."""
    rms = float(np.sqrt(np.mean(np.square(samples, dtype=np.float64)))) if len(samples) else 0.0
    return 20.0 * np.log10(max(rms, _EPS))


def resample(samples: np.ndarray, from_rate: int, to_rate: int = SAMPLE_RATE) -> np.ndarray:
    """Polyphase resampling between integer rates."""
    if from_rate == to_rate:
        return samples.astype(np.float32, copy=False)
    if from_rate <= 0:
        raise AudioProblem(f"invalid sample rate {from_rate}")
    from scipy.signal import resample_poly  # imported here: scipy.signal takes most of a verb's start-up

    g = gcd(int(from_rate), int(to_rate))
    out = resample_poly(samples.astype(np.float64), to_rate // g, from_rate // g)
    return out.astype(np.float32)


def prepare(samples: np.ndarray, rate: int) -> PreparedAudio:
    """Downmix, resample to 16 kHz and check a decoded clip; raises AudioProblem if unusable."""
    fixes: list[str] = []
    data = np.asarray(samples)
    if data.size == 0:
        raise UnreadableAudio("empty audio (no samples)")
    if data.ndim == 2:
        if data.shape[1] > 1:
            fixes.append(f"downmixed {data.shape[1]} channels to mono")
        data = data.mean(axis=1)
    elif data.ndim != 1:
        raise UnreadableAudio(f"audio has unexpected shape {data.shape}")
    check_plausible(int(rate), len(data))
    if np.issubdtype(data.dtype, np.integer):
        data = data.astype(np.float32) / float(np.iinfo(data.dtype).max)
    data = data.astype(np.float32)
    if not np.all(np.isfinite(data)):
        raise UnreadableAudio("audio contains NaN or infinite samples")
    if rate != SAMPLE_RATE:
        fixes.append(f"resampled {rate} Hz to {SAMPLE_RATE} Hz")
        data = resample(data, rate)
    peak = float(np.max(np.abs(data)))
    if peak > 1.0:
        fixes.append(f"scaled down clipping peak {peak:.2f}")
        data = data / peak
    if rms_dbfs(data) < SILENCE_DBFS:
        raise AudioProblem(f"silent audio (level {rms_dbfs(data):.1f} dBFS < {SILENCE_DBFS} dBFS)")
    return PreparedAudio(data, fixes)


def read_audio(source: Path | bytes) -> PreparedAudio:
    """Read a file (or its bytes) and prepare it; unreadable files raise AudioProblem."""
    try:
        handle = io.BytesIO(source) if isinstance(source, (bytes, bytearray)) else str(source)
        with sf.SoundFile(handle) as audio:
            rate = int(audio.samplerate)
            check_plausible(rate, audio.frames)  # before decoding: a 2-hour clip is never read into memory
            data = audio.read(dtype="float32", always_2d=False)
    except AudioProblem:
        raise
    except Exception as exc:  # soundfile raises several types for corrupt input
        raise UnreadableAudio(f"unreadable or corrupt audio ({type(exc).__name__}: {exc})") from exc
    return prepare(data, rate)


def write_flac(path: Path, samples: np.ndarray) -> None:
    """Write 16 kHz mono audio as 16-bit FLAC."""
    clipped = np.clip(samples, -1.0, 1.0)
    sf.write(str(path), clipped, SAMPLE_RATE, format="FLAC", subtype="PCM_16")


def load_flac(path: Path) -> np.ndarray:
    data, rate = sf.read(str(path), dtype="float32")
    if rate != SAMPLE_RATE:
        raise AudioProblem(f"{path} has {rate} Hz, expected {SAMPLE_RATE}")
    return data

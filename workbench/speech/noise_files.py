"""Recorded noise and room impulse responses from folders (MUSAN / DEMAND style).

``scan_folder`` lists the audio files under a folder; the first sub-folder level is the kind
(``musan/noise/free-sound/x.wav`` under ``musan`` is kind ``noise``; DEMAND's ``DKITCHEN/ch01.wav``
is kind ``DKITCHEN``), files directly in the folder take the folder's name. Each file is identified by
the SHA-256 of its content, and ``split_files`` gives a third of each kind's files (at least one, when
the kind has two or more) to evaluation and the rest to calibration, so the two sets never hear the
same recording. ``NoiseBank.draw`` reads a random stretch of one file (only that stretch is read),
``reverberate`` convolves speech with an impulse response.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import soundfile as sf
from scipy.signal import fftconvolve

from workbench.artifacts import sha256_file
from workbench.config import SAMPLE_RATE
from workbench.errors import WorkbenchError
from workbench.speech.audio import SILENCE_DBFS, resample, rms_dbfs
from workbench.speech.split import ROLES, partition_speakers

NOISE_SUFFIXES = (".wav", ".flac", ".ogg", ".mp3", ".aiff", ".aif", ".au")
_DRAW_ATTEMPTS = 6


@dataclass(frozen=True)
class NoiseFile:
    """One recording: its kind, where it is, its content hash and its length."""

    kind: str
    path: Path
    name: str  # path relative to the scanned folder
    sha256: str
    frames: int
    rate: int

    @property
    def seconds(self) -> float:
        return self.frames / self.rate


def scan_folder(root: Path, what: str = "noise") -> tuple[NoiseFile, ...]:
    """Every readable audio file under ``root``, sorted by kind then content hash."""
    root = Path(root)
    if not root.is_dir():
        raise WorkbenchError(f"{what} folder {root} does not exist or is not a folder")
    files = []
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in NOISE_SUFFIXES):
        rel = path.relative_to(root)
        kind = rel.parts[0] if len(rel.parts) > 1 else root.name
        try:
            info = sf.info(str(path))
        except Exception as exc:  # soundfile raises several types for unreadable files
            raise WorkbenchError(
                f"{what} file {path} cannot be read ({type(exc).__name__}: {exc}); remove or convert it"
            ) from exc
        if info.frames < 1 or info.samplerate < 1:
            raise WorkbenchError(f"{what} file {path} holds no audio; remove it")
        files.append(
            NoiseFile(kind, path, rel.as_posix(), sha256_file(path), int(info.frames), int(info.samplerate))
        )
    if not files:
        raise WorkbenchError(f"no audio files ({', '.join(NOISE_SUFFIXES)}) under {what} folder {root}")
    return tuple(sorted(files, key=lambda f: (f.kind, f.sha256)))


def split_files(files: tuple[NoiseFile, ...]) -> dict[str, tuple[NoiseFile, ...]]:
    """Role -> files: per kind a third of the distinct recordings (at least one of two or more) go to
    evaluation, by content hash; a recording stored twice goes to one role only."""
    kind_of = {f.sha256: f.kind for f in files}
    roles = partition_speakers([f.sha256 for f in files], kind_of.__getitem__)
    return {role: tuple(f for f in files if roles[f.sha256] == role) for role in ROLES}


def files_for_role(folder: Path, role: str, what: str = "noise") -> tuple[NoiseFile, ...]:
    """The files of ``folder`` that set role ``role`` may use; a user error when there are none."""
    files = scan_folder(folder, what)
    mine = split_files(files)[role]
    if not mine:
        raise WorkbenchError(
            f"{what} folder {folder} has {len(files)} file(s) but none for the "
            f"{'evaluation' if role == 'eval' else 'calibration'} set: a third of each "
            "kind's files go to evaluation, so every kind needs at least two files"
        )
    return mine


def _to_mono_16k(data: np.ndarray, rate: int) -> np.ndarray:
    mono = data.mean(axis=1) if data.ndim == 2 else data
    return resample(mono.astype(np.float32), rate)


def _fit(samples: np.ndarray, n: int) -> np.ndarray:
    if len(samples) >= n:
        return samples[:n]
    return np.tile(samples, int(np.ceil(n / max(len(samples), 1))))[:n]


def read_stretch(noise: NoiseFile, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` samples (16 kHz mono) from a random place in ``noise``; a short file is repeated."""
    need = int(np.ceil(n * noise.rate / SAMPLE_RATE)) + 2
    start = int(rng.integers(0, noise.frames - need + 1)) if noise.frames > need else 0
    try:
        data, rate = sf.read(
            str(noise.path), start=start, frames=min(need, noise.frames), dtype="float32", always_2d=True
        )
    except Exception as exc:
        raise WorkbenchError(f"noise file {noise.path} cannot be read ({type(exc).__name__}: {exc})") from exc
    return _fit(_to_mono_16k(data, int(rate)), n)


class NoiseBank:
    """Draws noise from a set of files: a kind at random, a file of it at random, a random stretch."""

    def __init__(self, files: tuple[NoiseFile, ...]):
        if not files:
            raise ValueError("a noise bank needs at least one file")
        self.by_kind: dict[str, list[NoiseFile]] = {}
        for f in files:
            self.by_kind.setdefault(f.kind, []).append(f)
        self.kinds = sorted(self.by_kind)

    def draw(self, n: int, rng: np.random.Generator) -> tuple[NoiseFile, np.ndarray]:
        """A noise file and ``n`` non-silent samples from it."""
        for _ in range(_DRAW_ATTEMPTS):
            pool = self.by_kind[self.kinds[int(rng.integers(len(self.kinds)))]]
            noise = pool[int(rng.integers(len(pool)))]
            samples = read_stretch(noise, n, rng)
            if rms_dbfs(samples) > SILENCE_DBFS:
                return noise, samples
        raise WorkbenchError(
            f"{_DRAW_ATTEMPTS} noise stretches in a row were silent (last from {noise.path}); "
            "remove silent recordings from the noise folder"
        )


@lru_cache(maxsize=64)
def load_rir(path: Path) -> np.ndarray:
    """An impulse response as 16 kHz mono float64 from its strongest tap (the direct path) on, peak 1."""
    try:
        data, rate = sf.read(str(path), dtype="float32", always_2d=True)
    except Exception as exc:
        raise WorkbenchError(f"impulse response {path} cannot be read ({type(exc).__name__}: {exc})") from exc
    rir = _to_mono_16k(data[:, :1], int(rate)).astype(np.float64)  # first channel: one microphone
    peak = int(np.argmax(np.abs(rir)))
    if not np.abs(rir[peak]) > 0:
        raise WorkbenchError(f"impulse response {path} is all zeros; remove it")
    rir = rir[peak:]
    return rir / np.abs(rir[0])


def reverberate(speech: np.ndarray, rir: np.ndarray) -> np.ndarray:
    """Speech convolved with ``rir`` (aligned on its direct path), cut to the speech's length."""
    return fftconvolve(np.asarray(speech, dtype=np.float64), rir)[: len(speech)]

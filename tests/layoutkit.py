"""Corpora in the exact on-disk layouts users have, written by tests and benchmarks (small and synthetic).

- ``write_librispeech``: ``<split>/<speaker>/<chapter>/<speaker>-<chapter>-<nnnn>.flac`` (FLAC written
  by soundfile) with ``<speaker>-<chapter>.trans.txt`` per chapter and ``SPEAKERS.TXT`` beside the split.
- ``write_commonvoice``: ``clips/*.mp3`` (MP3 written by soundfile/libsndfile) and a TSV with Common
  Voice's columns (``accents`` in the current release format, ``accent`` in the old one).
- ``write_musan``: ``musan/<kind>/<source>/*.wav`` noise recordings, distinct content per file, some at
  8 kHz or in stereo.
- ``write_rirs``: room impulse responses (pre-delay, direct path, exponentially decaying tail).
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import soundfile as sf

WORDS = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
    "mike",
    "november",
    "oscar",
    "papa",
    "quebec",
    "romeo",
    "sierra",
    "tango",
]


def text_of(i: int, words: int = 4) -> str:
    """A transcript unique to ``i`` (no digits): ``i`` written in base len(WORDS) with code words."""
    out, n = [], i
    for _ in range(words):
        out.append(WORDS[n % len(WORDS)])
        n //= len(WORDS)
    return " ".join(out).upper()


def write_librispeech(
    root: Path,
    split: str,
    speakers: Sequence[str],
    chapters: int,
    per_chapter: int,
    duration_of: Callable[[int], float],
    speech: Callable[..., np.ndarray],
    first_text: int = 0,
    sexes: dict[str, str] | None = None,
    limit: int | None = None,
) -> tuple[Path, list[str]]:
    """A LibriSpeech split under ``root/LibriSpeech/<split>`` (at most ``limit`` utterances); returns the
    split folder and utterance ids in the order the source lists them."""
    split_dir = Path(root) / "LibriSpeech" / split
    ids = []
    n = first_text
    for speaker in speakers:
        for c in range(chapters):
            chapter = f"{int(speaker) * 10 + c}"
            folder = split_dir / speaker / chapter
            folder.mkdir(parents=True, exist_ok=True)
            lines = []
            for k in range(per_chapter):
                if limit is not None and len(ids) >= limit:
                    break
                utt = f"{speaker}-{chapter}-{k:04d}"
                sf.write(
                    str(folder / f"{utt}.flac"),
                    speech(duration_of(n), seed=n),
                    16_000,
                    format="FLAC",
                    subtype="PCM_16",
                )
                lines.append(f"{utt} {text_of(n)}")
                ids.append(utt)
                n += 1
            (folder / f"{speaker}-{chapter}.trans.txt").write_text("\n".join(lines) + "\n")
    if sexes:
        rows = [";ID  |SEX| SUBSET           |MINUTES| NAME"]
        rows += [f"{spk:<4}| {sex} | {split:<16} | 8.00 | Reader {spk}" for spk, sex in sexes.items()]
        (split_dir.parent / "SPEAKERS.TXT").write_text("\n".join(rows) + "\n")
    return split_dir, sorted(ids)


CV_COLUMNS = (
    "client_id",
    "path",
    "sentence_id",
    "sentence",
    "sentence_domain",
    "up_votes",
    "down_votes",
    "age",
    "gender",
    "accents",
    "variant",
    "locale",
    "segment",
)


def write_commonvoice(
    root: Path, tsv: str, rows: Sequence[dict], speech: Callable[..., np.ndarray], old_format: bool = False
) -> Path:
    """A Common Voice folder: ``clips/<path>`` as MP3 for every row that has ``seconds``, and ``<tsv>.tsv``.

    Each row gives ``client_id``, ``path``, ``sentence``, ``accent``, optional ``gender``/``age`` and
    ``seconds`` (no ``seconds``: the clip is listed but not written).
    """
    root = Path(root)
    (root / "clips").mkdir(parents=True, exist_ok=True)
    columns = [c if c != "accents" else ("accent" if old_format else "accents") for c in CV_COLUMNS]
    with open(root / f"{tsv}.tsv", "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(
            handle, delimiter="\t", quoting=csv.QUOTE_NONE, escapechar="\\", lineterminator="\n"
        )
        writer.writerow(columns)
        for i, row in enumerate(rows):
            if row.get("seconds"):
                write_mp3(
                    root / "clips" / row["path"], speech(row["seconds"], rate=48_000, seed=1000 + i), 48_000
                )
            values = {
                "client_id": row["client_id"],
                "path": row["path"],
                "sentence_id": f"s{i}",
                "sentence": row["sentence"],
                "sentence_domain": "",
                "up_votes": "2",
                "down_votes": "0",
                "age": row.get("age", ""),
                "gender": row.get("gender", ""),
                "accents": row.get("accent", ""),
                "accent": row.get("accent", ""),
                "variant": "",
                "locale": "en",
                "segment": "",
            }
            writer.writerow([values[c] for c in columns])
    return root


def write_mp3(path: Path, samples: np.ndarray, rate: int) -> None:
    """MP3 through libsndfile (1.1+ writes MPEG layer III); raises if this libsndfile cannot."""
    if "MP3" not in sf.available_formats():
        raise RuntimeError(f"libsndfile {sf.__libsndfile_version__} cannot write MP3")
    sf.write(str(path), samples, rate, format="MP3", subtype="MPEG_LAYER_III")


def _noise(n: int, seed: int, colour: float) -> np.ndarray:
    rng = np.random.default_rng(seed)
    spectrum = np.fft.rfft(rng.standard_normal(n))
    freqs = np.maximum(np.fft.rfftfreq(n), 1.0 / n)
    noise = np.fft.irfft(spectrum / freqs ** (colour / 2), n)
    return (0.2 * noise / np.max(np.abs(noise))).astype(np.float32)


def write_musan(root: Path) -> dict[str, list[Path]]:
    """``musan/noise/{free-sound,sound-bible}/`` (7 files) and ``musan/music/fma/`` (3 files); kind ->
    files. One noise file is 8 kHz, one is stereo 44.1 kHz, one is shorter than a clip (it is repeated)."""
    musan = Path(root) / "musan"
    plan = [
        ("noise", "free-sound", 16_000, 1, 6.0),
        ("noise", "free-sound", 8_000, 1, 5.0),
        ("noise", "free-sound", 44_100, 2, 4.0),
        ("noise", "free-sound", 16_000, 1, 1.2),
        ("noise", "sound-bible", 16_000, 1, 7.0),
        ("noise", "sound-bible", 16_000, 1, 3.0),
        ("noise", "sound-bible", 22_050, 1, 5.0),
        ("music", "fma", 16_000, 1, 8.0),
        ("music", "fma", 16_000, 2, 6.0),
        ("music", "fma", 16_000, 1, 5.0),
    ]
    out: dict[str, list[Path]] = {}
    for i, (kind, origin, rate, channels, seconds) in enumerate(plan):
        n = int(seconds * rate)
        data = _noise(n, 500 + i, colour=0.0 if kind == "noise" and i % 2 else 1.0)
        if kind == "music":
            t = np.arange(n) / rate
            data = (
                0.15 * np.sin(2 * np.pi * (220 + 40 * i) * t) * (1 + np.sin(2 * np.pi * 2 * t)) + 0.3 * data
            )
        if channels == 2:
            data = np.stack([data, np.roll(data, 17)], axis=1)
        path = musan / kind / origin / f"{kind}-{origin}-{i:04d}.wav"
        path.parent.mkdir(parents=True, exist_ok=True)
        sf.write(str(path), data.astype(np.float32), rate, subtype="PCM_16")
        out.setdefault(kind, []).append(path)
    return out


def make_rir(seconds: float, rt60: float, rate: int, seed: int, predelay_s: float = 0.004) -> np.ndarray:
    """A synthetic impulse response: silence, a direct-path tap, then exponentially decaying noise."""
    rng = np.random.default_rng(seed)
    n = int(seconds * rate)
    t = np.arange(n) / rate
    tail = rng.standard_normal(n) * np.exp(-6.9 * t / rt60) * 0.3
    start = int(predelay_s * rate)
    rir = np.zeros(n)
    rir[start] = 1.0
    rir[start + int(0.002 * rate) :] += tail[: n - start - int(0.002 * rate)]
    return (rir / np.max(np.abs(rir)) * 0.9).astype(np.float32)


def write_rirs(root: Path) -> list[Path]:
    """``rirs/{small-room,large-room}/*.wav``: three impulse responses per room size (one at 8 kHz)."""
    paths = []
    for kind, rt60 in (("small-room", 0.25), ("large-room", 0.8)):
        for k in range(3):
            rate = 8_000 if k == 2 else 16_000
            path = Path(root) / "rirs" / kind / f"{kind}-{k}.wav"
            path.parent.mkdir(parents=True, exist_ok=True)
            sf.write(
                str(path),
                make_rir(rt60 * 1.2, rt60, rate, seed=700 + k + (10 if kind == "large-room" else 0)),
                rate,
                subtype="FLOAT",
            )
            paths.append(path)
    return paths

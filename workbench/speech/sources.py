"""External speech sources: Hugging Face datasets, a folder of audio files, a JSONL manifest.

Each source yields ``Clip`` objects (16 kHz mono float32 plus an ``Utterance`` record) and reports
inputs it could not use as ``Skipped`` with a reason. Fixes (resampling, downmixing, text
normalisation) are recorded on the utterance. The synthetic TTS source lives in ``synthetic.py``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Union

from workbench.config import MAJORITY_ACCENT
from workbench.errors import WorkbenchError
from workbench.speech.audio import AudioProblem, PreparedAudio, prepare, read_audio
from workbench.speech.records import Clip, Skipped, Utterance
from workbench.speech.text import normalise_text

AUDIO_SUFFIXES = (".wav", ".flac", ".ogg", ".mp3", ".aiff", ".aif", ".au")
Item = Union[Clip, Skipped]


def _clip_id(source: str, key: str) -> str:
    return hashlib.sha256(f"{source}|{key}".encode()).hexdigest()[:12]


def make_clip(
    audio: PreparedAudio,
    raw_text: str | None,
    source: str,
    key: str,
    speaker: str | None = None,
    accent: str | None = None,
    condition: str | None = None,
) -> Item:
    """Normalise text, attach metadata; an empty transcript becomes a Skipped item."""
    if raw_text is not None and not isinstance(raw_text, str):
        raw_text = str(raw_text)
    if raw_text is None or not raw_text.strip():
        return Skipped(key, "empty transcript")
    digits = sorted({ch for ch in raw_text if ch.isdigit()})
    if digits:
        # dropping digits would leave a transcript that no longer says what the audio says
        return Skipped(key, f"transcript has digits ({''.join(digits)}) the alphabet cannot spell; "
                            f"write numbers as words: {raw_text[:60]!r}")
    norm = normalise_text(raw_text)
    if not norm.text:
        return Skipped(key, f"transcript has no characters of the model's alphabet: {raw_text[:60]!r}")
    fixes = list(audio.fixes)
    if norm.dropped_chars:
        fixes.append(f"folded or dropped characters outside the alphabet: {norm.dropped_chars!r}")
    accent = (accent or MAJORITY_ACCENT).strip().lower()
    record = Utterance(
        id=_clip_id(source, key),
        text=norm.text,
        speaker=speaker or f"{source}:{key}",
        voice=speaker or "unknown",
        accent=accent,
        condition=condition or ("quiet" if accent == MAJORITY_ACCENT else "accented"),
        duration_s=round(audio.duration_s, 4),
        source=source,
        fixes=fixes,
        extra={"original": key},
    )
    return Clip(record, audio.samples)


def _read(path: Path) -> PreparedAudio | Skipped:
    try:
        return read_audio(path)
    except AudioProblem as exc:
        return Skipped(str(path), str(exc))


@dataclass
class AudioFolderSource:
    """Audio files with transcripts: ``x.wav`` + ``x.txt``, or a ``transcripts.tsv`` (file<TAB>text).

    Optional ``speakers.tsv`` (file<TAB>speaker<TAB>accent) supplies speakers and accents; else the
    first folder level below ``root`` is taken as the speaker.
    """

    root: Path

    def _table(self, name: str) -> dict[str, list[str]]:
        path = self.root / name
        table: dict[str, list[str]] = {}
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                parts = line.rstrip("\n").split("\t")
                if parts and parts[0]:
                    table[parts[0]] = parts[1:]
        return table

    def __iter__(self) -> Iterator[Item]:
        if not self.root.is_dir():
            raise WorkbenchError(f"audio folder {self.root} does not exist or is not a folder")
        transcripts = self._table("transcripts.tsv")
        speakers = self._table("speakers.tsv")
        files = sorted(p for p in self.root.rglob("*") if p.suffix.lower() in AUDIO_SUFFIXES)
        if not files:
            raise WorkbenchError(f"no audio files ({', '.join(AUDIO_SUFFIXES)}) under {self.root}")
        for path in files:
            rel = path.relative_to(self.root).as_posix()
            sidecar = path.with_suffix(".txt")
            text = sidecar.read_text(encoding="utf-8") if sidecar.exists() else (transcripts.get(rel) or [None])[0]
            audio = _read(path)
            if isinstance(audio, Skipped):
                yield Skipped(rel, audio.reason)
                continue
            spk = speakers.get(rel, [])
            speaker = spk[0] if spk else (rel.split("/")[0] if "/" in rel else None)
            accent = spk[1] if len(spk) > 1 else None
            yield make_clip(audio, text, f"folder:{self.root.name}", rel, speaker, accent)


@dataclass
class ManifestSource:
    """JSONL lines with ``audio`` (path, relative to the manifest) and ``text``; optional
    ``speaker``, ``accent``, ``condition``."""

    path: Path

    def __iter__(self) -> Iterator[Item]:
        if not self.path.exists():
            raise WorkbenchError(f"manifest {self.path} not found")
        for number, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            key = f"line {number}"
            try:
                obj: dict[str, Any] = json.loads(line)
            except json.JSONDecodeError as exc:
                yield Skipped(key, f"not valid JSON: {exc}")
                continue
            if "audio" not in obj:
                yield Skipped(key, "no 'audio' field")
                continue
            audio_path = Path(obj["audio"])
            if not audio_path.is_absolute():
                audio_path = self.path.parent / audio_path
            audio = _read(audio_path)
            if isinstance(audio, Skipped):
                yield Skipped(f"{key} ({obj['audio']})", audio.reason)
                continue
            yield make_clip(audio, obj.get("text"), f"manifest:{self.path.name}", str(obj["audio"]),
                            obj.get("speaker"), obj.get("accent"), obj.get("condition"))


@dataclass
class HFDatasetSource:
    """A Hugging Face dataset: a hub id (online) or a folder made by ``save_to_disk``.

    Audio is decoded here with soundfile from the stored bytes or path, so ``datasets``' own
    decoder (and its optional libraries) is not needed.
    """

    name: str
    split: str = "train"
    audio_column: str = "audio"
    text_column: str = "text"
    speaker_column: str | None = None
    accent_column: str | None = None

    def _load(self) -> Any:
        try:
            import datasets
        except ImportError as exc:
            raise WorkbenchError("Hugging Face datasets is not installed: pip install 'workbench[data]'") from exc
        path = Path(self.name)
        try:
            if path.exists():
                ds = datasets.load_from_disk(str(path))
                if isinstance(ds, datasets.DatasetDict):
                    if self.split not in ds:
                        raise WorkbenchError(f"dataset {path} has splits {list(ds)}, not {self.split!r}")
                    ds = ds[self.split]
            else:
                ds = datasets.load_dataset(self.name, split=self.split)
        except WorkbenchError:
            raise
        except Exception as exc:
            raise WorkbenchError(
                f"could not load dataset {self.name!r} ({type(exc).__name__}: {str(exc)[:200]}). "
                "Offline, save it with save_to_disk on a connected machine and pass that folder."
            ) from exc
        for column in (self.audio_column, self.text_column):
            if column not in ds.column_names:
                raise WorkbenchError(f"dataset has columns {ds.column_names}; no column {column!r} "
                                     "(set --audio-column / --text-column)")
        if hasattr(ds.features.get(self.audio_column), "decode"):
            ds = ds.cast_column(self.audio_column, datasets.Audio(decode=False))
        return ds

    def __iter__(self) -> Iterator[Item]:
        ds = self._load()
        label = Path(self.name).name if Path(self.name).exists() else self.name
        for index, row in enumerate(ds):
            key = f"{label}[{index}]"  # independent of where a saved dataset lives: ids stay stable
            cell = row[self.audio_column]
            audio = self._decode(cell, key)
            if isinstance(audio, Skipped):
                yield audio
                continue
            speaker = str(row[self.speaker_column]) if self.speaker_column else None
            accent = str(row[self.accent_column]) if self.accent_column else None
            yield make_clip(audio, row[self.text_column], f"hf:{Path(self.name).name}", key, speaker, accent)

    @staticmethod
    def _decode(cell: Any, key: str) -> PreparedAudio | Skipped:
        try:
            if isinstance(cell, dict) and cell.get("bytes"):
                return read_audio(cell["bytes"])
            if isinstance(cell, dict) and cell.get("path"):
                return read_audio(Path(cell["path"]))
            if isinstance(cell, dict) and "array" in cell:
                return prepare(cell["array"], int(cell["sampling_rate"]))
        except AudioProblem as exc:
            return Skipped(key, str(exc))
        return Skipped(key, "audio cell has neither bytes, path nor array")


def collect(items: Iterable[Item]) -> tuple[list[Clip], list[Skipped]]:
    clips: list[Clip] = []
    skipped: list[Skipped] = []
    for item in items:
        (clips if isinstance(item, Clip) else skipped).append(item)  # type: ignore[arg-type]
    return clips, skipped

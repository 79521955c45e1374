"""External speech sources: Hugging Face datasets, a folder of audio files, a JSONL manifest.

Each source lists its utterances as undecoded ``Entry`` objects (``entries()``); iterating a source
yields ``Clip`` objects (16 kHz mono float32 plus an ``Utterance`` record) and reports inputs it could
not use as ``Skipped`` with a reason. Fixes (resampling, downmixing, text normalisation) are recorded
on the utterance. Corpus layouts (LibriSpeech, Common Voice) live in ``layouts/``; the synthetic TTS
source in ``synthetic.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.inputs.manifest import read_manifest
from workbench.inputs.transcripts import read_table, read_transcript
from workbench.speech.entries import AudioRef, Entry, Item, load_entry
from workbench.speech.records import Clip, Skipped

AUDIO_SUFFIXES = (".wav", ".flac", ".ogg", ".mp3", ".aiff", ".aif", ".au")


def _missing(path: Path) -> str | None:
    return None if path.is_file() else f"unreadable or corrupt audio (no file {path})"


class EntrySource:
    """Base of every source: ``entries()`` lists the utterances undecoded; iterating decodes them.

    ``light_entries``: entries point at files (cheap to list all at once); False when they carry audio.
    """

    light_entries = True

    def entries(self) -> Iterator[Entry]:
        raise NotImplementedError

    def __iter__(self) -> Iterator[Item]:
        return (load_entry(entry) for entry in self.entries())


@dataclass
class AudioFolderSource(EntrySource):
    """Audio files with transcripts: ``x.wav`` + ``x.txt``, or a ``transcripts.tsv`` (file<TAB>text).

    Optional ``speakers.tsv`` (file<TAB>speaker<TAB>accent) supplies speakers and accents; else the
    first folder level below ``root`` is taken as the speaker.
    """

    root: Path

    def entries(self) -> Iterator[Entry]:
        if not self.root.is_dir():
            raise WorkbenchError(f"audio folder {self.root} does not exist or is not a folder")
        transcripts = read_table(self.root / "transcripts.tsv")
        speakers = read_table(self.root / "speakers.tsv")
        files = sorted(p for p in self.root.rglob("*") if p.suffix.lower() in AUDIO_SUFFIXES)
        if not files:
            raise WorkbenchError(f"no audio files ({', '.join(AUDIO_SUFFIXES)}) under {self.root}")
        # every transcript is read (and checked: UTF-8) before the first entry is handed on
        texts = {
            path: read_transcript(path.with_suffix(".txt"))
            if path.with_suffix(".txt").exists()
            else next(iter(transcripts.get(path.relative_to(self.root).as_posix()) or []), None)
            for path in files
        }
        for path in files:
            rel = path.relative_to(self.root).as_posix()
            text = texts[path]
            spk = speakers.get(rel, [])
            speaker = spk[0] if spk else (rel.split("/")[0] if "/" in rel else None)
            accent = spk[1] if len(spk) > 1 else None
            yield Entry(f"folder:{self.root.name}", rel, path, text, speaker, accent)
        listed = {path.relative_to(self.root).as_posix() for path in files}
        for rel in sorted(set(transcripts) - listed):  # a transcript whose audio is not there
            yield Entry(
                f"folder:{self.root.name}",
                rel,
                None,
                None,
                problem=f"transcripts.tsv names {rel}, which is missing",
            )


@dataclass
class ManifestSource(EntrySource):
    """JSONL lines with ``audio`` (path, relative to the manifest) and ``text``; optional
    ``speaker``, ``accent``, ``condition``."""

    path: Path

    def entries(self) -> Iterator[Entry]:
        if not self.path.exists():
            raise WorkbenchError(f"manifest {self.path} not found")
        source = f"manifest:{self.path.name}"
        records, skipped = read_manifest(self.path)  # the whole file is checked before any entry is handed on
        for key, reason in skipped:
            yield Entry(source, key, None, None, problem=reason)
        for record in records:
            audio_path = Path(record.audio)
            if not audio_path.is_absolute():
                audio_path = self.path.parent / audio_path
            yield Entry(
                source,
                record.audio,
                audio_path,
                record.text,
                record.speaker,
                record.accent,
                record.condition,
                problem=_missing(audio_path),
                where=f"line {record.line} ({record.audio})",
            )


@dataclass
class HFDatasetSource(EntrySource):
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
    labelled: bool = True  # False: the transcript column may be absent (an unlabelled import ignores it)
    light_entries = False  # rows carry their audio bytes

    def _load(self) -> Any:
        try:
            import datasets
        except ImportError as exc:
            raise WorkbenchError(
                "Hugging Face datasets is not installed: pip install 'workbench[data]'"
            ) from exc
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
        for column in (self.audio_column, self.text_column) if self.labelled else (self.audio_column,):
            if column not in ds.column_names:
                raise WorkbenchError(
                    f"dataset has columns {ds.column_names}; no column {column!r} "
                    "(set --audio-column / --text-column)"
                )
        if hasattr(ds.features.get(self.audio_column), "decode"):
            ds = ds.cast_column(self.audio_column, datasets.Audio(decode=False))
        return ds

    def entries(self) -> Iterator[Entry]:
        ds = self._load()
        label = Path(self.name).name if Path(self.name).exists() else self.name
        source = f"hf:{Path(self.name).name}"
        for index, row in enumerate(ds):
            key = f"{label}[{index}]"  # independent of where a saved dataset lives: ids stay stable
            audio = self._audio_ref(row[self.audio_column])
            speaker = str(row[self.speaker_column]) if self.speaker_column else None
            accent = str(row[self.accent_column]) if self.accent_column else None
            yield Entry(
                source,
                key,
                audio,
                row.get(self.text_column),
                speaker,
                accent,
                problem=None if audio is not None else "audio cell has neither bytes, path nor array",
            )

    @staticmethod
    def _audio_ref(cell: Any) -> AudioRef | None:
        if isinstance(cell, dict) and cell.get("bytes"):
            return bytes(cell["bytes"])
        if isinstance(cell, dict) and cell.get("path"):
            return Path(cell["path"])
        if isinstance(cell, dict) and "array" in cell:
            return (cell["array"], int(cell["sampling_rate"]))
        return None


def collect(items: Iterable[Item]) -> tuple[list[Clip], list[Skipped]]:
    clips: list[Clip] = []
    skipped: list[Skipped] = []
    for item in items:
        (clips if isinstance(item, Clip) else skipped).append(item)  # type: ignore[arg-type]
    return clips, skipped

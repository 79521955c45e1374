"""LibriSpeech layout: ``<speaker>/<chapter>/<speaker>-<chapter>-<n>.flac`` with one
``<speaker>-<chapter>.trans.txt`` per chapter (``<utterance-id> <TRANSCRIPT>`` lines).

Point it at a split folder (``LibriSpeech/test-clean``) or at ``LibriSpeech`` itself (every split
below it). The speaker is the first folder, prefixed ``librispeech:`` (LibriSpeech speaker ids are
unique across its splits, so a train and a test import can be checked for shared speakers);
``SPEAKERS.TXT`` next to the splits, when present, gives each speaker's sex. LibriSpeech is read
American English, so every clip gets the majority accent.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from workbench.errors import WorkbenchError
from workbench.speech.entries import Entry
from workbench.speech.sources import EntrySource

TRANSCRIPT_SUFFIX = ".trans.txt"


def _speaker_sexes(root: Path) -> dict[str, str]:
    """Speaker id -> F/M from ``SPEAKERS.TXT`` in ``root`` or up to two folders above it."""
    for folder in (root, root.parent, root.parent.parent):
        path = folder / "SPEAKERS.TXT"
        if path.is_file():
            out = {}
            for line in path.read_text(encoding="utf-8-sig", errors="replace").splitlines():
                if line.startswith(";") or "|" not in line:
                    continue
                fields = [f.strip() for f in line.split("|")]
                if len(fields) >= 2 and fields[0]:
                    out[fields[0]] = fields[1]
            return out
    return {}


@dataclass
class LibriSpeechSource(EntrySource):
    root: Path

    def entries(self) -> Iterator[Entry]:
        root = Path(self.root)
        if not root.is_dir():
            raise WorkbenchError(f"LibriSpeech folder {root} does not exist or is not a folder")
        transcripts = sorted(root.rglob(f"*{TRANSCRIPT_SUFFIX}"))
        if not transcripts:
            raise WorkbenchError(
                f"no <speaker>-<chapter>{TRANSCRIPT_SUFFIX} files under {root}; point --path at a "
                "LibriSpeech split folder such as LibriSpeech/test-clean"
            )
        sexes = _speaker_sexes(root)
        source = f"librispeech:{root.name}"
        listed: set[Path] = set()
        for trans in transcripts:
            speaker, chapter = trans.parent.parent.name, trans.parent.name
            for number, line in enumerate(
                trans.read_text(encoding="utf-8-sig", errors="replace").splitlines(), 1
            ):
                if not line.strip():
                    continue
                utt_id, _, text = line.strip().partition(" ")
                audio = trans.parent / f"{utt_id}.flac"
                listed.add(audio)
                extra = {"chapter": chapter, **({"gender": sexes[speaker]} if speaker in sexes else {})}
                problem = (
                    None
                    if audio.is_file()
                    else f"{trans.name} line {number} names {audio.name}, which is missing"
                )
                yield Entry(source, utt_id, audio, text, f"librispeech:{speaker}", None, None, extra, problem)
        for audio in sorted(root.rglob("*.flac")):
            if audio not in listed:
                yield Entry(
                    source,
                    audio.stem,
                    None,
                    None,
                    problem=f"no transcript line for {audio.name} in its chapter's {TRANSCRIPT_SUFFIX}",
                )

"""Common Voice layout: ``clips/*.mp3`` and ``train|dev|test|validated.tsv`` (tab separated, with
``client_id``, ``path``, ``sentence``, ``accents`` or the older ``accent``, ``gender``, ``age``).

The speaker is the ``client_id`` (prefixed ``commonvoice:``). Accent labels become the accented
condition's labels: the speaker's first listed accent, mapped to a short name (``United States
English`` -> ``us``, ``England English`` -> ``england``; unknown labels are slugged). ``us`` is the
majority accent (the quiet condition); clips whose speaker gave no accent get accent ``unknown`` and
their own condition, ``accent-unknown``, so they are neither counted as majority nor as accented
speech. MP3 is decoded by libsndfile (1.1 and later read MP3), so ffmpeg is not needed.
"""

from __future__ import annotations

import csv
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import soundfile as sf

from workbench.config import UNLABELLED_ACCENT, UNLABELLED_ACCENT_CONDITION
from workbench.errors import WorkbenchError
from workbench.inputs.problem import Where
from workbench.speech.entries import Entry
from workbench.speech.sources import EntrySource

SPLITS = ("train", "dev", "test", "validated", "other", "invalidated")
REQUIRED_COLUMNS = ("client_id", "path", "sentence")

# Common Voice's accent labels (old short codes and the newer free-form names) -> short names.
ACCENT_NAMES = {
    "united states english": "us",
    "england english": "england",
    "canadian english": "canada",
    "australian english": "australia",
    "scottish english": "scotland",
    "irish english": "ireland",
    "new zealand english": "newzealand",
    "welsh english": "wales",
    "india and south asia (india, pakistan, sri lanka)": "indian",
    "southern african (south africa, zimbabwe, namibia)": "african",
    "west indies and bermuda (bahamas, bermuda, jamaica, trinidad)": "bermuda",
    "filipino": "philippines",
    "hong kong english": "hongkong",
    "malaysian english": "malaysia",
    "singaporean english": "singapore",
}
_SLUG = re.compile(r"[^a-z0-9]+")


def accent_name(label: str) -> str:
    """A Common Voice accent label as a short lower-case name ('' when there is none)."""
    first = label.split("|")[0].strip().lower()
    if not first:
        return ""
    return ACCENT_NAMES.get(first) or _SLUG.sub("-", first).strip("-")[:40]


def require_mp3_support() -> None:
    """A user error naming what to install when this libsndfile cannot decode MP3."""
    if "MP3" not in sf.available_formats():
        raise WorkbenchError(
            f"Common Voice clips are MP3, and the libsndfile this soundfile uses "
            f"({sf.__libsndfile_version__}) cannot read MP3. Install soundfile 0.12.1 or later, whose wheels "
            f"bundle libsndfile 1.2 with MP3 ({sys.executable} -m pip install -U soundfile), or a system "
            "libsndfile >= 1.1 built with mpg123; or convert the clips to FLAC and use --layout manifest."
        )


@dataclass
class CommonVoiceSource(EntrySource):
    root: Path
    split: str = "test"  # a TSV name (train, dev, test, validated, ...) or a path to a .tsv file

    def tsv_path(self) -> Path:
        if self.split.endswith(".tsv"):
            path = Path(self.split)
            return path if path.is_absolute() else Path(self.root) / path
        return Path(self.root) / f"{self.split}.tsv"

    def entries(self) -> Iterator[Entry]:
        root, tsv = Path(self.root), self.tsv_path()
        if not root.is_dir():
            raise WorkbenchError(f"Common Voice folder {root} does not exist or is not a folder")
        if not tsv.is_file():
            have = sorted(p.name for p in root.glob("*.tsv"))
            raise WorkbenchError(
                f"no {tsv.name} in {root} (it has {', '.join(have) or 'no .tsv files'}); "
                f"pick one with --split ({', '.join(SPLITS)}) or give the .tsv path"
            )
        lines_read = [1]
        try:
            yield from self._rows(root, tsv, lines_read)
        except (
            UnicodeDecodeError
        ) as exc:  # read in blocks: the bad byte is somewhere after the last whole line
            raise Where(f"Common Voice table {tsv}", "save it as UTF-8").fail(
                f"not UTF-8 (byte 0x{exc.object[exc.start]:02x} after line {lines_read[0]})"
            ) from exc

    def _rows(self, root: Path, tsv: Path, lines_read: list[int]) -> Iterator[Entry]:
        with open(tsv, encoding="utf-8-sig", newline="") as handle:
            reader = csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
            missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                raise WorkbenchError(
                    f"{tsv} has no column(s) {missing}; a Common Voice TSV has "
                    f"{', '.join(REQUIRED_COLUMNS)}, sentence, accents, gender, age"
                )
            accent_column = "accents" if "accents" in (reader.fieldnames or []) else "accent"
            source = f"commonvoice:{root.name}"
            checked_mp3 = False
            for number, row in enumerate(reader, 2):
                lines_read[0] = number
                clip = (row.get("path") or "").strip()
                if not clip:
                    yield Entry(source, f"{tsv.name} line {number}", None, None, problem="no clip path")
                    continue
                if clip.lower().endswith(".mp3") and not checked_mp3:
                    require_mp3_support()
                    checked_mp3 = True
                audio = root / "clips" / clip
                label = (row.get(accent_column) or "").strip()
                accent = accent_name(label)
                extra = {
                    k: (row.get(k) or "").strip() for k in ("gender", "age") if (row.get(k) or "").strip()
                }
                if label:
                    extra["accent_label"] = label
                client = (row.get("client_id") or "").strip()
                yield Entry(
                    source,
                    clip,
                    audio,
                    row.get("sentence"),
                    f"commonvoice:{client}" if client else None,
                    accent or UNLABELLED_ACCENT,
                    None if accent else UNLABELLED_ACCENT_CONDITION,
                    extra,
                    None if audio.is_file() else f"clip {clip} listed in {tsv.name} is missing from clips/",
                )

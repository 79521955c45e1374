"""Speech sets under ``calib_sets/``: the list, a set as a table, one utterance's audio bytes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from workbench.dashboard.paths import ArtifactRoots, resolve
from workbench.speech.store import CARD, MANIFEST, SpeechSet, load_set

COLUMNS = [
    "id",
    "condition",
    "bucket",
    "duration_s",
    "snr_db",
    "requested_snr_db",
    "level_dbfs",
    "noise_kind",
    "accent",
    "speaker",
    "voice",
    "text",
    "source",
    "fixes",
    "audio",
]


def set_names(roots: ArtifactRoots) -> list[str]:
    """Names of complete sets (manifest and card present), sorted."""
    if not roots.calib_sets.is_dir():
        return []
    return sorted(
        p.name
        for p in roots.calib_sets.iterdir()
        if p.is_dir() and not p.name.startswith(".") and (p / CARD).is_file() and (p / MANIFEST).is_file()
    )


@dataclass
class SetView:
    """A loaded set and its utterances as a DataFrame (one row per utterance, manifest order)."""

    speech_set: SpeechSet
    table: pd.DataFrame

    @property
    def card(self) -> dict:
        return self.speech_set.card


def load_set_view(name: str, roots: ArtifactRoots) -> SetView:
    """Load set ``name`` (a folder under calib_sets/); refused outside it."""
    path = resolve(name, "calib_sets", roots)
    for part in (CARD, MANIFEST):  # the files load_set reads must not lead out either
        resolve(path / part, "calib_sets", roots)
    speech_set = load_set(path)
    rows = []
    for u in speech_set.utterances:
        row = u.to_json()
        row["fixes"] = ", ".join(u.fixes)
        rows.append({c: row.get(c) for c in COLUMNS})
    table = pd.DataFrame(rows, columns=COLUMNS)
    return SetView(speech_set, table)


def audio_bytes(view: SetView, utterance_id: str, roots: ArtifactRoots) -> bytes:
    """The stored FLAC of one utterance, read through the resolver (the manifest's path is not trusted)."""
    match = view.table.loc[view.table["id"] == utterance_id, "audio"]
    if match.empty:
        raise KeyError(utterance_id)
    path = resolve(view.speech_set.path / str(match.iloc[0]), "calib_sets", roots)
    return Path(path).read_bytes()


def strata_frame(card: dict) -> pd.DataFrame:
    """Counts per condition x duration bucket from the card (long form: condition, bucket, count)."""
    return pd.DataFrame(
        [
            {"condition": c, "bucket": b, "count": n}
            for c, row in card["strata"].items()
            for b, n in row.items()
        ],
        columns=["condition", "bucket", "count"],
    )

"""``data recard``: accept a stored set's files as they are now, by recomputing its card from them.

A set whose files changed after it was built is refused by every step (``workbench.speech.integrity``). When
the change was meant (a transcript corrected by hand, a clip replaced or removed with its manifest line),
``recard_set`` checks the set again as ``load_set`` does (no links, every manifest line, no utterance listed
twice), decodes every clip and checks its duration against the manifest's, then writes a new card (counts,
durations, content hash; the old hash is kept under ``made.recarded``) and the index. The manifest and audio
are not touched; the engine profile and the build's checks stay as recorded.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import soundfile as sf

from workbench import __version__
from workbench.artifacts import sha256_file, write_json_atomic, write_text_atomic
from workbench.config import SAMPLE_RATE
from workbench.errors import WorkbenchError
from workbench.speech.audio import AudioProblem, load_flac
from workbench.speech.integrity import content_hash, index_files
from workbench.speech.records import Skipped
from workbench.speech.store import (
    CARD,
    CARD_MD,
    MANIFEST,
    SpeechSet,
    build_card,
    load_set,
    render_card_markdown,
)

DURATION_TOLERANCE_S = 2.0 / SAMPLE_RATE + 1e-4  # the manifest keeps durations to 4 decimals


@dataclass
class Recarded:
    """A re-carded set and its content hash before and after."""

    speech_set: SpeechSet
    old_hash: str

    def lines(self) -> list[str]:
        new = self.speech_set.content_hash
        if new == self.old_hash:
            return [f"set {self.speech_set.name}: its files match its card ({new[:12]}); nothing to re-card"]
        return [
            f"set {self.speech_set.name} re-carded: content hash {self.old_hash[:12]} -> {new[:12]} "
            f"({self.speech_set.card['utterances']} utterances)",
            "records and calibration caches made from the old content name the old hash; calibrate again",
        ]


def _audio_hash(speech_set: SpeechSet, rel: str, manifest_s: float) -> str:
    path = speech_set.path / rel
    try:
        samples = load_flac(path)
    except (sf.LibsndfileError, AudioProblem, RuntimeError, OSError) as exc:
        raise WorkbenchError(
            f"set {speech_set.name}: audio {path} cannot be decoded ({exc}); replace it or remove its manifest line"
        ) from None
    seconds = len(samples) / SAMPLE_RATE
    if abs(seconds - manifest_s) > DURATION_TOLERANCE_S:
        raise WorkbenchError(
            f"set {speech_set.name}: audio {path} runs {seconds:.4f} s but its manifest line says "
            f"{manifest_s} s; correct duration_s in {MANIFEST} (or rebuild the set)"
        )
    return sha256_file(path)


def recard_set(name_or_path: str | Path, root: Path | None = None) -> Recarded:
    """Recompute set ``name_or_path``'s card and index from its files (see the module docstring)."""
    speech_set = load_set(name_or_path, root, verify=False)  # links, manifest lines, repeats: refused here
    old = speech_set.content_hash
    if not speech_set.utterances:
        raise WorkbenchError(f"set {speech_set.name}: its manifest lists no utterances; rebuild the set")
    hashes = {u.audio: _audio_hash(speech_set, u.audio, u.duration_s) for u in speech_set.utterances}
    manifest = (speech_set.path / MANIFEST).read_bytes()
    new = content_hash(manifest, [hashes[u.audio] for u in speech_set.utterances])
    card = speech_set.card
    if new == old:  # nothing changed: the card stays, the index is brought up to date
        index_files(speech_set.path, hashes)
        return Recarded(speech_set, old)
    made = {
        **card["made"],
        "recarded": {"from_hash": old, "workbench": __version__, "command": " ".join(sys.argv)},
    }
    skipped = [
        Skipped(str(s.get("item", "")), str(s.get("reason", "")))
        for s in card["skipped"]
        if isinstance(s, dict)
    ]
    recorded = card.get("checks")
    checks: dict[str, Any] = recorded if isinstance(recorded, dict) else {}
    new_card = build_card(speech_set.utterances, new, made, skipped, checks, card.get("profile"))
    index_files(speech_set.path, hashes)
    write_json_atomic(speech_set.path / CARD, new_card)
    write_text_atomic(speech_set.path / CARD_MD, render_card_markdown(speech_set.name, new_card))
    return Recarded(SpeechSet(speech_set.path, new_card, speech_set.utterances), old)

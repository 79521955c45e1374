"""One utterance of a source before its audio is decoded, and how it becomes a ``Clip``.

Every source lists its utterances as ``Entry`` objects (where the audio is, the raw transcript,
speaker, accent, condition, extra labels) without decoding anything, so a whole corpus can be listed
in a few megabytes and decoded one utterance at a time, in any process. ``load_entry`` decodes, fixes
and checks one entry; ``make_clip`` normalises the transcript and fills the ``Utterance`` record.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from workbench.config import MAJORITY_ACCENT
from workbench.speech.audio import (
    AudioProblem,
    ImplausibleAudio,
    PreparedAudio,
    UnreadableAudio,
    prepare,
    read_audio,
)
from workbench.speech.records import Clip, Skipped, Utterance
from workbench.speech.text import normalise_text

Item = Clip | Skipped
AudioRef = Path | bytes | tuple[np.ndarray, int]  # a file, encoded bytes, or (samples, rate)


@dataclass(frozen=True)
class Entry:
    """Where one utterance's audio is and what is known about it; nothing decoded yet.

    ``key`` names the input in skip reasons and ``extra["original"]``; with ``source`` it fixes the
    clip id, so it must not depend on where the corpus lies on disk.
    """

    source: str
    key: str
    audio: AudioRef | None
    text: Any
    speaker: str | None = None
    accent: str | None = None
    condition: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    problem: str | None = None  # known to be unusable before decoding (e.g. the audio file is missing)
    where: str | None = None  # how skip reasons name this input when its audio is unusable (default: key)


def clip_id(source: str, key: str) -> str:
    return hashlib.sha256(f"{source}|{key}".encode()).hexdigest()[:12]


def _checked_transcript(raw_text: str | None, key: str) -> tuple[str, list[str]] | Skipped:
    """The normalised transcript and the fix it needed (if any), or why it cannot label the clip."""
    if raw_text is None or not raw_text.strip():
        return Skipped(key, "empty transcript")
    digits = sorted({ch for ch in raw_text if ch.isdigit()})
    if digits:
        # dropping digits would leave a transcript that no longer says what the audio says
        return Skipped(
            key,
            f"transcript has digits ({''.join(digits)}) the alphabet cannot spell; "
            f"write numbers as words: {raw_text[:60]!r}",
        )
    norm = normalise_text(raw_text)
    if not norm.text:
        return Skipped(key, f"transcript has no characters of the model's alphabet: {raw_text[:60]!r}")
    fixes = (
        [f"folded or dropped characters outside the alphabet: {norm.dropped_chars!r}"]
        if norm.dropped_chars
        else []
    )
    return norm.text, fixes


def make_clip(
    audio: PreparedAudio,
    raw_text: str | None,
    source: str,
    key: str,
    speaker: str | None = None,
    accent: str | None = None,
    condition: str | None = None,
    extra: dict[str, Any] | None = None,
    labelled: bool = True,
) -> Item:
    """Normalise text, attach metadata; an empty transcript becomes a Skipped item. ``labelled`` False (an
    unlabelled set): the transcript, if any, is ignored, the record's text is empty and
    ``extra["transcript_ignored"]`` says whether one was given."""
    if raw_text is not None and not isinstance(raw_text, str):
        raw_text = str(raw_text)
    if labelled:
        checked = _checked_transcript(raw_text, key)
        if isinstance(checked, Skipped):
            return checked
        norm_text, fixes = checked[0], list(audio.fixes) + checked[1]
    else:
        extra = {**(extra or {}), "transcript_ignored": raw_text is not None and bool(raw_text.strip())}
        norm_text, fixes = "", list(audio.fixes)
    accent = (accent or MAJORITY_ACCENT).strip().lower()
    record = Utterance(
        id=clip_id(source, key),
        text=norm_text,
        speaker=speaker or f"{source}:{key}",
        voice=speaker or "unknown",
        accent=accent,
        condition=condition or ("quiet" if accent == MAJORITY_ACCENT else "accented"),
        duration_s=round(audio.duration_s, 4),
        source=source,
        fixes=fixes,
        extra={"original": key, **(extra or {})},
    )
    return Clip(record, audio.samples)


def decode(audio: AudioRef) -> PreparedAudio:
    """Decode and prepare an entry's audio; raises ``AudioProblem`` when it cannot be used."""
    if isinstance(audio, tuple):
        return prepare(audio[0], int(audio[1]))
    return read_audio(audio)


def load_entry(entry: Entry, labelled: bool = True) -> Item:
    """Decode one entry into a ``Clip``, or say why it cannot be used (``labelled`` False: its transcript is
    ignored, see ``make_clip``)."""
    where = entry.where or entry.key
    if entry.problem:
        return Skipped(where, entry.problem)
    if entry.audio is None:
        return Skipped(where, "no audio")
    try:
        audio = decode(entry.audio)
    except AudioProblem as exc:
        return Skipped(
            where,
            str(exc),
            implausible=isinstance(exc, ImplausibleAudio),
            unreadable=isinstance(exc, UnreadableAudio),
        )
    return make_clip(
        audio,
        entry.text,
        entry.source,
        entry.key,
        entry.speaker,
        entry.accent,
        entry.condition,
        entry.extra,
        labelled,
    )

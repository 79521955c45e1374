"""Corpus layouts as users have them on disk, and one place that opens any source by name.

``open_source`` maps a layout name (librispeech, commonvoice, folder, manifest, hf) and a path to a
source object; every source lists undecoded ``Entry`` objects and decodes them on iteration.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from workbench.config import LAYOUTS
from workbench.errors import WorkbenchError
from workbench.speech.sources import AudioFolderSource, EntrySource, HFDatasetSource, ManifestSource

__all__ = ["LAYOUTS", "SourceOptions", "open_source"]


@dataclass(frozen=True)
class SourceOptions:
    """Layout-specific options: the split (hf dataset split, Common Voice TSV) and the hf columns."""

    split: str | None = None
    audio_column: str = "audio"
    text_column: str = "text"
    speaker_column: str | None = None
    accent_column: str | None = None
    labelled: bool = True  # False (an unlabelled import): an hf dataset needs no transcript column


def open_source(
    layout: str, path: str | Path | None, options: SourceOptions = SourceOptions()
) -> EntrySource:
    """The source for ``layout`` at ``path``; a user error for an unknown layout or a missing path."""
    if layout not in LAYOUTS:
        raise WorkbenchError(f"unknown layout {layout!r}; choose one of {', '.join(LAYOUTS)}")
    if not path:
        raise WorkbenchError(f"--source {layout} needs --path")
    if layout == "librispeech":
        from workbench.speech.layouts.librispeech import LibriSpeechSource

        return LibriSpeechSource(Path(path))
    if layout == "commonvoice":
        from workbench.speech.layouts.commonvoice import CommonVoiceSource

        return CommonVoiceSource(Path(path), options.split or "test")
    if layout == "folder":
        return AudioFolderSource(Path(path))
    if layout == "manifest":
        return ManifestSource(Path(path))
    return HFDatasetSource(
        str(path),
        options.split or "train",
        options.audio_column,
        options.text_column,
        options.speaker_column,
        options.accent_column,
        options.labelled,
    )

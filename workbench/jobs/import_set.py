"""The import job: a whole source (or a seeded sample of it) stored as one evaluation- or calibration-only set.

The source is one of the layouts of ``workbench.speech.layouts`` (LibriSpeech, Common Voice, a
Hugging Face dataset, an audio folder or a JSONL manifest); ``workbench.speech.importer`` streams it
through worker processes into ``<root>/<name>``. The result's lines are the set's summary, its engine
profile and what a fixed profile left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from workbench.jobs.sets import profile_lines, set_lines
from workbench.speech.importer import ImportConfig, ImportResult, import_set
from workbench.speech.layouts import SourceOptions, open_source
from workbench.workspace import default_area


@dataclass(frozen=True)
class ImportInputs:
    """What to store (``config``: name, role, profile, noise, sample, exclusions) and where it comes from."""

    config: ImportConfig
    source: str
    path: str | None = None  # see workbench.config.LAYOUTS
    options: SourceOptions = field(default_factory=SourceOptions)  # split, hf columns
    root: Path = field(default_factory=default_area("calib_sets"))
    progress: bool = True


@dataclass
class ImportJobResult:
    result: ImportResult = field(repr=False)

    def lines(self) -> list[str]:
        speech_set = self.result.speech_set
        return set_lines(speech_set) + profile_lines(speech_set.card, self.result.fit.to_json())


def run(inputs: ImportInputs) -> ImportJobResult:
    """Open the source and import it (an existing set of that name is replaced only by a complete one)."""
    source = open_source(inputs.source, inputs.path, inputs.options)
    return ImportJobResult(
        import_set(
            source,
            inputs.config,
            f"{inputs.source}:{inputs.path}",
            root=inputs.root,
            progress=inputs.progress,
        )
    )

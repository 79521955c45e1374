"""The import job: a whole source (or a seeded sample of it) stored as one evaluation- or calibration-only set.

The source is one of the layouts of ``workbench.speech.layouts`` (LibriSpeech, Common Voice, a
Hugging Face dataset, an audio folder or a JSONL manifest); ``workbench.speech.importer`` streams it
through worker processes into ``<root>/<name>``. The result's lines are the set's summary, its engine
profile, what a fixed profile left out, the implausible files left out (one line each) and the clips too far
from the median to shape a derived profile.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
        card = speech_set.card
        from workbench.speech.unlabelled import import_note

        ignored = import_note(speech_set.name, speech_set.utterances)
        return (
            set_lines(speech_set)
            + profile_lines(card, self.result.fit.to_json())
            + plausibility_lines(card)
            + ([f"note: {ignored}"] if ignored else [])
        )


SHOWN = 20  # lines naming single files; the card lists every one


def plausibility_lines(card: dict[str, Any]) -> list[str]:
    """One line per implausible file left out, and the outliers left out of a derived profile."""
    checks = card.get("checks") or {}
    out = []
    implausible = checks.get("implausible") or []
    if implausible:
        out.append(f"left out {len(implausible)} file(s) that are no plausible utterance:")
        out += [f"  {s['item']}: {s['reason']}" for s in implausible[:SHOWN]]
        if len(implausible) > SHOWN:
            out.append(f"  ... and {len(implausible) - SHOWN} more (card.md lists them)")
    far = checks.get("profile_outliers")
    if far:
        clips = ", ".join(f"{c['item'] or c['id']} ({c['duration_s']:g} s)" for c in far["clips"][:SHOWN])
        more = f" and {far['count'] - SHOWN} more" if far["count"] > SHOWN else ""
        out.append(
            f"{far['count']} clip(s) kept in the set but not in its derived profile ({far['rule'].split(':')[0]}): "
            f"{clips}{more}; pass --max-seconds/--min-seconds to fix a profile that takes them"
        )
    return out


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

"""The sets job: build a balanced calibration set and a disjoint evaluation set (``<name>-calib``, ``<name>-eval``).

The source is synthetic speech (the embedded TTS voices and WordNet text) or the user's speech: a
Hugging Face dataset, an audio folder or a JSONL manifest. ``set_lines`` describes a stored set (its
balance table, accents, noise kinds, SNR range and what was skipped).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from workbench.config import SetBuildConfig
from workbench.errors import WorkbenchError
from workbench.speech import builder, sources
from workbench.speech.builder import BuiltSets
from workbench.speech.store import SpeechSet, balance_table
from workbench.workspace import default_area

SOURCES = ("synthetic", "hf", "folder", "manifest")


@dataclass(frozen=True)
class SetsInputs:
    """How many utterances per condition, the engine profile and seed (``config``), and where speech comes from."""

    config: SetBuildConfig = field(default_factory=SetBuildConfig)
    source: str = "synthetic"
    path: str | None = None  # hub id or saved dataset (hf), folder (folder) or JSONL file (manifest)
    split: str = "train"
    audio_column: str = "audio"
    text_column: str = "text"
    speaker_column: str | None = None
    accent_column: str | None = None
    root: Path = field(default_factory=default_area("calib_sets"))


@dataclass
class SetsResult:
    """Both sets and the disjointness checks."""

    built: BuiltSets

    def lines(self) -> list[str]:
        b = self.built
        return (set_lines(b.calib) + set_lines(b.eval)
                + [f"\ndisjoint by text: {b.checks['disjoint_by_text']}, by speaker: {b.checks['disjoint_by_speaker']}"])


def run(inputs: SetsInputs) -> SetsResult:
    """Synthesise or collect the clips, balance them over conditions and buckets, write both sets atomically."""
    cfg = inputs.config
    if inputs.source not in SOURCES:
        raise WorkbenchError(f"--source must be one of {', '.join(SOURCES)}, not {inputs.source!r}")
    if inputs.source == "synthetic":
        return SetsResult(builder.build_synthetic_sets(cfg, root=inputs.root))
    if not inputs.path:
        raise WorkbenchError(f"--source {inputs.source} needs --path")
    source = {
        "hf": lambda: sources.HFDatasetSource(inputs.path, inputs.split, inputs.audio_column, inputs.text_column,
                                              inputs.speaker_column, inputs.accent_column),
        "folder": lambda: sources.AudioFolderSource(Path(inputs.path)),
        "manifest": lambda: sources.ManifestSource(Path(inputs.path)),
    }[inputs.source]()
    clips, skipped = sources.collect(source)
    return SetsResult(builder.build_external_sets(cfg, clips, skipped, f"{inputs.source}:{inputs.path}",
                                                  root=inputs.root))


def set_lines(speech_set: SpeechSet) -> list[str]:
    """A set's summary line, balance table, accents, noise kinds, SNR range and problems."""
    card = speech_set.card
    out = [f"\n{speech_set.name}  ({card['utterances']} utterances, {card['total_duration_s']:.0f} s, "
           f"{card['speakers']} speakers, hash {card['content_hash'][:12]})  -> {speech_set.path}",
           balance_table(card),
           "accents: " + ", ".join(f"{k} {v}" for k, v in card["accents"].items()),
           "noise:   " + ", ".join(f"{k} {v}" for k, v in card["noise_kinds"].items())]
    if card["snr_db"]:
        out.append(f"SNR dB:  {card['snr_db']['min']:.1f} .. {card['snr_db']['max']:.1f}")
    short = card.get("checks", {}).get("shortfall")
    if short:
        out.append("short of the request: " + ", ".join(f"{k} {v}" for k, v in short.items()))
    if card["skipped"]:
        out.append(f"skipped: {len(card['skipped'])} (reasons in {speech_set.path / 'card.md'})")
    return out

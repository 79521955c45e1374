"""The sets job: build a balanced calibration set and a disjoint evaluation set (``<name>-calib``, ``<name>-eval``),
and with ``dev_per_condition`` a dev set held out from both (``<name>-dev``, synthetic speech).

The source is synthetic speech (the embedded TTS voices and WordNet text) or the user's speech in one
of the layouts of ``workbench.speech.layouts`` (LibriSpeech, Common Voice, a Hugging Face dataset, an
audio folder or a JSONL manifest). ``set_lines`` describes a stored set (its balance table, accents,
noise kinds, SNR range and what was skipped); ``profile_lines`` its engine profile and what a fixed
profile left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench import journal
from workbench.config import SetBuildConfig
from workbench.errors import WorkbenchError
from workbench.speech import builder, missing, sources
from workbench.speech.builder import BuiltSets
from workbench.speech.layouts import LAYOUTS, SourceOptions, open_source
from workbench.speech.store import SpeechSet, balance_table
from workbench.workspace import default_area

SOURCES = ("synthetic", *LAYOUTS)


@dataclass(frozen=True)
class SetsInputs:
    """How many utterances per condition, the engine profile, noise folders and seed (``config``), and where
    speech comes from."""

    config: SetBuildConfig = field(default_factory=SetBuildConfig)
    source: str = "synthetic"
    path: str | None = None  # see workbench.config.LAYOUTS
    options: SourceOptions = field(default_factory=SourceOptions)  # split, hf columns
    root: Path = field(default_factory=default_area("calib_sets"))


@dataclass
class SetsResult:
    """Both sets and the disjointness checks."""

    built: BuiltSets
    recovered: list[str] = field(default_factory=list)  # what was done about an earlier build that was killed

    def lines(self) -> list[str]:
        b = self.built
        card = b.calib.card
        dev = set_lines(b.dev) if b.dev is not None else []
        held_out = (
            [f"{b.dev.name} held out from {b.calib.name} and {b.eval.name}: no shared speaker or text"]
            if b.dev is not None
            else []
        )
        return (
            self.recovered
            + set_lines(b.calib)
            + set_lines(b.eval)
            + dev
            + [
                f"\ndisjoint by text: {b.checks['disjoint_by_text']}, by speaker: {b.checks['disjoint_by_speaker']}"
            ]
            + held_out
            + profile_lines(card, card["made"].get("profile_fit"))
        )


def run(inputs: SetsInputs) -> SetsResult:
    """Synthesise or collect the clips, balance them over conditions and buckets, write both sets atomically."""
    cfg = inputs.config
    if inputs.source not in SOURCES:
        raise WorkbenchError(f"--source must be one of {', '.join(SOURCES)}, not {inputs.source!r}")
    recovered = journal.recover(inputs.root)  # a build that was killed: finish or discard it first
    if inputs.source == "synthetic":
        return SetsResult(builder.build_synthetic_sets(cfg, root=inputs.root), recovered)
    clips, skipped = sources.collect(open_source(inputs.source, inputs.path, inputs.options))
    return SetsResult(
        builder.build_external_sets(cfg, clips, skipped, f"{inputs.source}:{inputs.path}", root=inputs.root),
        recovered,
    )


def profile_lines(card: dict[str, Any], fit: dict[str, Any] | None) -> list[str]:
    """The set's engine profile, and what a fixed profile left out with the flags that would keep it."""
    p = card.get("profile")
    if not p:
        return []
    out = [f"engine profile: {p['min_s']:g} / {p['opt_s']:g} / {p['max_s']:g} s (min/opt/max), {p['how']}"]
    if fit and fit["outside"] and str(p.get("how", "")).startswith("derived"):
        out.append(
            f"left out as far from the median duration (they would stretch the derived profile): {fit['outside']} "
            f"of {fit['total']} clips ({fit['shorter']} shorter, {fit['longer']} longer; clips run "
            f"{fit['shortest_s']:.2f}-{fit['longest_s']:.2f} s); to keep them pass {fit['to_keep_them_pass']}"
        )
    elif fit and fit["outside"]:
        out.append(
            f"left out by the fixed profile: {fit['outside']} of {fit['total']} clips ({fit['shorter']} shorter, "
            f"{fit['longer']} longer; clips run {fit['shortest_s']:.2f}-{fit['longest_s']:.2f} s); to keep "
            f"them pass {fit['to_keep_them_pass']}, or leave out --min/--max-seconds to derive the profile"
        )
    return out


def set_lines(speech_set: SpeechSet) -> list[str]:
    """A set's summary line, balance table, accents, noise kinds, SNR range and problems."""
    card = speech_set.card
    out = [
        f"\n{speech_set.name}  ({card['utterances']} utterances, {card['total_duration_s']:.0f} s, "
        f"{card['speakers']} speakers, hash {card['content_hash'][:12]})  -> {speech_set.path}",
        balance_table(card),
        "accents: " + ", ".join(f"{k} {v}" for k, v in card["accents"].items()),
        "noise:   " + ", ".join(f"{k} {v}" for k, v in card["noise_kinds"].items()),
    ]
    if card["snr_db"]:
        out.append(f"SNR dB:  {card['snr_db']['min']:.1f} .. {card['snr_db']['max']:.1f}")
    short = card.get("checks", {}).get("shortfall")
    if short:
        out.append("short of the request: " + ", ".join(f"{k} {v}" for k, v in short.items()))
    if card["skipped"]:
        out.append(f"skipped: {len(card['skipped'])} (reasons in {speech_set.path / 'card.md'})")
    if lacks := missing.report_note(speech_set.name, card, "set"):
        out.append(lacks)
    return out

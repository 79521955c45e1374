"""Transcript normalisation applied to references and hypotheses before WER (stated in every report)."""

from __future__ import annotations

from workbench.speech.text import normalise

NORMALISATION = (
    "upper-case; accents folded (É->E, ß->SS); '-', '_' and other separators -> space; every character "
    "outside A-Z and the apostrophe removed; quote marks (apostrophes at word edges) removed; "
    "whitespace collapsed; words are the space-separated tokens"
)


def normalise_transcript(text: str) -> str:
    """The form both reference and hypothesis take before scoring (see ``NORMALISATION``)."""
    return normalise(text).text

"""Error counts per utterance with jiwer, in words (WER) or characters (CER), and the corpus error rate.

``Scoring`` says how: the text normaliser both reference and hypothesis go through (the model's, see
``workbench.model.textnorm``) and the unit. WER aligns space-separated words (``jiwer.process_words``);
CER aligns characters (``jiwer.process_characters``; for scripts written without spaces the normaliser
has already removed whitespace, otherwise a space is a character like any other). The corpus rate is
total errors over total reference units.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import jiwer

from workbench.model.textnorm import TextNormaliser
from workbench.model.vocab import DEFAULT_VOCABULARY

if TYPE_CHECKING:
    from workbench.model.description import ModelDescription

UNITS = {"wer": "words", "cer": "characters"}
#: The rules for the default vocabulary (the demo model and the English LibriSpeech fine-tunes): upper-case,
#: accents folded, apostrophes kept, punctuation and digits -> word breaks.
DEFAULT_NORMALISER = TextNormaliser.for_vocabulary(DEFAULT_VOCABULARY)


@dataclass(frozen=True)
class Scoring:
    """How transcripts are compared: ``normalise`` both sides, then count errors per ``unit`` (wer/cer)."""

    unit: str = "wer"
    normalise: Callable[[str], str] = DEFAULT_NORMALISER
    normalisation: str = DEFAULT_NORMALISER.describe()

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise ValueError(f"error unit must be one of {sorted(UNITS)}, not {self.unit!r}")

    @classmethod
    def for_model(cls, model: ModelDescription) -> Scoring:
        """The model's normaliser and error unit (CER for character languages, or what --error-unit says)."""
        return cls(model.error_unit, model.normaliser, model.normaliser.describe())

    @property
    def label(self) -> str:
        """``WER`` or ``CER``."""
        return self.unit.upper()

    def to_json(self) -> dict:
        return {"unit": self.unit, "counted_in": UNITS[self.unit], "normalisation": self.normalisation}


DEFAULT_SCORING = Scoring()


@dataclass(frozen=True)
class UtteranceErrors:
    """Alignment counts for one utterance, on normalised text; ``reference_words`` counts the scoring unit
    (words for WER, characters for CER)."""

    id: str
    reference: str
    hypothesis: str
    substitutions: int
    deletions: int
    insertions: int
    reference_words: int

    @property
    def errors(self) -> int:
        return self.substitutions + self.deletions + self.insertions


def score_utterance(
    utt_id: str, reference: str, hypothesis: str, scoring: Scoring = DEFAULT_SCORING
) -> UtteranceErrors:
    """Normalise both texts and count S/D/I with jiwer (an empty reference counts only insertions)."""
    ref = scoring.normalise(reference)
    hyp = scoring.normalise(hypothesis)
    out: jiwer.WordOutput | jiwer.CharacterOutput
    if scoring.unit == "cer":
        units = len(ref)
        if units == 0 and not hyp:
            return UtteranceErrors(utt_id, ref, hyp, 0, 0, 0, 0)
        out = jiwer.process_characters(ref, hyp)
    else:
        units = len(ref.split())
        if units == 0 and not hyp:
            return UtteranceErrors(utt_id, ref, hyp, 0, 0, 0, 0)
        out = jiwer.process_words(ref, hyp)
    return UtteranceErrors(utt_id, ref, hyp, out.substitutions, out.deletions, out.insertions, units)


def score_utterances(
    ids: Sequence[str],
    references: Sequence[str],
    hypotheses: Sequence[str],
    scoring: Scoring = DEFAULT_SCORING,
) -> list[UtteranceErrors]:
    if not (len(ids) == len(references) == len(hypotheses)):
        raise ValueError(
            f"ids/references/hypotheses differ in length: {len(ids)}/{len(references)}/{len(hypotheses)}"
        )
    return [score_utterance(i, r, h, scoring) for i, r, h in zip(ids, references, hypotheses)]


def corpus_wer(scores: Sequence[UtteranceErrors]) -> float:
    """Total errors over total reference units (words or characters); NaN when there are none."""
    words = sum(s.reference_words for s in scores)
    return float("nan") if words == 0 else sum(s.errors for s in scores) / words

"""Word error counts per utterance with jiwer, and corpus WER (total errors / total reference words)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import jiwer

from workbench.speech.text import normalise_text


@dataclass(frozen=True)
class UtteranceErrors:
    """Alignment counts for one utterance, on normalised text."""

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


def score_utterance(utt_id: str, reference: str, hypothesis: str) -> UtteranceErrors:
    """Normalise both texts and count S/D/I with jiwer (an empty reference counts only insertions)."""
    ref = normalise_text(reference).text
    hyp = normalise_text(hypothesis).text
    ref_words = len(ref.split())
    if ref_words == 0 and not hyp:
        return UtteranceErrors(utt_id, ref, hyp, 0, 0, 0, 0)
    out = jiwer.process_words(ref, hyp)
    return UtteranceErrors(utt_id, ref, hyp, out.substitutions, out.deletions, out.insertions, ref_words)


def score_utterances(ids: Sequence[str], references: Sequence[str],
                     hypotheses: Sequence[str]) -> list[UtteranceErrors]:
    if not (len(ids) == len(references) == len(hypotheses)):
        raise ValueError(f"ids/references/hypotheses differ in length: {len(ids)}/{len(references)}/{len(hypotheses)}")
    return [score_utterance(i, r, h) for i, r, h in zip(ids, references, hypotheses)]


def corpus_wer(scores: Sequence[UtteranceErrors]) -> float:
    """Total errors over total reference words; NaN when there are no reference words."""
    words = sum(s.reference_words for s in scores)
    return float("nan") if words == 0 else sum(s.errors for s in scores) / words

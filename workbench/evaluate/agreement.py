"""Agreement with FP32 on audio without transcripts: disagreement, the edit-distance bound on the WER delta, and
the label-free estimate.

The FP32 model's own transcript f is a reference that needs no labels. For any true reference r and a
candidate's transcript c, edit distance is a metric, so ``|ED(r, c) - ED(r, f)| <= ED(c, f)``; summed over a set,
``|WER(c) - WER(f)| <= sum ED(c, f) / N`` where N is the reference's word count. That is a guaranteed bound on the
WER loss, not an estimate of it; N is unknown without labels and is estimated by FP32's own word count (the
true N is FP32's words plus its deletions minus its insertions). Disagreement is ``sum ED(c, f)`` over FP32's word
count (word and character level), with a speaker-block bootstrap interval (``workbench.evaluate.bootstrap``); the
changed-utterance share counts utterances whose transcript differs at all.

The label-free estimate multiplies the unlabelled disagreement by the ratio WER delta / disagreement measured on
a labelled set; it assumes that ratio carries over to the new audio, which nothing guarantees.

``agreement`` is the one function; it returns an ``AgreementResult`` whose fields the report, the shift check and
the gates read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from workbench.evaluate.bootstrap import Interval, blocks_for, wer_interval
from workbench.evaluate.wer import DEFAULT_SCORING, Scoring, score_utterance


@dataclass(frozen=True)
class Confidence:
    """FP32's own confidence on a set: the mean over frames of the largest posterior, and the share of frames
    whose most likely token is the CTC blank (audio the model itself cannot hear scores low / high)."""

    mean_max_posterior: float
    blank_share: float
    frames: int

    def to_json(self) -> dict:
        return asdict(self)


class ConfidenceMeter:
    """Accumulates ``Confidence`` one utterance's logits ([frames, vocab]) at a time."""

    def __init__(self, blank_id: int) -> None:
        self.blank_id = blank_id
        self.posterior_sum = 0.0
        self.blank_frames = 0
        self.frames = 0

    def add(self, logits: np.ndarray) -> None:
        x = np.asarray(logits, dtype=np.float64)
        x = x - x.max(axis=-1, keepdims=True)
        probs = np.exp(x)
        top = probs.max(axis=-1) / probs.sum(axis=-1)
        self.posterior_sum += float(top.sum())
        self.blank_frames += int(np.count_nonzero(x.argmax(axis=-1) == self.blank_id))
        self.frames += int(x.shape[0])

    def result(self) -> Confidence | None:
        if self.frames == 0:
            return None
        return Confidence(self.posterior_sum / self.frames, self.blank_frames / self.frames, self.frames)


@dataclass(frozen=True)
class LabelFreeEstimate:
    """WER delta predicted from disagreement: ``ratio`` (labelled WER delta / labelled disagreement) times the
    unlabelled disagreement. An estimate resting on the assumption that the ratio carries over."""

    labelled_set: str
    labelled_delta: float
    labelled_disagreement: float
    ratio: float
    estimate: float
    assumption: str = (
        "the ratio of WER delta to disagreement measured on the labelled set holds on this audio; nothing "
        "guarantees it (the bound does not rest on it)"
    )

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class CandidateAgreement:
    """One candidate against FP32 on one set; rates are fractions (0.05 = 5 %)."""

    candidate: str
    utterances: int
    changed_utterances: int
    word_edits: int
    fp32_words: int
    char_edits: int
    fp32_chars: int
    disagreement: Interval  # word edits / FP32's words
    char_disagreement: Interval  # character edits / FP32's characters
    wer_bound: Interval  # |error-rate delta| <= this (in the scoring unit), reference units estimated
    estimate: LabelFreeEstimate | None = None
    # per utterance: word edits to FP32, FP32's words, the bootstrap block (for the shift test; not in the record)
    samples: tuple[np.ndarray, np.ndarray, np.ndarray] | None = field(default=None, repr=False, compare=False)

    @property
    def changed_share(self) -> float:
        return self.changed_utterances / self.utterances if self.utterances else 0.0

    def to_json(self) -> dict:
        return {
            "candidate": self.candidate,
            "utterances": self.utterances,
            "changed_utterances": self.changed_utterances,
            "changed_share": self.changed_share,
            "word_edits": self.word_edits,
            "fp32_words": self.fp32_words,
            "char_edits": self.char_edits,
            "fp32_chars": self.fp32_chars,
            "disagreement": _interval_json(self.disagreement),
            "char_disagreement": _interval_json(self.char_disagreement),
            "wer_bound": _interval_json(self.wer_bound),
            "estimate": None if self.estimate is None else self.estimate.to_json(),
        }


@dataclass(frozen=True)
class AgreementResult:
    """Every candidate's agreement with the baseline (FP32) on one set, with FP32's confidence there."""

    set_name: str
    baseline: str
    utterances: int
    speakers: int
    unit: str  # the scoring unit the bound is in: wer or cer
    reference_units: int  # the estimate of the reference's words (characters for CER): FP32's own count
    reference_estimate: str  # how that estimate was made, in words
    candidates: dict[str, CandidateAgreement]
    confidence: Confidence | None
    level: float
    resamples: int
    bootstrap_unit: str

    def to_json(self) -> dict:
        return {
            "set": self.set_name,
            "baseline": self.baseline,
            "utterances": self.utterances,
            "speakers": self.speakers,
            "unit": self.unit,
            "reference_units": self.reference_units,
            "reference_estimate": self.reference_estimate,
            "confidence": None if self.confidence is None else self.confidence.to_json(),
            "level": self.level,
            "resamples": self.resamples,
            "bootstrap_unit": self.bootstrap_unit,
            "candidates": {n: c.to_json() for n, c in self.candidates.items()},
        }


def _interval_json(iv: Interval) -> dict:
    """Strict JSON: an interval with no blocks has no ends (None, not NaN)."""
    out = iv.to_json()
    for key in ("estimate", "low", "high"):
        if out[key] != out[key]:
            out[key] = None
    return out


def _edits(
    baseline: Sequence[str], candidate: Sequence[str], scoring: Scoring, unit: str
) -> tuple[np.ndarray, np.ndarray]:
    """Per-utterance edit distance of ``candidate`` to ``baseline`` and the baseline's length, in ``unit``."""
    at = Scoring(unit, scoring.normalise, scoring.normalisation)
    scored = [score_utterance(str(i), f, c, at) for i, (f, c) in enumerate(zip(baseline, candidate))]
    return (
        np.array([s.errors for s in scored], dtype=np.float64),
        np.array([s.reference_words for s in scored], dtype=np.float64),
    )


def agreement(
    set_name: str,
    speakers: Sequence[str],
    transcripts: Mapping[str, Sequence[str]],
    baseline: str,
    scoring: Scoring = DEFAULT_SCORING,
    confidence: Confidence | None = None,
    labelled: Mapping[str, tuple[str, float, float]] | None = None,
    *,
    level: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> AgreementResult:
    """Each candidate's transcripts in ``transcripts`` (name -> texts, the ``baseline`` FP32 among them) against the
    baseline's: disagreement at word and character level, changed utterances and the bound on the error-rate delta,
    with speaker-block intervals over ``speakers``. ``labelled`` (candidate -> (set, WER delta, disagreement) on a
    labelled set) adds the label-free estimate for candidates whose labelled disagreement is above zero."""
    if baseline not in transcripts:
        raise ValueError(f"the baseline {baseline!r} has no transcripts")
    base = list(transcripts[baseline])
    if any(len(t) != len(base) for t in transcripts.values()):
        raise ValueError("every candidate needs a transcript of every utterance")
    blocks, unit = blocks_for(list(speakers))
    words_base = _edits(base, base, scoring, "wer")[1]
    chars_base = _edits(base, base, scoring, "cer")[1]
    reference = words_base if scoring.unit == "wer" else chars_base
    results = {}
    for name, texts in transcripts.items():
        if name == baseline:
            continue
        word_ed, _ = _edits(base, texts, scoring, "wer")
        char_ed, _ = _edits(base, texts, scoring, "cer")
        kw = {"unit": unit, "level": level, "resamples": resamples, "seed": seed}
        disagreement = wer_interval(word_ed, words_base, blocks, **kw)  # type: ignore[arg-type]
        char_disagreement = wer_interval(char_ed, chars_base, blocks, **kw)  # type: ignore[arg-type]
        bound = disagreement if scoring.unit == "wer" else char_disagreement
        estimate = None
        if labelled is not None and name in labelled:
            lset, ldelta, ldis = labelled[name]
            if ldis > 0 and disagreement.estimate == disagreement.estimate:
                ratio = ldelta / ldis
                estimate = LabelFreeEstimate(lset, ldelta, ldis, ratio, ratio * bound.estimate)
        results[name] = CandidateAgreement(
            name,
            len(base),
            sum(1 for f, c in zip(base, texts) if scoring.normalise(f) != scoring.normalise(c)),
            int(word_ed.sum()),
            int(words_base.sum()),
            int(char_ed.sum()),
            int(chars_base.sum()),
            disagreement,
            char_disagreement,
            bound,
            estimate,
            (word_ed, words_base, blocks),
        )
    return AgreementResult(
        set_name,
        baseline,
        len(base),
        len(set(speakers)),
        scoring.unit,
        int(reference.sum()),
        f"reference {'words' if scoring.unit == 'wer' else 'characters'} estimated as {baseline}'s own count "
        f"({int(reference.sum()):,}); the true count is that plus {baseline}'s deletions minus its insertions",
        results,
        confidence,
        level,
        resamples,
        unit,
    )

"""Logits -> text: greedy CTC in the model's own vocabulary, or beam search with flashlight-text (+ KenLM).

``decoder_for(settings, vocabulary)`` returns a callable ``logits [frames, vocab] -> text``.

- The blank penalty is subtracted from the blank's logit first (both decoders), so a positive penalty
  makes the model emit fewer blanks and more characters; 0 leaves the logits untouched.
- Greedy: ``Vocabulary.greedy`` (collapse repeats, then drop the blank and special tokens).
- Beam: flashlight-text's lexicon-free CTC beam search (C++, binary wheels with KenLM inside; the decoder
  torchaudio wraps) over log-softmax scores. Its tokens are the model's vocabulary in id order: the blank, the
  word delimiter (written as a space) and the characters. Special tokens (``<s>``, ``</s>``, ``<unk>``) write
  nothing, as the blank does, so their probability is added to the blank's and they are never proposed. A
  language model (an ARPA file or a KenLM binary) weighs whole words with ``alpha``/``beta`` and hotwords get
  ``hotword_weight``, through ``workbench.evaluate.word_scorer`` (the same scores, so the same weights mean the
  same, as the pyctcdecode beam the workbench used before).
- Each frame expands the tokens at or above ``TOKEN_MIN_LOGP`` and its best token (``floored``); a hypothesis
  more than ``BEAM_PRUNE_LOGP`` below the best is dropped; ``beam_width`` hypotheses are kept.
- Before the beam runs, each run of blank-only frames (the blank is the frame's best token and every other
  token scores below ``TOKEN_MIN_LOGP``) keeps its first frame only (``collapse_blank_runs``). Such a frame
  expands every beam by the blank alone: the first one of a run merges beams that differ only in their last
  character, and each later one adds the same score to every beam and leaves the beams, their language-model
  scores and the pruning as they were, so dropping it leaves the decoded text unchanged while the beam runs
  over far fewer frames.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from workbench.errors import WorkbenchError
from workbench.evaluate.inference import DecoderSettings
from workbench.evaluate.word_scorer import WordScoring, check_hotwords, make_word_scorer
from workbench.model.logits import log_softmax
from workbench.model.vocab import Vocabulary
from workbench.optional import import_optional

Decode = Callable[[np.ndarray], str]
_NEVER = -1e4  # log-probability of a token the beam must never propose (far below the pruning threshold)
# the token floor: a token scoring below it is not expanded unless it is the frame's best, which
# ``collapse_blank_runs`` relies on (pyctcdecode's default, which the beam used before)
TOKEN_MIN_LOGP = -5.0
BEAM_PRUNE_LOGP = 10.0  # a hypothesis this far (natural log) below the best one is dropped


def penalised(logits: np.ndarray, blank_id: int, penalty: float) -> np.ndarray:
    """The logits with ``penalty`` subtracted from the blank's column (a copy; unchanged when 0)."""
    logits = np.asarray(logits, dtype=np.float32)
    if not penalty:
        return logits
    out = logits.copy()
    out[:, blank_id] -= penalty
    return out


def beam_alphabet(vocabulary: Vocabulary) -> tuple[list[str], list[int]]:
    """The beam's labels in id order and the ids of silent special tokens (folded into the blank)."""
    by_id = {i: t for t, i in vocabulary.token_to_id.items()}
    labels, silent = [], []
    for i in range(vocabulary.size):
        token = by_id.get(i)
        written = vocabulary.written(token) if token is not None else None
        if i == vocabulary.blank_id:
            labels.append("")
        elif written == " ":
            labels.append(" ")
        elif written:
            labels.append(written)
        else:  # special, markup or an unused id: a private-use placeholder, never proposed
            labels.append(chr(0xE000 + i))
            silent.append(i)
    return labels, silent


def beam_scores(logits: np.ndarray, vocabulary: Vocabulary, silent: list[int]) -> np.ndarray:
    """Log-probabilities for the beam: special tokens' mass added to the blank, theirs set to never."""
    scores = log_softmax(np.asarray(logits, dtype=np.float64)[:, : vocabulary.size])
    if silent:
        blank = vocabulary.blank_id
        scores[:, blank] = np.logaddexp.reduce(scores[:, [blank, *silent]], axis=1)
        scores[:, silent] = _NEVER
    return scores.astype(np.float32)


def blank_only_frames(scores: np.ndarray, blank_id: int, floor: float = TOKEN_MIN_LOGP) -> np.ndarray:
    """Per frame: True when the beam expands it by the blank alone (its best token, every other below ``floor``)."""
    scores = np.asarray(scores)
    if scores.shape[0] == 0:
        return np.zeros(0, dtype=bool)
    others = np.delete(scores, blank_id, axis=1)
    below = others.max(axis=1) < floor if others.shape[1] else np.ones(scores.shape[0], dtype=bool)
    return (scores.argmax(axis=1) == blank_id) & below


def collapse_blank_runs(scores: np.ndarray, blank_id: int, floor: float = TOKEN_MIN_LOGP) -> np.ndarray:
    """``scores`` [frames, vocab] without the second and later frames of each run of blank-only frames (the
    beam's text is the same with or without them; see the module docstring)."""
    only = blank_only_frames(scores, blank_id, floor)
    repeat = only.copy()
    repeat[1:] &= only[:-1]
    if repeat.size:
        repeat[0] = False
    return scores[~repeat]


def _flashlight_decoder():
    return import_optional(
        "flashlight.lib.text.decoder",
        "pip install flashlight-text (binary wheels with KenLM; setup.sh installs it)",
    )


def beam_options(settings: DecoderSettings, tokens: int) -> Any:
    """flashlight-text's lexicon-free options for ``settings``: every token the floor lets through is tried, a
    hypothesis more than ``BEAM_PRUNE_LOGP`` below the best is dropped, merged hypotheses add their
    probabilities; the language model's weights live in the word scorer (weight 1 here, no silence score)."""
    fl = _flashlight_decoder()
    return fl.LexiconFreeDecoderOptions(
        beam_size=settings.beam_width,
        beam_size_token=tokens,
        beam_threshold=BEAM_PRUNE_LOGP,
        lm_weight=1.0,
        sil_score=0.0,
        log_add=True,
        criterion_type=fl.CriterionType.CTC,
    )


def floored(scores: np.ndarray, floor: float = TOKEN_MIN_LOGP) -> np.ndarray:
    """``scores`` with every token below ``floor`` set to never, except each frame's best (the tokens the beam
    expands: the ones at or above the floor, and the best one always)."""
    out = np.where(scores >= floor, scores, np.float32(_NEVER)).astype(np.float32)
    rows = np.arange(len(scores))
    best = scores.argmax(axis=1)
    out[rows, best] = scores[rows, best]
    return np.ascontiguousarray(out)


def require_decoder_packages(settings: DecoderSettings) -> None:
    """Import now what ``decoder_for`` needs for ``settings``, so a missing package is refused before any work."""
    if settings.kind != "greedy":
        _flashlight_decoder()
        if settings.lm is not None:
            import_optional(
                "flashlight.lib.text.decoder.kenlm",
                "pip install flashlight-text (binary wheels with KenLM; setup.sh installs it)",
            )


def decoder_for(settings: DecoderSettings, vocabulary: Vocabulary, collapse_blanks: bool = True) -> Decode:
    """The function that turns one utterance's logits [frames, vocab] into text under ``settings``;
    ``collapse_blanks=False`` gives the beam every frame (the reference the collapse is checked against)."""
    settings.check()
    blank, penalty = vocabulary.blank_id, settings.blank_penalty
    if settings.kind == "greedy":
        return lambda logits: vocabulary.greedy(penalised(logits, blank, penalty))
    fl = _flashlight_decoder()
    labels, silent = beam_alphabet(vocabulary)
    if " " not in labels:
        raise WorkbenchError("beam search needs a word delimiter in the model's vocabulary; it has none")
    delimiter = labels.index(" ")
    hotwords = check_hotwords(settings.hotwords)
    if settings.lm is not None or hotwords:
        scoring = WordScoring(settings.lm, settings.alpha, settings.beta, hotwords, settings.hotword_weight)
        lm = make_word_scorer(labels, delimiter, scoring)
    else:
        lm = fl.ZeroLM()

    def beam(logits: np.ndarray) -> str:
        scores = beam_scores(penalised(logits, blank, penalty), vocabulary, silent)
        if collapse_blanks:
            scores = collapse_blank_runs(scores, blank)
        if not len(scores):
            return ""
        # each frame offers the beam only the tokens the floor lets through: at most this many per frame
        expanded = int(max(1, (scores >= TOKEN_MIN_LOGP).sum(axis=1).max()))
        scores = floored(scores)
        decoder = fl.LexiconFreeDecoder(beam_options(settings, expanded), lm, delimiter, blank, [])
        frames, tokens = scores.shape
        best = decoder.decode(scores.ctypes.data, frames, tokens)[0]
        text = "".join(labels[t] for t in vocabulary_tokens(best.tokens, blank))
        return " ".join(text.split())

    return beam


def vocabulary_tokens(path: Iterable[int], blank: int) -> list[int]:
    """The tokens a CTC path writes: repeats collapsed, then blanks dropped (flashlight-text returns the
    path frame by frame, with -1 for its start and end markers)."""
    out: list[int] = []
    previous = None
    for token in path:
        if token < 0:
            continue
        if token != previous and token != blank:
            out.append(token)
        previous = token
    return out

"""Logits -> text: greedy CTC in the model's own vocabulary, or beam search with pyctcdecode (+ KenLM).

``decoder_for(settings, vocabulary)`` returns a callable ``logits [frames, vocab] -> text``.

- The blank penalty is subtracted from the blank's logit first (both decoders), so a positive penalty
  makes the model emit fewer blanks and more characters; 0 leaves the logits untouched.
- Greedy: ``Vocabulary.greedy`` (collapse repeats, then drop the blank and special tokens).
- Beam: pyctcdecode (pure Python, maintained, the decoder transformers' ``Wav2Vec2ProcessorWithLM`` uses)
  over log-softmax scores. Its alphabet is the model's vocabulary in id order: the blank as ``""``, the
  word delimiter as a space. Special tokens (``<s>``, ``</s>``, ``<unk>``) write nothing, as the blank
  does, so their probability is added to the blank's and they are never proposed. A language model (an
  ARPA file or a KenLM binary, loaded by pyctcdecode through the ``kenlm`` module) weighs words with
  ``alpha``/``beta``; hotwords get ``hotword_weight``.
- Before the beam runs, each run of blank-only frames (the blank is the frame's best token and every other
  token scores below ``TOKEN_MIN_LOGP``, the floor pyctcdecode is given) keeps its first frame only
  (``collapse_blank_runs``). Such a frame expands every beam by the blank alone: the first one of a run
  merges beams that differ only in their last character, and each later one adds the same score to every
  beam and leaves the beams, their language-model scores and the pruning as they were, so dropping it
  leaves the decoded text unchanged while the pure-Python beam loop runs over far fewer frames.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import numpy as np

from workbench.errors import WorkbenchError
from workbench.evaluate.inference import DecoderSettings
from workbench.model.logits import log_softmax
from workbench.model.vocab import Vocabulary
from workbench.optional import import_optional

Decode = Callable[[np.ndarray], str]
_NEVER = -1e4  # log-probability of a token the beam must never propose (pyctcdecode clips below its floor)
# pyctcdecode's own default token floor, passed explicitly: a token scoring below it is not expanded unless it
# is the frame's best, which ``collapse_blank_runs`` relies on
TOKEN_MIN_LOGP = -5.0


def penalised(logits: np.ndarray, blank_id: int, penalty: float) -> np.ndarray:
    """The logits with ``penalty`` subtracted from the blank's column (a copy; unchanged when 0)."""
    logits = np.asarray(logits, dtype=np.float32)
    if not penalty:
        return logits
    out = logits.copy()
    out[:, blank_id] -= penalty
    return out


def beam_alphabet(vocabulary: Vocabulary) -> tuple[list[str], list[int]]:
    """pyctcdecode labels in id order and the ids of silent special tokens (folded into the blank)."""
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


def _beam_modules(with_lm: bool):
    """pyctcdecode (and kenlm for a language model), or one error line saying how to install them."""
    pyctcdecode = import_optional("pyctcdecode", "pip install pyctcdecode kenlm (setup.sh installs both)")
    if with_lm:
        import_optional("kenlm", "pip install kenlm (it builds from source: setup.sh installs what it needs)")
    return pyctcdecode


def require_decoder_packages(settings: DecoderSettings) -> None:
    """Import now what ``decoder_for`` needs for ``settings``, so a missing package is refused before any work."""
    if settings.kind != "greedy":
        _beam_modules(settings.lm is not None)


@lru_cache(maxsize=8)
def _pyctcdecode_decoder(labels: tuple[str, ...], lm: str | None, alpha: float, beta: float):
    pyctcdecode = _beam_modules(lm is not None)
    try:
        return pyctcdecode.build_ctcdecoder(list(labels), kenlm_model_path=lm, alpha=alpha, beta=beta)
    except (OSError, ValueError, RuntimeError) as exc:
        raise WorkbenchError(
            f"pyctcdecode cannot build a decoder{f' with language model {lm}' if lm else ''} ({exc})"
        ) from exc


def decoder_for(settings: DecoderSettings, vocabulary: Vocabulary, collapse_blanks: bool = True) -> Decode:
    """The function that turns one utterance's logits [frames, vocab] into text under ``settings``;
    ``collapse_blanks=False`` gives the beam every frame (the reference the collapse is checked against)."""
    settings.check()
    blank, penalty = vocabulary.blank_id, settings.blank_penalty
    if settings.kind == "greedy":
        return lambda logits: vocabulary.greedy(penalised(logits, blank, penalty))
    labels, silent = beam_alphabet(vocabulary)
    decoder = _pyctcdecode_decoder(
        tuple(labels), str(settings.lm) if settings.lm else None, settings.alpha, settings.beta
    )
    hotwords = list(settings.hotwords) or None

    def beam(logits: np.ndarray) -> str:
        scores = beam_scores(penalised(logits, blank, penalty), vocabulary, silent)
        if collapse_blanks:
            scores = collapse_blank_runs(scores, blank)
        text = decoder.decode(
            scores,
            beam_width=settings.beam_width,
            token_min_logp=TOKEN_MIN_LOGP,
            hotwords=hotwords,
            hotword_weight=settings.hotword_weight,
        )
        return " ".join(text.split())

    return beam

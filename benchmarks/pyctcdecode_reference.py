"""The pyctcdecode beam (with the ``kenlm`` module) the workbench decoded with before flashlight-text, kept for
side-by-side comparison only (``benchmarks/beam_decoding.py``, ``tests/test_beam_decoder.py``): the same
alphabet, scores, blank-run collapse and token floor as ``workbench.evaluate.decoders``, decoded by pyctcdecode.
Needs ``pip install --no-deps pyctcdecode==0.5.0 pygtrie kenlm`` (kenlm builds from source)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def pyctcdecode_available() -> bool:
    from workbench.optional import has_module

    return has_module("pyctcdecode") and has_module("kenlm")


def pyctcdecode_decoder(
    settings: Any, vocabulary: Any, collapse_blanks: bool = True
) -> Callable[[np.ndarray], str]:
    """``logits -> text`` by pyctcdecode under ``settings`` (a beam ``DecoderSettings``)."""
    import pyctcdecode

    from workbench.evaluate.decoders import (
        TOKEN_MIN_LOGP,
        beam_alphabet,
        beam_scores,
        collapse_blank_runs,
        penalised,
    )
    from workbench.quiet import native_output_silenced

    labels, silent = beam_alphabet(vocabulary)
    with native_output_silenced():
        decoder = pyctcdecode.build_ctcdecoder(
            labels,
            kenlm_model_path=str(settings.lm) if settings.lm else None,
            alpha=settings.alpha,
            beta=settings.beta,
        )
    blank = vocabulary.blank_id

    def decode(logits: np.ndarray) -> str:
        scores = beam_scores(penalised(logits, blank, settings.blank_penalty), vocabulary, silent)
        if collapse_blanks:
            scores = collapse_blank_runs(scores, blank)
        text = decoder.decode(
            scores,
            beam_width=settings.beam_width,
            token_min_logp=TOKEN_MIN_LOGP,
            hotwords=list(settings.hotwords) or None,
            hotword_weight=settings.hotword_weight,
        )
        return " ".join(text.split())

    return decode

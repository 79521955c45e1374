"""Log-probabilities of a model's logits and the KL divergence of one run's frames from another's."""

from __future__ import annotations

import numpy as np


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """log softmax over the last axis, in float64."""
    x = np.asarray(logits, dtype=np.float64)
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def frame_kl_sum(reference_logits: np.ndarray, candidate_logits: np.ndarray) -> tuple[float, int]:
    """(sum over frames of KL(reference || candidate), frames): logits [..., frames, vocab], every leading axis
    flattened into frames."""
    ref = np.asarray(reference_logits).reshape(-1, np.shape(reference_logits)[-1])
    cand = np.asarray(candidate_logits).reshape(-1, np.shape(candidate_logits)[-1])
    if ref.shape != cand.shape:
        raise ValueError(f"logit shapes differ: {ref.shape} vs {cand.shape}")
    lp, lq = log_softmax(ref), log_softmax(cand)
    return float((np.exp(lp) * (lp - lq)).sum()), ref.shape[0]

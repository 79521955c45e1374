"""Error metrics of a tensor against its FP32 reference, and their accumulation over clips.

Per tensor: cosine similarity, SQNR (dB), relative L2 and max / mean absolute error, pooled over clips
by summing the underlying sums (so a long clip weighs by its size, and the result does not depend on
clip order). On logits: KL(FP32 || variant) per frame and greedy-token disagreement.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from workbench.model.logits import frame_kl_sum

SQNR_IDENTICAL_DB = 999.0  # written instead of +inf when the two tensors are identical


@dataclass
class ErrorSums:
    """Running sums for one tensor: a = reference (FP32), b = candidate."""

    dot: float = 0.0
    ref_sq: float = 0.0
    cand_sq: float = 0.0
    err_sq: float = 0.0
    abs_err: float = 0.0
    max_abs: float = 0.0
    numel: int = 0

    def add(self, reference: np.ndarray, candidate: np.ndarray) -> None:
        if np.shape(reference) != np.shape(candidate):
            raise ValueError(
                f"shape mismatch: reference {np.shape(reference)} vs candidate {np.shape(candidate)}"
            )
        a = np.ascontiguousarray(reference, dtype=np.float32).ravel()
        b = np.ascontiguousarray(candidate, dtype=np.float32).ravel()
        if not (np.isfinite(a).all() and np.isfinite(b).all()):
            # identical infinities (WavLM's log of relative distance 0 is -inf in both graphs) carry no error;
            # any other non-finite value stays and shows in the metrics
            same = ~np.isfinite(a) & (a == b)
            a, b = a[~same], b[~same]
        d = a - b
        # float32 products, float64 totals: BLAS dot on blocks keeps the rounding well below the metrics' precision
        self.dot += _dot(a, b)
        self.ref_sq += _dot(a, a)
        self.cand_sq += _dot(b, b)
        self.err_sq += _dot(d, d)
        if d.size:
            ad = np.abs(d)
            self.abs_err += float(ad.sum(dtype=np.float64))
            self.max_abs = max(self.max_abs, float(ad.max()))
        self.numel += int(a.size)

    def merge(self, other: ErrorSums) -> None:
        self.dot += other.dot
        self.ref_sq += other.ref_sq
        self.cand_sq += other.cand_sq
        self.err_sq += other.err_sq
        self.abs_err += other.abs_err
        self.max_abs = max(self.max_abs, other.max_abs)
        self.numel += other.numel

    @property
    def cosine(self) -> float:
        """1.0 for identical tensors (also both zero); 0.0 when exactly one is zero."""
        if self.err_sq == 0.0:
            return 1.0
        denom = math.sqrt(self.ref_sq * self.cand_sq)
        return self.dot / denom if denom > 0 else 0.0

    @property
    def sqnr_db(self) -> float:
        """Signal (reference) to quantisation-noise ratio in dB; ``SQNR_IDENTICAL_DB`` when identical."""
        if self.err_sq == 0.0:
            return SQNR_IDENTICAL_DB
        if self.ref_sq == 0.0:
            return -SQNR_IDENTICAL_DB
        return 10.0 * math.log10(self.ref_sq / self.err_sq)

    @property
    def rel_l2(self) -> float:
        if self.err_sq == 0.0:
            return 0.0
        return math.sqrt(self.err_sq / self.ref_sq) if self.ref_sq > 0 else math.inf

    @property
    def mean_abs(self) -> float:
        return self.abs_err / self.numel if self.numel else 0.0

    def to_json(self) -> dict[str, float]:
        return {
            "cosine": self.cosine,
            "sqnr_db": self.sqnr_db,
            "rel_l2": self.rel_l2,
            "max_abs_error": self.max_abs,
        }


def _dot(a: np.ndarray, b: np.ndarray, block: int = 1 << 16) -> float:
    """Sum of a*b: float32 BLAS dot per block, blocks summed in float64."""
    return float(sum(float(np.dot(a[i : i + block], b[i : i + block])) for i in range(0, a.size, block)))


@dataclass
class OutputDamage:
    """Running sums of per-frame KL(reference || candidate) and greedy-token disagreement."""

    kl_sum: float = 0.0
    disagree: int = 0
    frames: int = 0

    def add(self, reference_logits: np.ndarray, candidate_logits: np.ndarray) -> None:
        """Logits [..., frames, vocab]; every leading axis is flattened into frames."""
        kl_sum, frames = frame_kl_sum(reference_logits, candidate_logits)
        ref = np.asarray(reference_logits).reshape(frames, -1)
        cand = np.asarray(candidate_logits).reshape(frames, -1)
        self.kl_sum += kl_sum
        self.disagree += int((ref.argmax(-1) != cand.argmax(-1)).sum())
        self.frames += frames

    @property
    def kl(self) -> float:
        return max(0.0, self.kl_sum / self.frames) if self.frames else 0.0

    @property
    def token_disagreement(self) -> float:
        return self.disagree / self.frames if self.frames else 0.0

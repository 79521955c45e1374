"""Dev-clip transcripts per ONNX variant, shared by the searches of one caller (``DevEvaluator(transcripts=...)``).

Searches that read the same plans on the same dev clips (the selection rules compared on one dev set, a
confirmation on held-back speakers of it) need each plan's variant transcribed once. An entry is keyed by content:
the variant's ONNX bytes (SHA-256) with everything else that shapes a transcript (the model description, the
inference settings: chunking and decoder, the runner's execution providers and threads), and the clip's audio
(SHA-256). Only one-clip batches are shared: then a clip's transcript depends on that clip alone, while in a larger
batch it depends on the clips batched with it (length-bucketed; a GroupNorm encoder's outputs change with padding).
An entry keeps the text and the seconds its transcription took, so a reused reading reports the time it cost once.
"""

from __future__ import annotations

import hashlib
import json
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import numpy as np

from workbench.backends.base import Runner
from workbench.compare.sensitivity import VariantRunner
from workbench.quantize.plan import PrecisionPlan


def content_key(data: bytes, settings: dict[str, Any]) -> str:
    """SHA-256 of ``data`` and ``settings`` (JSON, keys sorted)."""
    digest = hashlib.sha256(data)
    digest.update(json.dumps(settings, sort_keys=True, default=str).encode())
    return digest.hexdigest()


def clip_key(audio: np.ndarray) -> str:
    """SHA-256 of a clip's samples, their type and shape."""
    samples = np.ascontiguousarray(audio)
    return content_key(samples.tobytes(), {"dtype": str(samples.dtype), "shape": list(samples.shape)})


@dataclass
class TranscriptCache:
    """Texts (with the seconds each took) per (variant key, clip key); counts what was reused and what was run."""

    def __post_init__(self) -> None:
        self._entries: dict[tuple[str, str], tuple[str, float]] = {}
        self.reused = 0  # clip transcriptions taken from the cache
        self.transcribed = 0  # clip transcriptions run and stored

    def get(self, variant: str, clip: str) -> tuple[str, float] | None:
        found = self._entries.get((variant, clip))
        if found is not None:
            self.reused += 1
        return found

    def put(self, variant: str, clip: str, text: str, seconds: float) -> None:
        self._entries[(variant, clip)] = (text, seconds)
        self.transcribed += 1

    def counts(self) -> dict[str, int]:
        """Clip transcriptions reused and run so far, and the distinct (variant, clip) entries."""
        return {"reused": self.reused, "transcribed": self.transcribed, "entries": len(self._entries)}


class PlanSession:
    """One plan's variant during an evaluation: its cache key (with a ``cache``) and its runner, opened on first need,
    so a plan whose clips are all cached is never loaded into ONNX Runtime. ``settings``: what besides the ONNX bytes
    shapes a transcript (see the module docstring)."""

    def __init__(
        self,
        variants: VariantRunner,
        plan: PrecisionPlan,
        cache: TranscriptCache | None = None,
        settings: dict[str, Any] | None = None,
    ) -> None:
        self.variants, self.plan = variants, plan
        self._bytes = variants.model_bytes(plan) if cache is not None else None
        context = {**(settings or {}), "providers": list(variants.providers), "threads": variants.threads}
        self.key = content_key(self._bytes, context) if self._bytes is not None else None
        self._stack = ExitStack()
        self._runner: Runner | None = None

    def runner(self) -> Runner:
        if self._runner is None:
            self._runner = self._stack.enter_context(self.variants.runner(self.plan, self._bytes))
        return self._runner

    def __enter__(self) -> PlanSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

"""Length-bucketed batches of clips through a Runner, giving each utterance its own logits back.

Clips are sorted by length and cut into batches of at most ``batch_size``; each batch is padded to its
longest clip the way the model's feature extractor pads (``padding_value`` after the per-clip
normalisation), and each utterance's logits are cut back to the frames its own length gives (the conv
feature encoder's output-length formula, when it explains the batch's frame count; a graph whose frames it
does not explain keeps them all). How a model may be padded depends on it:

- a model that takes an attention mask (its feature extractor returns one, ``return_attention_mask``, and its
  feature encoder does not normalise over time, ``feat_extract_norm != "group"``) gets one when its graph
  takes an ``attention_mask`` input: padded batches give its unbatched outputs;
- every other model (GroupNorm feature encoders such as wav2vec2-base-960h, HuBERT-base, the demo model;
  a masked model whose graph lacks the mask input) batches clips of equal length only, since padding changes
  what it computes; only when the deployment pads (``pad=True``, ``--pad-batches``) is it zero-padded, a
  batch closed before its padding exceeds ``max_padding`` of its longest clip, and the report says so.

``BatchPolicy.for_runner`` decides which applies and bounds the batch by what the runner accepts (a
TensorRT engine's optimisation profile). ``utterance_logits`` is the batching layer; decoding stays per
utterance (``workbench.evaluate.transcribe``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from workbench.backends.base import Runner
from workbench.config import DEFAULT_EVAL_BATCH, EVAL_BATCH_BY_BACKEND, EVAL_MAX_PADDING
from workbench.errors import WorkbenchError
from workbench.model.export import INPUT, MASK, OUTPUT

if TYPE_CHECKING:
    from workbench.model.description import ModelDescription

MASK_INPUT = MASK
# the conv feature encoder every supported architecture uses unless its config.json says otherwise
DEFAULT_CONV_KERNEL = (10, 3, 3, 3, 3, 2, 2)
DEFAULT_CONV_STRIDE = (5, 2, 2, 2, 2, 2, 2)


def default_batch_size(backend: str) -> int:
    """The evaluation batch a backend gets without ``--batch-size`` (small on the CPU, larger on a GPU)."""
    return EVAL_BATCH_BY_BACKEND.get(backend, DEFAULT_EVAL_BATCH)


def takes_mask(model: ModelDescription) -> bool:
    """Whether padded batches (with the attention mask) give ``model``'s unbatched outputs: its feature extractor
    returns a mask and its feature encoder does not normalise over time (GroupNorm encoders take no mask)."""
    group_norm = model.structure.get("feat_extract_norm") == "group"
    return bool(model.features.return_attention_mask) and not group_norm


def check_batch_size(value: int) -> int:
    if not isinstance(value, int) or value < 1:
        raise WorkbenchError(f"--batch-size must be a whole number of at least 1, not {value!r}")
    return value


@dataclass(frozen=True)
class ConvGeometry:
    """Kernels and strides of the conv feature encoder: samples -> frames."""

    kernels: tuple[int, ...] = DEFAULT_CONV_KERNEL
    strides: tuple[int, ...] = DEFAULT_CONV_STRIDE

    def frames(self, samples: int) -> int:
        length = samples
        for kernel, stride in zip(self.kernels, self.strides):
            length = (length - kernel) // stride + 1
        return max(0, length)

    @classmethod
    def of_model(cls, model: ModelDescription) -> ConvGeometry:
        """From the model folder's config.json (``conv_kernel``, ``conv_stride``), else the default stack."""
        folder = getattr(model, "folder", None)
        if folder is not None and (folder / "config.json").is_file():
            try:
                config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
                kernels, strides = config.get("conv_kernel"), config.get("conv_stride")
                if kernels and strides and len(kernels) == len(strides):
                    return cls(tuple(int(k) for k in kernels), tuple(int(s) for s in strides))
            except (OSError, ValueError, TypeError):
                pass
        return cls()


@dataclass(frozen=True)
class BatchPolicy:
    """How clips may share a batch on one runner."""

    batch_size: int
    mask: bool  # feed an attention mask (the model wants one and the graph takes it)
    max_padding: float  # padding allowed in a batch, as a share of its longest clip (0: equal lengths only)
    padding_value: float = 0.0

    @classmethod
    def for_runner(
        cls,
        runner: Runner,
        model: ModelDescription,
        batch_size: int,
        pad: bool = False,
        max_padding: float = EVAL_MAX_PADDING,
    ) -> BatchPolicy:
        """The policy for ``runner`` (activated): the mask when the model takes one and the graph has it; otherwise
        equal lengths only, or, when the deployment pads (``pad``), zero padding up to ``max_padding`` of a batch's
        longest clip; the batch capped at what the runner accepts."""
        size = check_batch_size(batch_size)
        limit = runner.batch_limit()
        if limit is not None:
            size = min(size, limit)
        if takes_mask(model) and MASK_INPUT in runner.graph_inputs():
            return cls(size, True, float("inf"), model.features.padding_value)
        return cls(size, False, max_padding if pad else 0.0, model.features.padding_value)

    @property
    def padded(self) -> bool:
        """Whether clips of different lengths may share a batch."""
        return self.batch_size > 1 and self.max_padding > 0.0

    def describe(self) -> dict[str, object]:
        return {
            "batch_size": self.batch_size,
            "attention_mask": self.mask,
            "max_padding": None if self.max_padding == float("inf") else self.max_padding,
            "padded": self.padded,
        }


def batching_note(described: dict[str, object]) -> str | None:
    """The report's line for a batch policy (``BatchPolicy.describe``) that pads (None when every batch is
    exact: batch 1, or clips of equal length)."""
    if not described.get("padded"):
        return None
    if described.get("attention_mask"):
        return (
            f"evaluation batches of up to {described['batch_size']} clips are padded to their longest clip, with "
            "the attention mask the model takes"
        )
    share = described.get("max_padding")
    share = float(share) if isinstance(share, (int, float)) else 0.0
    return (
        f"evaluation batches of up to {described['batch_size']} clips are zero-padded (up to {share:.0%} of their "
        "longest clip, no attention mask) because the deployment pads (--pad-batches): this model's outputs "
        "change with padding, so its transcripts are those of the padded deployment"
    )


def plan_batches(lengths: Sequence[int], batch_size: int, max_padding: float) -> list[list[int]]:
    """Indices of ``lengths`` in batches: sorted by length, at most ``batch_size`` each, a batch closed before
    its shortest clip falls more than ``max_padding`` (share of the longest) below its longest."""
    check_batch_size(batch_size)
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        if current:
            shortest = lengths[current[0]]
            full = len(current) >= batch_size
            too_padded = lengths[i] - shortest > max_padding * lengths[i]
            if full or too_padded:
                batches.append(current)
                current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


def padded_batch(rows: Sequence[np.ndarray], padding_value: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """[batch, longest] float32 inputs padded on the right, and the int64 attention mask (1 = real sample)."""
    longest = max(len(r) for r in rows)
    values = np.full((len(rows), longest), padding_value, dtype=np.float32)
    mask = np.zeros((len(rows), longest), dtype=np.int64)
    for j, row in enumerate(rows):
        values[j, : len(row)] = row
        mask[j, : len(row)] = 1
    return values, mask


def logits_of(runner: Runner, batch: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """Run a [batch, samples] float32 array (and its attention mask when given); logits [batch, frames, vocab]."""
    return logits_in(runner, runner.infer(_feeds(batch, mask)))


def _feeds(batch: np.ndarray, mask: np.ndarray | None) -> dict[str, np.ndarray]:
    return {INPUT: batch} if mask is None else {INPUT: batch, MASK_INPUT: mask}


def logits_in(runner: Runner, outputs: dict[str, np.ndarray]) -> np.ndarray:
    """The logits among a run's ``outputs``: the ``logits`` output, or the only one."""
    if OUTPUT in outputs:
        return np.asarray(outputs[OUTPUT])
    if len(outputs) == 1:
        return np.asarray(next(iter(outputs.values())))
    raise WorkbenchError(f"{runner.name}: model has no '{OUTPUT}' output (outputs: {sorted(outputs)})")


def utterance_logits(
    runner: Runner,
    rows: Sequence[np.ndarray],
    policy: BatchPolicy,
    geometry: ConvGeometry,
    vocab_size: int,
) -> Iterator[tuple[int, np.ndarray]]:
    """(index, logits [frames, vocab]) for every prepared row of ``rows``, batched by ``policy`` (active
    ``runner``; the batches go through ``Runner.infer_each``, which may run several at once); the order is the
    batches' order, each index once."""
    lengths = [len(r) for r in rows]
    batches = plan_batches(lengths, policy.batch_size, policy.max_padding)

    def feeds() -> Iterator[dict[str, np.ndarray]]:
        for batch in batches:
            values, mask = padded_batch([rows[i] for i in batch], policy.padding_value)
            yield _feeds(values, mask if policy.mask else None)

    for batch, outputs in zip(batches, runner.infer_each(feeds())):
        logits = logits_in(runner, outputs)
        if logits.ndim != 3 or logits.shape[0] != len(batch):
            raise WorkbenchError(
                f"{runner.name}: logits should be [batch, frames, vocab] for a batch of {len(batch)}, "
                f"got {logits.shape}"
            )
        if logits.shape[-1] < vocab_size:
            raise WorkbenchError(
                f"{runner.name}: {logits.shape[-1]} logits per frame, but the model has {vocab_size} "
                "tokens; this ONNX file is another model's"
            )
        longest = max(lengths[i] for i in batch)
        exact = geometry.frames(longest) == logits.shape[1]
        for j, i in enumerate(batch):
            # the longest clip, or a graph whose frames the conv stack does not explain, keeps every frame
            frames = geometry.frames(lengths[i]) if exact and lengths[i] < longest else logits.shape[1]
            yield i, logits[j, : max(1, min(frames, logits.shape[1]))]

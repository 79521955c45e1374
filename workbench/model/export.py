"""ONNX export of a supported CTC model (opset 17, dynamic batch and samples) and a parity check.

Node names come from the module path, e.g. ``/wav2vec2/encoder/layers.3/attention/q_proj/MatMul``
(``/hubert/...``, ``/wavlm/...``, ``/data2vec_audio/...``, ``/wav2vec2_conformer/...`` for the other
architectures); ``module_of`` maps them back to ``encoder.layers.3.attention.q_proj``. The model
description goes into the file's metadata, so every variant made from the export names its model.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workbench.artifacts import write_bytes_atomic
from workbench.model.architectures import BASE_PREFIXES
from workbench.model.description import ModelDescription, set_metadata

OPSET = 17
INPUT = "input_values"
OUTPUT = "logits"
MASK = "attention_mask"


__all__ = [
    "INPUT",
    "MASK",
    "OPSET",
    "OUTPUT",
    "Parity",
    "checked_parity",
    "export_onnx",
    "module_of",
    "parity_check",
]


def module_of(node_name: str) -> str:
    """``/wav2vec2/encoder/layers.3/attention/q_proj/MatMul`` -> ``encoder.layers.3.attention.q_proj``."""
    parts = [p for p in node_name.split("/") if p]
    if parts and parts[0] in BASE_PREFIXES:
        parts = parts[1:]
    return ".".join(parts[:-1]) if len(parts) > 1 else (parts[0] if parts else node_name)


def export_onnx(
    model,
    out_path: Path,
    description: ModelDescription | None = None,
    example_seconds: float = 2.0,
    attention_mask: bool = False,
) -> Path:
    """TorchScript-based export (dynamo=False keeps module-path node names), written atomically.

    With ``description``, the model description is stored in the file's metadata. With ``attention_mask``
    the graph takes a second input, ``attention_mask`` [batch, samples] int64 (1 = real sample), for models
    whose feature extractor returns one, so padded batches give each clip the logits it gets alone.
    """
    import io

    import onnx
    import torch

    dummy = torch.zeros(1, int(example_seconds * 16000))
    dummy[0, ::7] = 0.1
    args: tuple = (dummy,)
    names = [INPUT]
    axes = {INPUT: {0: "batch", 1: "samples"}, OUTPUT: {0: "batch", 1: "frames"}}
    if attention_mask:
        args = (dummy, torch.ones_like(dummy, dtype=torch.int64))
        names.append(MASK)
        axes[MASK] = {0: "batch", 1: "samples"}
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            args,
            buffer,  # type: ignore[arg-type]  # torch's annotation omits the file objects it accepts
            input_names=names,
            output_names=[OUTPUT],
            dynamic_axes=axes,
            opset_version=OPSET,
            do_constant_folding=True,
            dynamo=False,
        )
    data = buffer.getvalue()
    if description is not None:
        proto = onnx.load_from_string(data)
        del data
        set_metadata(proto, description)
        data = proto.SerializeToString()
        del proto
    write_bytes_atomic(out_path, data)
    return out_path


@dataclass(frozen=True)
class Parity:
    """ONNX Runtime vs PyTorch on real clips."""

    clips: int
    max_abs_logit_diff: float
    token_agreement: float
    transcripts_equal: int


def parity_check(model, onnx_path: Path, clips: list[np.ndarray], description: ModelDescription) -> Parity:
    """Max |logit difference|, greedy-token agreement and identical transcripts over ``clips``.

    Both sides get the same ``input_values`` (the description's feature preparation) and the transcripts
    are decoded with the model's own vocabulary.
    """
    import torch

    from workbench.backends.onnxruntime import OnnxRuntimeRunner

    diffs, agree, total, equal = [], 0, 0, 0
    with OnnxRuntimeRunner(onnx_path) as runner:
        for audio in clips:
            x = description.prepare(audio)[None]
            with torch.inference_mode():
                ref = model(torch.from_numpy(x)).logits.numpy()
            out = runner.infer({INPUT: x})[OUTPUT]
            diffs.append(float(np.max(np.abs(ref - out))))
            a, b = ref[0].argmax(-1), out[0].argmax(-1)
            agree += int((a == b).sum())
            total += len(a)
            equal += int(description.decode(ref[0]) == description.decode(out[0]))
    return Parity(len(clips), max(diffs) if diffs else 0.0, agree / max(1, total), equal)


# parity results of this process, by (model hash, export's sha256, clips' source, clip count)
_CHECKED: dict[tuple[str, str, str, int], Parity] = {}


def checked_parity(
    model,
    onnx_path: Path,
    clips: Callable[[], list[np.ndarray]],
    description: ModelDescription,
    key: tuple[str, str, int],
) -> Parity:
    """``parity_check`` once per process for the same model, export and clips: ``key`` is the export's sha256, the
    clips' source (a set's content hash) and their count; ``clips`` reads them only when the check runs. Jobs run
    one after another in one process (calibrate, then compare, search or sign-off calibrating again to find the
    cache) reuse the export on the same clips, where the check would repeat itself; a model without a hash (a
    description built by hand) is checked every time."""
    if not description.model_hash:
        return parity_check(model, onnx_path, clips(), description)
    full = (description.model_hash, *key)
    found = _CHECKED.get(full)
    if found is None:
        found = _CHECKED[full] = parity_check(model, onnx_path, clips(), description)
    return found

"""ONNX export of a Wav2Vec2ForCTC (opset 17, dynamic batch and samples) and a parity check.

Node names come from the module path, e.g. ``/wav2vec2/encoder/layers.3/attention/q_proj/MatMul``;
``module_of`` maps them back to ``encoder.layers.3.attention.q_proj``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workbench.artifacts import write_bytes_atomic
from workbench.model.features import normalise_audio
from workbench.model.vocab import DEFAULT_VOCABULARY, Vocabulary

OPSET = 17
INPUT = "input_values"
OUTPUT = "logits"


__all__ = ["INPUT", "OUTPUT", "OPSET", "Parity", "export_onnx", "module_of", "parity_check"]


def module_of(node_name: str) -> str:
    """``/wav2vec2/encoder/layers.3/attention/q_proj/MatMul`` -> ``encoder.layers.3.attention.q_proj``."""
    parts = [p for p in node_name.split("/") if p]
    if parts and parts[0] == "wav2vec2":
        parts = parts[1:]
    return ".".join(parts[:-1]) if len(parts) > 1 else (parts[0] if parts else node_name)


def export_onnx(model, out_path: Path, example_seconds: float = 2.0) -> Path:
    """TorchScript-based export (dynamo=False keeps module-path node names), written atomically."""
    import io

    import torch

    dummy = torch.zeros(1, int(example_seconds * 16000))
    dummy[0, ::7] = 0.1
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (dummy,), buffer, input_names=[INPUT], output_names=[OUTPUT],
                          dynamic_axes={INPUT: {0: "batch", 1: "samples"}, OUTPUT: {0: "batch", 1: "frames"}},
                          opset_version=OPSET, do_constant_folding=True, dynamo=False)
    write_bytes_atomic(out_path, buffer.getvalue())
    return out_path


@dataclass(frozen=True)
class Parity:
    """ONNX Runtime vs PyTorch on real clips."""

    clips: int
    max_abs_logit_diff: float
    token_agreement: float
    transcripts_equal: int


def parity_check(model, onnx_path: Path, clips: list[np.ndarray],
                 vocabulary: Vocabulary = DEFAULT_VOCABULARY) -> Parity:
    """Max |logit difference|, greedy-token agreement and identical transcripts over ``clips``."""
    import torch

    from workbench.backends.onnxruntime import OnnxRuntimeRunner

    diffs, agree, total, equal = [], 0, 0, 0
    with OnnxRuntimeRunner(onnx_path) as runner:
        for audio in clips:
            x = normalise_audio(audio)[None]
            with torch.inference_mode():
                ref = model(torch.from_numpy(x)).logits.numpy()
            out = runner.infer({INPUT: x})[OUTPUT]
            diffs.append(float(np.max(np.abs(ref - out))))
            a, b = ref[0].argmax(-1), out[0].argmax(-1)
            agree += int((a == b).sum())
            total += len(a)
            equal += int(vocabulary.decode(a.tolist()) == vocabulary.decode(b.tolist()))
    return Parity(len(clips), max(diffs) if diffs else 0.0, agree / max(1, total), equal)

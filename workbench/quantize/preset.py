"""The speech preset: the plan a mixed-precision search starts from for a Wav2Vec2-style CTC model.

Practitioners keep three kinds of layer out of INT8 in speech encoders: the feature encoder's first
convolution (it reads the raw waveform, whose range per clip varies with the recording level; a public
OpenVINO run of Wav2Vec2 recovered its accuracy only with the first conv layers in float), the final
projection (the CTC head ``lm_head``, whose logits decide every token) and the normalisations (LayerNorm /
GroupNorm). Normalisations are never quantized by this workbench (only MatMul/Gemm/Conv inputs get Q/DQ,
see docs/recovery.md), so the preset names the two compute nodes: everything else starts in INT8.
"""

from __future__ import annotations

import onnx

from workbench.model.export import module_of
from workbench.quantize.plan import PrecisionPlan, quantizable_nodes

PRESET_MODULES = ("feature_extractor.conv_layers.0.conv", "lm_head")


def speech_preset(model: onnx.ModelProto, keep: str = "fp16") -> PrecisionPlan:
    """INT8 everywhere but the first feature-encoder conv and the CTC head, which get ``keep``."""
    overrides = {n: keep for n in quantizable_nodes(model) if module_of(n) in PRESET_MODULES}
    return PrecisionPlan("speech-preset", "int8", overrides)

"""Precision plans and the one function that turns FP32 ONNX + ranges + plan into a variant.

API: ``PrecisionPlan(name, default, overrides)`` (JSON via ``to_json``/``from_json``/``load``),
``quantizable_nodes(model)`` (node names a plan can place), ``build_variant(fp32, amax, plan, out)``.
"""

from workbench.quantize.plan import (
    FP16,
    FP32,
    INT8,
    PRECISIONS,
    QUANTIZABLE_OPS,
    PrecisionPlan,
    quantizable_nodes,
)
from workbench.quantize.qdq import build_variant

__all__ = [
    "FP16",
    "FP32",
    "INT8",
    "PRECISIONS",
    "QUANTIZABLE_OPS",
    "PrecisionPlan",
    "build_variant",
    "quantizable_nodes",
]

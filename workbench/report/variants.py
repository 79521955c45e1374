"""Default candidates for sign-off: FP32, FP16 and INT8 variants built from a model and calibration set.

Uses the calibrate job (ONNX export, calibration cache, INT8 Q/DQ) and the quantize module's
``build_variant`` for FP16. Imported lazily so that signoff on given ONNX files needs neither.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from workbench.config import ENGINES_DIR
from workbench.errors import WorkbenchError


@dataclass(frozen=True)
class DefaultVariants:
    candidates: list[tuple[str, Path]]  # fp32 first
    cache: Path
    sensitivity: Path | None = None  # the ranking the mixed plan's search used, when there is one
    mixed_note: str | None = None


def build_default_variants(model: Path | str, calib_set: str, method: str = "entropy",
                           root: Path = ENGINES_DIR, eval_hash: str | None = None) -> DefaultVariants:
    """Export/calibrate (reusing a matching cache) and write FP16 beside FP32 and INT8; add the mixed plan
    of a finished ``search`` on this export and cache (not searched on the evaluation set ``eval_hash``)."""
    try:
        from workbench.calibrate_pipeline import run_calibrate
        from workbench.calibration.methods import MethodSpec
        from workbench.quantize.plan import FP16
        from workbench.quantize.qdq import build_variant
    except ImportError as exc:
        raise WorkbenchError(f"building variants needs the calibrate/quantize modules ({exc}); give the "
                             "candidates as --candidate NAME=PATH.onnx instead") from exc
    result = run_calibrate(model, calib_set, MethodSpec(method), root=root)
    fp16 = result.fp32_onnx.with_name("model.fp16.onnx")
    if not fp16.exists():
        build_variant(result.fp32_onnx, {}, FP16, fp16)
    candidates = [("fp32", result.fp32_onnx), ("fp16", fp16), (f"int8-{method}", result.int8_onnx)]
    from workbench.compare.found import matching_search

    found = matching_search(result.fp32_onnx, result.cache, eval_hash)
    if found is None:
        return DefaultVariants(candidates, result.cache)
    note = f"mixed = {found.name}: {found.int8_share * 100:.1f}% INT8, from {found.search}"
    return DefaultVariants(candidates + [("mixed", found.onnx)], result.cache, found.sensitivity, note)

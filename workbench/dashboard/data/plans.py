"""The precision plan of a candidate, read back from its ONNX graph: per MatMul/Gemm/Conv node int8
(an input comes from DequantizeLinear), fp16 (an input is cast to or stored as float16) or fp32."""

from __future__ import annotations

import functools
from pathlib import Path

import pandas as pd

from workbench.quantize.plan import precisions_of_onnx


@functools.lru_cache(maxsize=16)
def _plan(path: str, mtime_ns: int) -> tuple[tuple[str, str, str], ...]:
    return tuple(precisions_of_onnx(Path(path)))


def plan_of_onnx(path: Path) -> pd.DataFrame:
    """position, node, op, precision for every compute node, graph order (cached per file version)."""
    path = Path(path)
    rows = _plan(str(path), path.stat().st_mtime_ns)
    return pd.DataFrame([{"position": i, "node": n, "op": op, "precision": p} for i, (n, op, p) in enumerate(rows)],
                        columns=["position", "node", "op", "precision"])

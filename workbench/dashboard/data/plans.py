"""The precision plan of a candidate, read back from its ONNX graph: per MatMul/Gemm/Conv node int8
(an input comes from DequantizeLinear), fp16 (an input is cast to or stored as float16) or fp32."""

from __future__ import annotations

import functools
from pathlib import Path

import onnx
import pandas as pd

from workbench.quantize.plan import QUANTIZABLE_OPS


@functools.lru_cache(maxsize=16)
def _plan(path: str, mtime_ns: int) -> tuple[tuple[str, str, str], ...]:
    model = onnx.load(path, load_external_data=False)
    producer = {out: node for node in model.graph.node for out in node.output}
    fp16_inits = {i.name for i in model.graph.initializer if i.data_type == onnx.TensorProto.FLOAT16}
    rows = []
    for node in model.graph.node:
        if node.op_type not in QUANTIZABLE_OPS:
            continue
        sources = [producer.get(name) for name in node.input[:2] if name]
        if any(src is not None and src.op_type == "DequantizeLinear" for src in sources):
            precision = "int8"
        elif any(name in fp16_inits for name in node.input[:2]) or any(
                src is not None and src.op_type == "Cast" and any(a.name == "to" and a.i == onnx.TensorProto.FLOAT16
                                                                  for a in src.attribute) for src in sources):
            precision = "fp16"
        else:
            precision = "fp32"
        rows.append((node.name, node.op_type, precision))
    return tuple(rows)


def plan_of_onnx(path: Path) -> pd.DataFrame:
    """position, node, op, precision for every compute node, graph order (cached per file version)."""
    path = Path(path)
    rows = _plan(str(path), path.stat().st_mtime_ns)
    return pd.DataFrame([{"position": i, "node": n, "op": op, "precision": p} for i, (n, op, p) in enumerate(rows)],
                        columns=["position", "node", "op", "precision"])

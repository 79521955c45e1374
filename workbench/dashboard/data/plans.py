"""The precision plan of a candidate, read back from its ONNX graph, every node
(``quantize.plan.precisions_of_graph``): MatMul/Gemm/Conv int8 (an input comes from DequantizeLinear),
every node that writes a float tensor fp16 or fp32 by the type it computes in, ``none`` for shape and index
arithmetic. The Q/DQ pairs and boundary Casts a variant adds are
not nodes of the plan and are left out. Where the variant's plan file lies beside it
(``<variant>.plan.json``), each FP32 node's reason comes from there."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pandas as pd

from workbench.quantize.plan import precisions_of_onnx

COLUMNS = ["position", "node", "op", "precision", "reason"]


@functools.lru_cache(maxsize=16)
def _plan(path: str, mtime_ns: int) -> tuple[tuple[str, str, str], ...]:
    return tuple(precisions_of_onnx(Path(path), every_node=True))


def _reasons(onnx_path: Path) -> dict[str, str]:
    plan_file = onnx_path.with_suffix(".plan.json")
    try:
        data = json.loads(plan_file.read_text(encoding="utf-8"))
        return {str(k): str(v) for k, v in data.get("keep_fp32", {}).items()}
    except (OSError, ValueError, AttributeError):
        return {}


def plan_of_onnx(path: Path) -> pd.DataFrame:
    """position, node, op, precision, reason for every node of the plan, graph order (cached per file version)."""
    path = Path(path)
    rows = _plan(str(path), path.stat().st_mtime_ns)
    reasons = _reasons(path)
    return pd.DataFrame(
        [
            {"position": i, "node": n, "op": op, "precision": p, "reason": reasons.get(n, "")}
            for i, (n, op, p) in enumerate(rows)
        ],
        columns=COLUMNS,
    )


def plan_of_placements(placements) -> pd.DataFrame:
    """The same table from ``PrecisionPlan.placements`` (a plan laid over the FP32 graph)."""
    return pd.DataFrame(
        [
            {"position": i, "node": p.node, "op": p.op, "precision": p.precision, "reason": p.reason or ""}
            for i, p in enumerate(placements)
        ],
        columns=COLUMNS,
    )

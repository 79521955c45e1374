"""Layer comparison, sensitivity and search outputs of ``compare`` / ``search`` under
``engines/<model hash 12>/compare/`` (schema: layers ``workbench-layers/1``, sensitivity
``workbench-sensitivity/1``, search ``workbench-search/1``), joined into per-layer tables."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from workbench.artifacts import read_json_artifact
from workbench.compare.outputs import LAYERS_FORMAT, SENSITIVITY_FORMAT
from workbench.dashboard.data.reports import on_pareto_front
from workbench.dashboard.paths import ArtifactRoots, display, resolve
from workbench.errors import WorkbenchError

SQNR_IDENTICAL = 999.0


def _files(roots: ArtifactRoots, pattern: str) -> list[Path]:
    if not roots.engines.is_dir():
        return []
    return sorted(roots.engines.glob(f"*/compare/{pattern}"), key=lambda p: p.stat().st_mtime, reverse=True)


def layer_runs(roots: ArtifactRoots) -> list[str]:
    """Layer comparison files (``engines/*/compare/layers-*.json``), newest first, as artifact-relative labels."""
    return [display(p, roots) for p in _files(roots, "layers-*.json")]


def search_files(roots: ArtifactRoots) -> list[str]:
    """Search records (``engines/*/compare/search-*.json``), newest first, as artifact-relative labels."""
    return [display(p, roots) for p in _files(roots, "search-*.json")]


def load_json(label: str, roots: ArtifactRoots, expected_format: str) -> tuple[Path, dict[str, Any]]:
    """Read a compare/search output through the resolver and check its format tag."""
    path = resolve(roots.root / label, "engines", roots)
    return path, read_json_artifact(
        path, expected_format, "run the command that wrote it again", what=f"{expected_format} file"
    )


@dataclass
class LayerView:
    """A layer table file, its rows as a frame (with sensitivity columns when a matching ranking is beside it)."""

    path: Path
    layers: dict[str, Any]
    table: pd.DataFrame
    sensitivity: dict[str, Any] | None
    sensitivity_path: Path | None


def _sensitivity_for(
    layers_path: Path, layers: dict[str, Any], roots: ArtifactRoots
) -> tuple[Path | None, dict[str, Any] | None]:
    """The sensitivity file beside the layer table made from the same cache (provenance), newest first."""
    want = layers.get("provenance", {}).get("cache")
    for path in sorted(
        layers_path.parent.glob("sensitivity-*.json"), key=lambda p: p.stat().st_mtime, reverse=True
    ):
        try:
            _, data = load_json(display(path, roots), roots, SENSITIVITY_FORMAT)
        except WorkbenchError:
            continue
        if want is None or data.get("provenance", {}).get("cache") == want:
            return path, data
    return None, None


def load_layer_view(label: str, roots: ArtifactRoots) -> LayerView:
    """A layer table joined with its group's sensitivity (KL, token disagreement, rank)."""
    path, layers = load_json(label, roots, LAYERS_FORMAT)
    table = pd.DataFrame(layers.get("rows", []))
    if table.empty:
        return LayerView(path, layers, table, None, None)
    sens_path, sens = _sensitivity_for(path, layers, roots)
    table["1 - cosine"] = 1.0 - table["cosine"].astype(float)
    table["SQNR dB"] = table["sqnr_db"].astype(float)
    table["SQNR deficit dB"] = (
        table["SQNR dB"]
        .where(table["SQNR dB"] < SQNR_IDENTICAL)
        .rsub(table["SQNR dB"].where(table["SQNR dB"] < SQNR_IDENTICAL).max())
        .fillna(0.0)
    )
    if sens is not None:
        by_group = {g["name"]: g for g in sens.get("layers", [])}
        table["sensitivity KL"] = [
            float(by_group[g]["kl"]) if g in by_group else math.nan for g in table["group"]
        ]
        table["token disagreement"] = [
            float(by_group[g]["token_disagreement"]) if g in by_group else math.nan for g in table["group"]
        ]
        table["sensitivity rank"] = [by_group[g]["rank"] if g in by_group else None for g in table["group"]]
    table["position"] = table["index"]
    return LayerView(path, layers, table, sens, sens_path)


def heat_metrics(view: LayerView) -> list[str]:
    """The heatmap's rows: error metrics, and the group's sensitivity KL when known."""
    metrics = ["1 - cosine", "rel_l2", "SQNR deficit dB"]
    if "sensitivity KL" in view.table.columns:
        metrics.append("sensitivity KL")
    return metrics


def onnx_node(view: LayerView, node_name: str, roots: ArtifactRoots) -> dict[str, Any] | None:
    """Inputs, outputs and attributes of the node in the FP32 ONNX beside the compare folder."""
    import onnx
    from onnx import helper

    try:
        fp32 = resolve(view.path.parent.parent / "model.fp32.onnx", "engines", roots)
    except WorkbenchError:
        return None
    model = onnx.load(str(fp32), load_external_data=False)
    for node in model.graph.node:
        if node.name == node_name:
            return {
                "op": node.op_type,
                "inputs": list(node.input),
                "outputs": list(node.output),
                "attributes": {a.name: _attr(helper.get_attribute_value(a)) for a in node.attribute},
            }
    return None


def _attr(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, (list, tuple)):
        return [_attr(v) for v in value]
    if hasattr(value, "dims"):  # a TensorProto
        return f"tensor {list(value.dims)}"
    return value


def search_frame(search: dict[str, Any], group: str = "overall") -> pd.DataFrame:
    """One row per evaluated search candidate (plus the FP32 baseline): WER, delta, latency, passed, front."""
    rows = []
    base = search.get("baseline", {})
    base_wer = base.get("wer") if group == "overall" else base.get("per_condition", {}).get(group)
    if base_wer is not None:
        rows.append(
            {
                "candidate": base.get("name", "fp32"),
                "step": 0,
                "phase": "baseline",
                "WER %": base_wer["estimate"] * 100,
                "WER low %": base_wer["low"] * 100,
                "WER high %": base_wer["high"] * 100,
                "delta pts": 0.0,
                "delta low pts": 0.0,
                "delta upper pts": None,
                "latency ms": base.get("mean_ms_per_utterance"),
                "int8 share": 0.0,
                "int8 MACs share": 0.0,
                "dev utterances": base.get("utterances"),
                "stopped": "",
                "verdict": "PASS",
                "reason": "baseline",
                "fp16 groups": "",
            }
        )
    found_step = (search.get("found") or {}).get("step")
    for c in search.get("candidates", []):
        wer = c["wer"]["overall"] if group == "overall" else c["wer"]["per_condition"].get(group)
        delta = c["delta"]["overall"] if group == "overall" else c["delta"]["per_condition"].get(group)
        if wer is None:
            continue
        rows.append(
            {
                "candidate": c["name"],
                "step": c["step"],
                "phase": c["phase"],
                "WER %": wer["estimate"] * 100,
                "WER low %": wer["low"] * 100,
                "WER high %": wer["high"] * 100,
                "delta pts": None if delta is None else delta["estimate"] * 100,
                "delta low pts": None if delta is None else delta["low"] * 100,
                "delta upper pts": None if delta is None else delta["high"] * 100,
                "judged upper pts": (c.get("judged_delta_high") or {}).get(
                    "overall" if group == "overall" else f"condition {group}"
                ),
                "latency ms": (c.get("latency") or {}).get("mean_ms_per_utterance"),
                "int8 share": c.get("int8_share"),
                "int8 MACs share": c.get("int8_macs_share"),
                "dev utterances": (c.get("latency") or {}).get("utterances"),
                "stopped": (c.get("evidence") or {}).get("stopped", ""),
                "verdict": "PASS" if c["passed"] else "FAIL",
                "reason": "; ".join(c.get("reasons", [])) or "within budget",
                "fp16 groups": ", ".join(c.get("fp16_groups", [])),
            }
        )
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    frame["pareto"] = on_pareto_front(frame)
    frame["recommended"] = frame["step"] == found_step
    return frame


def search_plan(
    search_path: Path, search: dict[str, Any], candidate: str, roots: ArtifactRoots
) -> pd.DataFrame:
    """The candidate's plan laid over every node of the FP32 ONNX in the run folder (with FP32 reasons)."""
    import onnx

    from workbench.dashboard.data.plans import plan_of_placements
    from workbench.quantize.plan import PrecisionPlan

    entry = next((c for c in search.get("candidates", []) if c["name"] == candidate), None)
    fp32 = resolve(search_path.parent.parent / "model.fp32.onnx", "engines", roots)
    plan = PrecisionPlan("fp32", "fp32") if entry is None else PrecisionPlan.from_json(entry["plan"])
    return plan_of_placements(plan.placements(onnx.load(str(fp32), load_external_data=False)))

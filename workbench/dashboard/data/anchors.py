"""Anchors beside a sign-off record: ``reports/<name>/anchors.json`` (written by ``benchmarks/anchors.py``) names
the tool that made each candidate (ONNX Runtime, ModelOpt, the workbench, the FP32 baseline) and its setting, so
the Trade-off page marks the other tools' points on the same chart. A record without one shows as before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from workbench.artifacts import read_json_artifact
from workbench.errors import WorkbenchError

ANCHORS_NAME = "anchors.json"
ANCHORS_FORMAT = "workbench-anchors"
WORKBENCH = "workbench"


def anchors_sidecar(tools: dict[str, str], settings: dict[str, str], benchmark: str) -> dict[str, Any]:
    """The sidecar's content: candidate -> tool and candidate -> setting."""
    return {
        "format": ANCHORS_FORMAT,
        "version": 1,
        "benchmark": benchmark,
        "tools": tools,
        "settings": settings,
    }


def anchor_tools(folder: Path) -> dict[str, str] | None:
    """candidate -> tool from the folder's anchors.json; None when there is none. A damaged file is a user error."""
    path = Path(folder) / ANCHORS_NAME
    if not path.is_file():
        return None
    data = read_json_artifact(
        path,
        ANCHORS_FORMAT,
        "rerun python benchmarks/anchors.py, or delete the file",
        what="anchors file",
        version=1,
    )
    tools = data.get("tools")
    if not isinstance(tools, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in tools.items()
    ):
        raise WorkbenchError(
            f"{path}: 'tools' must map candidate names to tool names; rerun python "
            "benchmarks/anchors.py, or delete the file"
        )
    return tools

"""Analysis result files: names, header (format tag, time, command, provenance), JSON and CSV (all atomic).

Layout (``folder`` is ``engines/<model hash 12>/compare`` or ``--out``): ``layers-<candidate>.json/.csv``
and ``sensitivity-<method>-<calib12>-rest-<rest>.json/.csv``; ``workbench.search.outputs`` adds the
search's files with the same helpers. The field-by-field schema is in docs/compare-and-search.md.
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from workbench import __version__
from workbench.artifacts import write_json_atomic, write_text_atomic

LAYERS_FORMAT = "workbench-layers/1"
SENSITIVITY_FORMAT = "workbench-sensitivity/1"


def versions() -> dict[str, str]:
    """Versions of the tools whose behaviour a result depends on (recorded in its provenance)."""
    import onnx
    import onnxruntime
    import polygraphy

    return {
        "workbench": __version__,
        "onnxruntime": onnxruntime.__version__,
        "polygraphy": polygraphy.__version__,
        "onnx": onnx.__version__,
    }


def header(fmt: str, provenance: dict[str, Any], command: str | None = None) -> dict[str, Any]:
    """``format``, ``created``, ``command`` and ``provenance`` (with tool versions) for a result file."""
    return {
        "format": fmt,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": command
        or (" ".join(["python -m workbench", *sys.argv[1:]]) if sys.argv[1:] else "library"),
        "provenance": {**provenance, "versions": versions()},
    }


def layers_path(folder: Path, candidate: str) -> Path:
    return folder / f"layers-{candidate}.json"


def sensitivity_path(folder: Path, tag: str, rest: str, granularity: str = "group") -> Path:
    suffix = "" if granularity == "group" else f"-{granularity}"
    return folder / f"sensitivity-{tag}-rest-{rest}{suffix}.json"


def write_json(path: Path, obj: dict[str, Any]) -> Path:
    write_json_atomic(path, obj)
    return path


def write_csv(path: Path, columns: Sequence[str], rows: Iterable[dict[str, Any]]) -> Path:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _cell(v) for k, v in row.items()})
    write_text_atomic(path, buffer.getvalue())
    return path


def _cell(value: Any) -> Any:
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (list, tuple)):
        return ";".join(str(v) for v in value)
    return value


def layers_csv_rows(data: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    conditions = sorted({c for r in data["rows"] for c in r["per_condition"]})
    columns = [
        "index",
        "tensor",
        "node",
        "op",
        "module",
        "group",
        "compute",
        "precision",
        "fp32_reason",
        "numel",
        "cosine",
        "sqnr_db",
        "rel_l2",
        "max_abs_error",
        "mean_abs_error",
        "polygraphy_passed",
        "significant",
    ]
    columns += [f"sqnr_db_{c}" for c in conditions] + [f"cosine_{c}" for c in conditions]
    rows = []
    for r in data["rows"]:
        row = dict(r)
        for c, m in r["per_condition"].items():
            row[f"sqnr_db_{c}"] = m["sqnr_db"]
            row[f"cosine_{c}"] = m["cosine"]
        rows.append(row)
    return columns, rows


def sensitivity_csv_rows(data: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    conditions = sorted({c for r in data["layers"] for c in r["kl_per_condition"]})
    columns = ["rank", "name", "score", "kl", "token_disagreement", "graph_index", "nodes"]
    columns += [f"kl_{c}" for c in conditions]
    if data.get("inverse"):
        columns += ["inverse_kl", "inverse_token_disagreement"]
    rows = [{**r, **{f"kl_{c}": v for c, v in r["kl_per_condition"].items()}} for r in data["layers"]]
    return columns, rows


def write_with_csv(
    path: Path,
    data: dict[str, Any],
    csv_rows: Callable[[dict[str, Any]], tuple[list[str], list[dict[str, Any]]]],
) -> tuple[Path, Path]:
    """Write ``data`` as JSON at ``path`` and its table as CSV beside it."""
    columns, rows = csv_rows(data)
    return write_json(path, data), write_csv(path.with_suffix(".csv"), columns, rows)

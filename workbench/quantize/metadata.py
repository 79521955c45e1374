"""Provenance in an ONNX file's metadata: what a candidate the workbench wrote for a target was made from.

A candidate made from another file (the ONNX Runtime CPU flavour of a Q/DQ candidate, ONNX Runtime's dynamic
quantization of the FP32 model) carries the SHA-256 of that file (``MADE_FROM``) and how it was made
(``MADE_HOW``: a JSON object naming the tool, its version and settings), beside the model description the
FP32 export wrote.
"""

from __future__ import annotations

import json
from pathlib import Path

import onnx

MADE_FROM = "workbench.made_from"  # sha256 of the file this candidate was made from
MADE_HOW = "workbench.made_how"  # JSON: tool, version, settings


def set_metadata(model: onnx.ModelProto, values: dict[str, str]) -> None:
    """Set (or replace) metadata entries of ``model`` in place; other entries are kept."""
    kept = [(p.key, p.value) for p in model.metadata_props if p.key not in values]
    del model.metadata_props[:]
    for key, value in kept + sorted(values.items()):
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value


def provenance(made_from: str, how: dict) -> dict[str, str]:
    """The metadata entries of a candidate made from the file with hash ``made_from`` as ``how`` says."""
    return {MADE_FROM: made_from, MADE_HOW: json.dumps(how, sort_keys=True)}


def made_of(path: Path) -> tuple[str | None, dict | None]:
    """(``MADE_FROM``, ``MADE_HOW``) of an ONNX file; None where it does not say."""
    props = {p.key: p.value for p in onnx.load(str(path), load_external_data=False).metadata_props}
    return props.get(MADE_FROM), json.loads(props[MADE_HOW]) if MADE_HOW in props else None

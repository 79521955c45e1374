"""The sign-off record: versioned JSON with results and provenance, and its verification.

Provenance lists every input artifact (model, calibration set, evaluation set, calibration cache,
candidate ONNX files/engines) with its path and SHA-256. ``verify_inputs`` recomputes them, reading only
paths that the workspace resolver (``workbench.workspace.resolve``) places inside the artifact folders, and the
package's embedded demo model (a known resource, checked by its hash like the rest); a record whose inputs
changed, or that names any other path outside the workspace, is refused on re-render. A speech set's hash
leaves out its index (stat fields, rewritten whenever they move). The record also carries ``record_sha256``
over its own canonical JSON so that edits to the record itself are caught.
"""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path
from typing import Any

from workbench import journal
from workbench.artifact_paths import AREAS, ENV_VAR, ArtifactRoots, OutsideArtifacts, artifact_roots, resolve
from workbench.artifacts import (
    SET_INDEX,
    read_json_artifact,
    sha256_bytes,
    sha256_file,
    sha256_tree,
    strict_json,
)
from workbench.errors import WorkbenchError
from workbench.inputs.problem import Where
from workbench.inputs.record import FIX as RECORD_FIX
from workbench.inputs.record import check_artifacts, check_record
from workbench.resources import demo_model_dir

RECORD_SCHEMA = "workbench.signoff-report"
RECORD_VERSION = 1


SPEECH_SET = "speech set"


def _tree_skip(kind: str | None) -> tuple[str, ...]:
    """Files of a folder artifact that are not its content: a speech set's index of stat fields."""
    return (SET_INDEX,) if kind == SPEECH_SET else ()


def artifact_entry(role: str, path: Path | str, kind: str | None = None) -> dict[str, str]:
    """``{role, path, kind, sha256}`` for a file (content hash) or folder (tree hash)."""
    path = Path(path).resolve()
    if path.is_dir():
        digest = sha256_tree(path, _tree_skip(kind))
        return {"role": role, "path": str(path), "kind": kind or "folder", "sha256": digest}
    if path.is_file():
        return {"role": role, "path": str(path), "kind": kind or "file", "sha256": sha256_file(path)}
    raise WorkbenchError(f"{role}: {path} does not exist")


def _hash_now(path: Path, kind: str | None = None) -> str | None:
    if path.is_dir():
        return sha256_tree(path, _tree_skip(kind))
    if path.is_file():
        return sha256_file(path)
    return None


def _embedded_model(entry: dict[str, Any]) -> Path | None:
    """The shipped demo model's folder when ``entry`` names it (a known resource of the package, read where it
    is installed and checked by its hash like any input), else None."""
    if entry.get("kind") != "model":
        return None
    shipped = demo_model_dir().resolve()
    return shipped if Path(entry["path"]) == shipped else None


def record_digest(record: dict[str, Any]) -> str:
    body = {k: v for k, v in record.items() if k != "record_sha256"}
    return sha256_bytes(json.dumps(body, sort_keys=True, default=str).encode())


def build_record(
    *,
    accuracy: dict,
    latency: dict,
    verdicts: list[dict],
    recommendation: str | None,
    gates: dict,
    artifacts: list[dict[str, str]],
    machine: dict,
    packages: dict[str, str],
    sensitivity: dict | None = None,
    notes: list[str] | None = None,
    decision: dict | None = None,
    backend: dict | None = None,
    model: dict | None = None,
    compute: dict | None = None,
    inference: dict | None = None,
    decoders: dict | None = None,
    serving: dict | None = None,
    label_free: dict | None = None,
    settings: dict | None = None,
) -> dict[str, Any]:
    """Assemble the record (plain JSON types only) and stamp its digest; ``model`` is the description's record."""
    record: dict[str, Any] = {
        "schema": RECORD_SCHEMA,
        "version": RECORD_VERSION,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "model": model,
        "baseline": accuracy["baseline"],
        "candidates": list(accuracy["candidates"]),
        "accuracy": accuracy,
        "latency": latency,
        "gates": gates,
        "verdicts": verdicts,
        "recommendation": recommendation,
        "decision": decision,
        "backend": backend,
        "sensitivity": sensitivity,
        "provenance": {"artifacts": artifacts, "machine": machine, "packages": packages},
        "notes": list(notes or []),
        "inference": inference,  # chunking and decoder (workbench.evaluate.inference); None: whole clips, greedy
        "decoders": decoders,  # per decoder: WER, delta and S/D/I per candidate (workbench.evaluate.deployed)
    }
    if compute is not None:  # INT8 share of multiply-accumulates and of compute nodes per candidate
        record["compute"] = compute
    if serving is not None:  # the serving benchmark (workbench.serving): latency against load, capacity
        record["serving"] = serving
    if label_free is not None:  # agreement with FP32 on unlabelled audio (workbench.jobs.label_free)
        record["label_free"] = label_free
    # every option that shaped the verdict (profile, limit, resamples, recipe, search, ...)
    if settings is not None:
        record["settings"] = settings
    record = json.loads(strict_json(record, default=str))  # no NaN or infinity reaches a record
    record["record_sha256"] = record_digest(record)
    return record


def load_record(path: Path) -> dict[str, Any]:
    """Read and check a record: schema, a version this code renders (``artifacts.read_json_artifact``), its own
    digest, then its shape (``workbench.inputs.record``). A report write killed after its journal is completed first
    (``workbench.journal.recover``), so the record is read beside the Markdown and HTML rendered from it."""
    journal.recover(Path(path).parent)
    record = read_json_artifact(
        path, RECORD_SCHEMA, RECORD_FIX, what="sign-off record", key="schema", version=RECORD_VERSION
    )
    if record.get("record_sha256") != record_digest(record):
        raise WorkbenchError(
            f"{path} was edited after it was written (its record_sha256 does not match); run signoff again"
        )
    return check_record(record, Where(f"sign-off record {path}", RECORD_FIX))


def verify_inputs(record: dict[str, Any], roots: ArtifactRoots | None = None) -> list[str]:
    """Recompute every input artifact's hash; returns one line per artifact that is missing, changed, or named
    outside the workspace ``roots`` (default: ``$WORKBENCH_ARTIFACTS`` or the project folder). A path outside
    it is never read or hashed: a record cannot make the workbench look at other files."""
    problems = []
    for entry in check_artifacts(record, Where("report record", RECORD_FIX)):
        try:
            path = _embedded_model(entry) or resolve(entry["path"], AREAS, roots, must_exist=False)
        except OutsideArtifacts:
            problems.append(
                f"{entry['role']}: {entry['path']} lies outside the workspace "
                f"({', '.join(a + '/' for a in AREAS)} of {(roots or artifact_roots()).root}); not read "
                f"(set {ENV_VAR} to the folder holding them)"
            )
            continue
        now = _hash_now(path, entry.get("kind"))
        if now is None:
            problems.append(f"{entry['role']}: {entry['path']} is missing")
        elif now != entry["sha256"]:
            problems.append(
                f"{entry['role']}: {entry['path']} changed (sha256 {entry['sha256'][:12]}... "
                f"recorded, {now[:12]}... now)"
            )
    return problems


def require_unchanged_inputs(record: dict[str, Any]) -> None:
    problems = verify_inputs(record)
    if problems:
        raise WorkbenchError(
            "refusing to render: input artifacts missing, changed since the report was made, or "
            "outside the workspace: " + "; ".join(problems) + "; run `python -m workbench signoff` again"
        )

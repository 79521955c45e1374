"""Sign-off records (``reports/<name>/report.json``): the shape the renderers and the input check rely on.

Checked after the schema, version and digest (``workbench.report.record.load_record``): a record whose
digest was recomputed after a hand edit must still have the right types, since its provenance paths are
hashed and its tables rendered.
"""

from __future__ import annotations

from typing import Any

from workbench.inputs import shape
from workbench.inputs.gates import check_gate_values
from workbench.inputs.problem import Where

FIX = "run signoff again (python -m workbench signoff; records are written by the workbench, not by hand)"
ARTIFACT_STRINGS = ("role", "path", "kind")


def check_artifacts(record: dict[str, Any], where: Where) -> list[dict[str, str]]:
    """``provenance.artifacts``: a list of ``{role, path, kind, sha256}`` (strings; sha256 a hex digest)."""
    prov = shape.mapping(record.get("provenance"), where.key("provenance"))
    items = shape.sequence(prov.get("artifacts"), where.key("provenance").key("artifacts"))
    for number, item in enumerate(items):
        at = where.key("provenance").key("artifacts").index(number)
        entry = shape.mapping(item, at)
        for key in ARTIFACT_STRINGS:
            shape.string(entry.get(key), at.key(key))
        shape.hex_digest(entry.get("sha256"), at.key("sha256"))
    return items


def check_record(record: dict[str, Any], where: Where) -> dict[str, Any]:
    """Top-level types, one accuracy entry and one verdict per candidate, gate values, provenance entries."""
    baseline = shape.string(record.get("baseline"), where.key("baseline"))
    names = [
        shape.string(n, where.key("candidates").index(i))
        for i, n in enumerate(shape.sequence(record.get("candidates"), where.key("candidates")))
    ]
    if baseline not in names:
        raise where.key("baseline").fail(f"{baseline!r} is not one of the candidates {names}")
    accuracy = shape.mapping(
        shape.mapping(record.get("accuracy"), where.key("accuracy")).get("candidates"),
        where.key("accuracy").key("candidates"),
    )
    latency = shape.mapping(record.get("latency"), where.key("latency"))
    verdicts = shape.sequence(record.get("verdicts"), where.key("verdicts"))
    judged = {}
    for i, verdict in enumerate(verdicts):
        at = where.key("verdicts").index(i)
        v = shape.mapping(verdict, at)
        judged[shape.string(v.get("candidate"), at.key("candidate"))] = v
        shape.string(v.get("summary"), at.key("summary"))
        shape.sequence(v.get("checks"), at.key("checks"))
        if not isinstance(v.get("passed"), bool):
            raise at.key("passed").fail(f"must be true or false, found {shape.describe(v.get('passed'))}")
    for name in names:
        at = where.key("accuracy").key("candidates").key(name)
        entry = shape.mapping(accuracy.get(name), at)
        shape.mapping(
            shape.mapping(entry.get("overall"), at.key("overall")).get("wer"), at.key("overall").key("wer")
        )
        shape.mapping(entry.get("groups"), at.key("groups"))
        if latency.get(name) is not None:
            shape.mapping(latency[name], where.key("latency").key(name))
        if name not in judged:
            raise where.key("verdicts").fail(f"no verdict for candidate {name!r}")
    recommendation = record.get("recommendation")
    if recommendation is not None and recommendation not in names:
        raise where.key("recommendation").fail(
            f"{shape.describe(recommendation)} is not one of the candidates"
        )
    gates = shape.mapping(record.get("gates"), where.key("gates"))
    check_gate_values(gates, where.key("gates"))
    check_artifacts(record, where)
    return record

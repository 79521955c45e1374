"""The report's label-free section: agreement with FP32 on unlabelled audio, FP32's confidence and the coverage of
the calibrated ranges there, and the shift check's lines (``record["label_free"]``, ``workbench.jobs.label_free``).

Markdown, HTML and the dashboard render the same (title, header, rows) tables, placed beside the WER table.
"""

from __future__ import annotations

from typing import Any

Table = tuple[str, list[str], list[list[str]]]


def _pct(x: float | None) -> str:
    return "n/a" if x is None or x != x else f"{x * 100:.2f}"


def _ci(iv: dict[str, Any] | None) -> str:
    if iv is None:
        return "n/a"
    return f"{_pct(iv.get('estimate'))} [{_pct(iv.get('low'))}, {_pct(iv.get('high'))}]"


def _agreement_rows(section: dict[str, Any], record: dict[str, Any], labelled: bool) -> list[list[str]]:
    rows = []
    beyond = set(section.get("beyond_labelled") or [])
    for name, c in section["candidates"].items():
        delta = None
        if labelled:
            overall = record["accuracy"]["candidates"].get(name, {}).get("overall") or {}
            delta = (overall.get("delta") or {}).get("estimate")
        est = c.get("estimate")
        rows.append(
            [
                f"{section['set']}{' (labelled)' if labelled else ''}",
                name,
                str(section["utterances"]),
                _ci(c["disagreement"]),
                _pct(c["char_disagreement"]["estimate"]),
                _pct(c["changed_share"]),
                _ci(c["wer_bound"]),
                _pct(delta) if labelled else (_pct(est["estimate"]) + " (estimate)" if est else "n/a"),
                "yes" if name in beyond else "no" if not labelled else "-",
            ]
        )
    return rows


def label_free_tables(record: dict[str, Any]) -> list[Table]:
    """The label-free tables of a record ([] when the sign-off had no ``--unlabelled-set``)."""
    lf = record.get("label_free")
    if not isinstance(lf, dict):
        return []
    unit = "CER" if (lf["labelled"].get("unit") == "cer") else "WER"
    rows = _agreement_rows(lf["labelled"], record, True)
    for s in lf["sets"]:
        rows += _agreement_rows(s, record, False)
    header = [
        "set",
        "candidate",
        "utterances",
        "disagreement with FP32, % of its words [95% CI]",
        "character disagreement %",
        "changed utterances %",
        f"bound on |{unit} delta|, pts [95% CI]",
        f"{unit} delta, pts (measured on the labelled set; label-free estimate elsewhere)",
        "beyond the labelled set",
    ]
    out: list[Table] = [("Label-free check: agreement with FP32 (no labels)", header, rows)]
    conf_rows = []
    for s in [lf["labelled"], *lf["sets"]]:
        conf = s.get("confidence") or {}
        cov = s.get("coverage")
        moved = "n/a"
        top = "n/a"
        if isinstance(cov, dict):
            moved = f"{len(cov['left'])} of {cov['tensors']}"
            if cov["top"]:
                m = cov["top"][0]
                top = f"{m['tensor']}: {m['share'] * 100:.3f} % (calibration {m['reference_share'] * 100:.3f} %)"
        conf_rows.append(
            [
                s["set"],
                f"{conf['mean_max_posterior']:.3f}" if conf else "n/a",
                _pct(conf.get("blank_share")) if conf else "n/a",
                moved if s is not lf["labelled"] else "-",
                top if s is not lf["labelled"] else "-",
            ]
        )
    out.append(
        (
            "Label-free check: FP32's confidence and the calibrated ranges",
            ["set", "FP32 mean max posterior", "FP32 blank frames %", "tensors beyond range", "moved most"],
            conf_rows,
        )
    )
    shift_rows = [[s["set"], s["shift"] or "not flagged"] for s in lf["sets"]]
    shift_rows += [[s["set"], f"note: {n}"] for s in lf["sets"] for n in s.get("notes") or []]
    shift_rows.append(["rule", lf["shift_rule"]])
    shift_rows.append(["bound", f"{lf['bound_note']} {lf['labelled']['reference_estimate']}"])
    out.append(("Label-free check: shift", ["set", "what the check says"], shift_rows))
    return out

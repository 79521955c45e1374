"""Render a sign-off record to Markdown and to one self-contained HTML page (inline CSS, base64 PNG)."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from workbench import journal
from workbench.artifacts import json_text, write_text_atomic
from workbench.report import plots
from workbench.report.label_free import label_free_tables
from workbench.report.serving import serving_tables

RECORD_NAME, MARKDOWN_NAME, HTML_NAME = "report.json", "report.md", "report.html"


def _pct(x: float | None) -> str:
    return "n/a" if x is None or x != x else f"{x * 100:.2f}"


def _ci(iv: dict | None) -> str:
    if iv is None:
        return "baseline"
    return f"{_pct(iv['estimate'])} [{_pct(iv['low'])}, {_pct(iv['high'])}]"


def verdict_mode(record: dict[str, Any]) -> str:
    """ship, accuracy-signoff, insufficient-evidence or no-pass (records older than the decision field: from the recommendation)."""
    decision = record.get("decision")
    if isinstance(decision, dict) and isinstance(decision.get("mode"), str):
        return decision["mode"]
    return "ship" if record.get("recommendation") else "no-pass"


def unit_label(record: dict[str, Any]) -> str:
    """``WER`` or ``CER``: the unit the record's errors were counted in (records before units: WER)."""
    return str(record.get("accuracy", {}).get("unit", "wer")).upper()


def unit_words(record: dict[str, Any]) -> str:
    return "chars" if unit_label(record) == "CER" else "words"


def verdict_line(record: dict[str, Any]) -> str:
    decision = record.get("decision")
    if isinstance(decision, dict) and isinstance(decision.get("line"), str):
        return decision["line"]
    rec = record.get("recommendation")
    return f"SHIP {rec}" if rec else "NO CANDIDATE PASSES: do not ship"


def _ratio(r: dict | None) -> str:
    return "n/a" if not r else f"x{r['estimate']:.3f} [{r['low']:.3f}, {r['high']:.3f}]"


def tables(record: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) for every table; Markdown and HTML render the same tables."""
    acc = record["accuracy"]
    label = unit_label(record)
    verdicts = {v["candidate"]: v for v in record["verdicts"]}
    out = []
    rows = []
    for name in record["candidates"]:
        c = acc["candidates"][name]["overall"]
        lat = record["latency"].get(name)
        speed = next((f"{p:.1f}" for n, p, _ in plots.speed_points(record) if n == name), "n/a")
        rows.append(
            [
                name,
                _ci(c["wer"]),
                _ci(c["delta"]),
                speed,
                f"{lat['peak_rss_mb']:.0f}" if lat else "n/a",
                verdicts[name]["summary"],
            ]
        )
    out.append(
        (
            "Candidates",
            [
                "candidate",
                f"{label} % [95% CI]",
                "delta vs baseline, pts [95% CI]",
                "p50 ms (gate batch)",
                "peak RSS MB",
                "verdict",
            ],
            rows,
        )
    )
    out += label_free_tables(record)  # beside the WER table: agreement with FP32 on unlabelled audio
    if decoder_rows(record):
        out.append(
            (
                f"{label} per decoder",
                [
                    "decoder",
                    "candidate",
                    f"{label} % [95% CI]",
                    "delta vs baseline, pts [95% CI]",
                    "S / D / I",
                    "extra S / D / I vs baseline",
                ],
                decoder_rows(record),
            )
        )
    out += compute_tables(record)
    out += serving_tables(record)
    for kind in ("condition", "accent", "voice"):
        rows = []
        for name in record["candidates"]:
            for group, g in acc["candidates"][name]["groups"].get(kind, {}).items():
                rows.append(
                    [
                        group,
                        name,
                        str(g["utterances"]),
                        str(g["reference_words"]),
                        _ci(g["wer"]),
                        _ci(g["delta"]),
                        g["wer"]["unit"],
                    ]
                )
        if rows:
            out.append(
                (
                    f"{label} per {kind}",
                    [
                        kind,
                        "candidate",
                        "utts",
                        unit_words(record),
                        f"{label} % [CI]",
                        "delta pts [CI]",
                        "resampled",
                    ],
                    sorted(rows, key=lambda r: r[0]),
                )
            )
    rows = []
    for name in record["candidates"]:
        lat = record["latency"].get(name)
        for p in (lat or {}).get("points", []):
            rows.append(
                [
                    name,
                    str(p["batch"]),
                    p["bucket"],
                    f"{p['clip_seconds']:.2f}",
                    f"{p['p50_ms']:.1f}",
                    f"{p['p90_ms']:.1f}",
                    f"{p['p99_ms']:.1f}",
                    f"{p['audio_seconds_per_second']:.1f}",
                    str(p["repeats"]),
                ]
            )
    if rows:
        out.append(
            (
                "Latency",
                [
                    "candidate",
                    "batch",
                    "bucket",
                    "clip s",
                    "p50 ms",
                    "p90 ms",
                    "p99 ms",
                    "audio s / s",
                    "repeats",
                ],
                rows,
            )
        )
    decision = record.get("decision") or {}
    if decision.get("ratios"):
        equal = set(decision.get("equally_fast", []))
        out.append(
            (
                "Latency ratio to the baseline",
                ["candidate", "ratio [CI]", "batch", "paired rounds", "equally fast as the leader"],
                [
                    [n, _ratio(r), str(r["batch"]), str(r["rounds"]), "yes" if n in equal else "-"]
                    for n, r in decision["ratios"].items()
                ],
            )
        )
    rows = [
        [v["candidate"], c["name"], c["detail"], "ok" if c["passed"] else "FAIL"]
        for v in record["verdicts"]
        for c in v["checks"]
    ]
    out.append(("Gate checks", ["candidate", "gate", "detail", "result"], rows))
    prov = record["provenance"]
    model = record.get("model")
    if model:
        out.append(
            ("Model", ["key", "value"], [[k, str(v)] for k, v in model.items() if k != "text_normalisation"])
        )
    out.append(
        (
            "Input artifacts",
            ["role", "kind", "path", "sha256"],
            [[a["role"], a["kind"], a["path"], a["sha256"]] for a in prov["artifacts"]],
        )
    )
    out.append(("Machine", ["key", "value"], [[k, str(v)] for k, v in prov["machine"].items()]))
    backends = {n: lat.get("backend", {}) for n, lat in record["latency"].items()}
    if backends:
        out.append(
            (
                "Backends",
                ["candidate", "backend"],
                [[n, ", ".join(f"{k}={v}" for k, v in b.items())] for n, b in backends.items()],
            )
        )
    out.append(("Packages", ["package", "version"], [[k, v] for k, v in sorted(prov["packages"].items())]))
    made = (record.get("backend") or {}).get("candidates")
    if made:
        out.insert(1, target_table(made))
    return out


def compute_tables(record: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    """INT8 share of multiply-accumulates beside the node share, and batched against batch-1 transcripts."""
    out = []
    compute = record.get("compute")
    if compute:
        seconds = compute.get("seconds")
        rows = [
            [
                name,
                f"{c['int8_macs_share'] * 100:.1f}",
                f"{c['int8_nodes']} / {c['compute_nodes']}",
            ]
            for name, c in compute.get("candidates", {}).items()
        ]
        out.append(
            (
                f"Compute in INT8 (multiply-accumulates at {seconds:.2f} s of audio)"
                if isinstance(seconds, (int, float))
                else "Compute in INT8",
                ["candidate", "INT8 share of MACs %", "INT8 / compute nodes"],
                rows,
            )
        )
    batching = (record.get("backend") or {}).get("batching") or {}
    checks = batching.get("batch_check") or []
    if checks:
        rows = [
            [
                c["candidate"],
                str(c["batch_size"]),
                str(c["utterances"]),
                str(c["differing_transcripts"]),
                "n/a" if c.get("wer_difference_points") is None else f"{c['wer_difference_points']:+.2f}",
            ]
            for c in checks
        ]
        out.append(
            (
                "Batched transcription against batch 1 (a sample of the evaluation set)",
                ["candidate", "batch", "utts", "transcripts that differ", "WER difference pts"],
                rows,
            )
        )
    return out


def target_table(made: dict[str, Any]) -> tuple[str, list[str], list[list[str]]]:
    """What the deployment target runs: each candidate as given or made for it, and those left out."""
    rows = [[c["name"], c["made_from"] or "-", c["how"]] for c in made["candidates"]]
    rows += [[name, "-", f"left out: {why}"] for name, why in made.get("left_out", {}).items()]
    return (f"Candidates for the target ({made['target']})", ["candidate", "made from", "how"], rows)


def _inference_line(record: dict[str, Any]) -> str:
    """How logits became text (records made before the inference configuration: whole clips, greedy)."""
    inference = record.get("inference")
    if not inference:
        return "whole clips, greedy CTC decoding with the model's own vocabulary"
    return f"{inference['summary']}, in the model's own vocabulary"


def decoder_rows(record: dict[str, Any]) -> list[list[str]]:
    """One row per decoder and candidate: WER, delta, S/D/I and the extra S/D/I over the baseline."""
    rows = []
    for decoder, entry in (record.get("decoders") or {}).items():
        shown = decoder
        if entry.get("utterances") is not None and entry.get("of") not in (None, entry["utterances"]):
            shown = f"{decoder} ({entry['utterances']} of {entry['of']} utt.)"
        for name, c in entry["candidates"].items():
            extra = (
                f"{c['extra_substitutions']:+d} / {c['extra_deletions']:+d} / {c['extra_insertions']:+d}"
                if name != record["baseline"]
                else "baseline"
            )
            rows.append(
                [
                    shown,
                    name,
                    _ci(c["wer"]),
                    _ci(c["delta"]),
                    f"{c['substitutions']} / {c['deletions']} / {c['insertions']}",
                    extra,
                ]
            )
    return rows


def _method(record: dict[str, Any]) -> list[str]:
    acc, g = record["accuracy"], record["gates"]
    lines = [
        f"Text normalisation (references and hypotheses): {acc['normalisation']}.",
        f"{unit_label(record)} = (S + D + I) / reference {'characters' if unit_label(record) == 'CER' else 'words'}, "
        f"jiwer alignment, {_inference_line(record)}. Intervals: "
        f"{int(acc['level'] * 100)}% percentile bootstrap, {acc['resamples']} resamples, seed {acc['seed']}, "
        f"resampling {acc['bootstrap_unit']}s; deltas are paired (same resamples for both systems).",
        f"Gates: overall {unit_label(record)} delta CI upper end <= {g['max_wer_delta_points']} pts; every "
        f"condition <= {g['max_condition_wer_delta_points']} pts"
        + (
            f"; latency {g['latency_percentile']} at batch {g['latency_batch']} <= {g['max_latency_ms']} ms"
            if g.get("max_latency_ms") is not None
            else "; no latency limit"
        )
        + ".",
    ]
    decision, backend = record.get("decision"), record.get("backend")
    if backend:
        lines.append(
            f"Measured on {backend['backend']} ({backend['device']}); deployment target {backend['target']}."
        )
    if decision:
        lines += [
            f"Verdict rule: {decision['rule']}; {decision['tie_break']}. A winner is picked only when "
            f"latency was measured on the target ({decision['target']}); otherwise the verdict is an "
            "accuracy sign-off."
        ] + ([f"Evidence rule: {decision['evidence_rule']}."] if decision.get("evidence_rule") else [])
        lines += list(decision.get("reasons", []))
    else:
        lines.append(f"Recommendation: the fastest PASS by mean p50 at batch {g['latency_batch']}.")
    return lines + list(acc.get("notes", [])) + list(record.get("notes", []))


def _figures(record: dict[str, Any]) -> list[tuple[str, str]]:
    label = unit_label(record)
    figs = [
        (f"{label} vs latency", plots.wer_vs_latency(record)),
        (f"{label} per condition", plots.condition_bars(record)),
    ]
    if record.get("serving"):
        figs.append(("Serving: latency against offered load", plots.serving_curves(record)))
    if record.get("sensitivity"):
        figs.append(("Per-layer sensitivity", plots.sensitivity_bars(record["sensitivity"])))
    return [(t, f) for t, f in figs if f]


def to_markdown(record: dict[str, Any]) -> str:
    lines = [
        f"# Precision sign-off: {verdict_line(record)}",
        "",
        f"Record version {record['version']}, created {record['created']}, baseline "
        f"`{record['baseline']}`, record sha256 `{record['record_sha256']}`.",
        "",
    ]
    lines += [f"- {m}" for m in _method(record)] + [""]
    for title, header, rows in tables(record):
        lines += [f"## {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows] + [""]
    lines.append("Figures are in report.html.")
    return "\n".join(lines) + "\n"


_CSS = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:0.5em 0 1.5em;font-size:13px}td,th{border:1px solid #ccc;padding:3px 7px}
th{background:#f0f0f0}.pass{color:#1a7f37;font-weight:bold}.fail{color:#c62828;font-weight:bold}
.verdict{font-size:1.4em;padding:0.5em;border-radius:6px;background:#eef}figure{margin:1em 0}
td.hash{font-family:monospace;font-size:11px}"""


def to_html(record: dict[str, Any]) -> str:
    e = html.escape
    mode = verdict_mode(record)
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>Precision sign-off: {e(verdict_line(record))}</title><style>{_CSS}</style></head><body>",
        f"<h1>Precision sign-off</h1><p class='verdict {'fail' if mode in ('no-pass', 'insufficient-evidence') else 'pass'}'>{e(verdict_line(record))}</p>",
        f"<p>Record version {record['version']}, created {e(record['created'])}, baseline "
        f"<code>{e(record['baseline'])}</code>, record sha256 <code>{e(record['record_sha256'])}</code>.</p>",
        "<ul>" + "".join(f"<li>{e(m)}</li>" for m in _method(record)) + "</ul>",
    ]
    for title, data in _figures(record):
        parts.append(
            f"<figure><img alt='{e(title)}' src='data:image/png;base64,{data}'>"
            f"<figcaption>{e(title)}</figcaption></figure>"
        )
    for title, header, rows in tables(record):
        parts.append(
            f"<h2>{e(title)}</h2><table><tr>" + "".join(f"<th>{e(h)}</th>" for h in header) + "</tr>"
        )
        for r in rows:
            cells = []
            for h, c in zip(header, r):
                cls = (
                    "hash"
                    if h == "sha256"
                    else ("pass" if c in ("PASS", "ok") else "fail" if c.startswith("FAIL") else "")
                )
                cells.append(f"<td class='{cls}'>{e(c)}</td>")
            parts.append("<tr>" + "".join(cells) + "</tr>")
        parts.append("</table>")
    parts.append(
        "<details><summary>Record (JSON)</summary><pre>"
        + e(json.dumps({k: v for k, v in record.items() if k != "accuracy"}, indent=1)[:200000])
        + "</pre></details></body></html>"
    )
    return "\n".join(parts)


def write_report(record: dict[str, Any], out_dir: Path, write_record: bool = True) -> dict[str, Path]:
    """Write report.json (unless re-rendering), report.md and report.html into ``out_dir`` together: all of them
    replace the old ones in one journaled step (``workbench.journal.files_together``), so a kill leaves the old
    report or the new one, never a mix."""
    out_dir = Path(out_dir)
    paths = {
        "record": out_dir / RECORD_NAME,
        "markdown": out_dir / MARKDOWN_NAME,
        "html": out_dir / HTML_NAME,
    }
    texts = {MARKDOWN_NAME: to_markdown(record), HTML_NAME: to_html(record)}  # rendered before anything moves
    if write_record:
        texts[RECORD_NAME] = json_text(record)
    with journal.files_together(out_dir, sorted(texts), "report") as temps:
        for name, text in texts.items():
            write_text_atomic(temps[name], text)
    return paths

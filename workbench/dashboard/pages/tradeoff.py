"""Trade-off page: WER or CER (the record's unit; overall or per condition) against latency for every
candidate of a sign-off record, PASS/FAIL, the Pareto front and the gates drawn; choosing a candidate
shows its precision plan. Each record signs off for one deployment target: the page says which, where the
latency was measured, and what the target runs (for ONNX Runtime CPU: the CPU flavours and dynamic INT8). An anchors record (a sign-off record with ``anchors.json`` beside it, from
``benchmarks/anchors.py``) marks which tool made each point: ONNX Runtime, ModelOpt or the workbench. A record with a serving
benchmark (``signoff --serving``) also gets its p99 against offered load per candidate and the capacity table."""

from __future__ import annotations

import streamlit as st

from workbench.dashboard import charts, ui
from workbench.dashboard.data import anchors, layers, plans
from workbench.dashboard.data import reports as data
from workbench.dashboard.data import serving as serving_data
from workbench.errors import WorkbenchError
from workbench.report.render import target_table, unit_label, verdict_line
from workbench.search.outputs import SEARCH_FORMAT

MEAN_P50 = "mean p50 over duration buckets (what 'fastest' is judged on)"


SIGNOFF, SEARCH = "sign-off records", "search records"


def render() -> None:
    st.title("Trade-off: accuracy vs latency")
    roots = ui.roots()
    searches = layers.search_files(roots)
    source = (
        st.radio("Candidates from", [SIGNOFF, SEARCH], horizontal=True, key="source") if searches else SIGNOFF
    )
    if source == SEARCH:
        _search(roots, searches)
    else:
        _signoff(roots)


def _shown(frame, unit: str):
    """The frame with its ``WER`` columns named after the record's unit (WER or CER), for display."""
    return frame.rename(columns={c: c.replace("WER", unit) for c in frame.columns if "WER" in c})


def _plan_view(plan, candidate: str) -> None:
    """Node counts per precision, a strip along the network, the FP32 nodes with their reasons, the node table."""
    counts = plan["precision"].value_counts()
    cols = st.columns(4)
    for col, precision in zip(cols, ("int8", "fp16", "fp32", "none")):
        col.metric(
            f"{precision} nodes" if precision != "none" else "no float data", int(counts.get(precision, 0))
        )
    ui.chart(charts.plan_strip(plan, f"Precision per node of {candidate}"))
    kept = plan[plan["reason"].astype(bool)] if "reason" in plan.columns else plan.iloc[:0]
    if len(kept):
        st.caption(f"{len(kept)} node(s) kept in FP32 by the FP16 guard:")
        st.dataframe(kept[["node", "op", "reason"]], width="stretch", hide_index=True)
    with st.expander("Nodes"):
        st.dataframe(plan, width="stretch", hide_index=True)


def _search(roots, searches: list[str]) -> None:
    opened = ui.open_picked(
        "Search record",
        searches,
        "search",
        "engines",
        lambda label: layers.load_json(label, roots, SEARCH_FORMAT),
        ui.Missing(
            "search records",
            "python -m workbench search",
            "Search records live in `engines/<model hash>/compare/search-*.json`.",
        ),
    )
    if opened is None:
        return
    path, search = opened
    conds = sorted(search.get("baseline", {}).get("per_condition", {}))
    unit = str(search.get("error_unit", "wer")).upper()
    group = st.selectbox(f"{unit} of", ["overall"] + conds, key="search-group")
    frame = layers.search_frame(search, group)
    if frame.empty:
        st.warning("This search record has no evaluated candidates.")
        return
    budget = search.get("budget", {})
    allowed = budget.get("max_wer_delta_points" if group == "overall" else "max_condition_wer_delta_points")
    base = frame[frame["phase"] == "baseline"]
    lines = {
        "wer": float(base["WER %"].iloc[0]) + allowed if allowed is not None and not base.empty else None,
        "allowed_delta": allowed,
        "latency": None,
    }
    dev = search.get("dev_set", {})
    st.caption(
        f"{unit} on the dev set `{dev.get('name')}` ({dev.get('utterances')} utterances); latency = mean ms per "
        f"utterance, batch 1, ONNX Runtime CPU. {search.get('evaluations')} full evaluations "
        f"(one group at a time would need {search.get('one_at_a_time_evaluations')})."
        + (
            f" Candidates were judged against +{budget['judged_against']['max_wer_delta_points']:.2f} pts "
            + (
                f"overall (the gate less a {budget['margin']:.2f} margin), "
                if budget.get("margin")
                else "overall, "
            )
            + "dev intervals widened "
            + f"x{budget['interval_widening']:.2f} to the sign-off set's speakers"
            + (
                f" and moved out for a {budget['confidence']:.0%} chance that the sign-off passes"
                if "confidence" in budget
                else ""
            )
            + "."
            if "judged_against" in budget
            else ""
        )
    )
    if frame["latency ms"].notna().any():
        ui.chart(
            charts.tradeoff_chart(
                frame,
                lines,
                "latency ms",
                "mean ms per utterance",
                f"{unit} {group} delta against the baseline (pts), 95% CI",
                unit,
            )
        )
    found = search.get("found")
    found_row = frame[frame["recommended"]]
    st.markdown(
        f"Found plan: **{found['name']}** (step {found['step']}, candidate "
        f"`{found_row['candidate'].iloc[0] if not found_row.empty else '?'}`, "
        + (
            f"{found['int8_macs_share'] * 100:.0f} % of multiply-accumulates and "
            if found.get("int8_macs_share") is not None
            else ""
        )
        + f"{found['int8_share'] * 100:.0f} % of nodes INT8)"
        if found
        else "**No plan met the budget on the dev set.**"
    )
    st.dataframe(_shown(frame, unit), width="stretch", hide_index=True)
    st.subheader("Candidate plan")
    names = list(frame["candidate"])
    if not found_row.empty and st.query_params.get("search_candidate") not in names:
        st.query_params["search_candidate"] = found_row["candidate"].iloc[0]  # open the found plan first
    candidate = ui.pick("Candidate", names, "search_candidate", "engines", key="search-candidate")
    row = frame[frame["candidate"] == candidate].iloc[0]
    (st.success if row["verdict"] == "PASS" else st.error)(f"{candidate}: {row['reason']}")
    try:
        _plan_view(layers.search_plan(path, search, candidate, roots), candidate)
    except (WorkbenchError, OSError) as exc:
        st.warning(f"Cannot show the plan of {candidate}: {exc}")


def _signoff(roots) -> None:
    view = ui.open_picked(
        "Sign-off record",
        data.report_names(roots),
        "report",
        "reports",
        lambda name: data.load_report(name, roots),
        ui.Missing(
            "sign-off reports",
            "python -m workbench signoff --eval-set demo-eval --calib-set demo-calib",
            "The trade-off is read from `reports/<name>/report.json`.",
        ),
    )
    if view is None:
        return
    record = view.record
    gates = record["gates"]
    unit = unit_label(record)
    c1, c2 = st.columns(2)
    group = c1.selectbox(f"{unit} of", [data.OVERALL] + data.conditions(record), key="group")
    pct = gates.get("latency_percentile", "p90")
    gate_metric = (
        f"{pct} at batch {gates.get('latency_batch', 1)}, worst bucket (what the latency gate judges)"
    )
    axis = c2.radio("Latency axis", [MEAN_P50, gate_metric], key="axis")
    frame = data.tradeoff_frame(record, group)
    if frame.empty:
        st.warning(f"No candidate has a {unit} for {group}.")
        return
    _mark_anchors(view.folder, frame)
    field = "latency ms" if axis == MEAN_P50 else f"{pct} worst ms"
    lines = data.gate_lines(record, group)
    if axis == MEAN_P50:
        lines = {**lines, "latency": None}  # the latency limit is on the other metric
    if frame[field].notna().any():
        title = f"latency, batch {gates.get('latency_batch', 1)} (ms)"
        ui.chart(
            charts.tradeoff_chart(
                frame, lines, field, title, f"{unit} {group} delta against the baseline (pts), 95% CI", unit
            )
        )
    else:
        st.info(
            f"This record has no latency measurements (signoff ran with --no-latency); {unit} only below."
        )
    st.markdown(f"Verdict: **{verdict_line(record)}**")
    if lines.get("wer") is not None:
        st.caption(
            f"Red dashed line: the gate's +{lines['allowed_delta']} pts. Each bar is the paired 95% interval of the "
            f"{unit} delta; the gate judges its upper end ('delta upper pts' below)."
        )
    st.dataframe(
        _shown(frame, unit),
        width="stretch",
        hide_index=True,
        column_config={
            c: st.column_config.NumberColumn(format="%.2f")
            for c in (
                f"{unit} %",
                f"{unit} low %",
                f"{unit} high %",
                "delta pts",
                "delta upper pts",
                "latency ms",
                f"{pct} worst ms",
            )
        },
    )
    _target_view(record)
    _serving_view(record)

    st.subheader("Candidate plan")
    candidate = ui.pick("Candidate", list(frame["candidate"]), "candidate", "reports")
    row = frame[frame["candidate"] == candidate].iloc[0]
    (st.success if row["verdict"] == "PASS" else st.error)(f"{candidate}: {row['reason']}")
    try:
        path = data.candidate_onnx(record, candidate, roots)
        plan = plans.plan_of_onnx(path)
    except (WorkbenchError, OSError) as exc:
        st.warning(f"Cannot show the plan of {candidate}: {exc}")
        return
    _plan_view(plan, candidate)


def _target_view(record) -> None:
    """Which deployment target this record signs off for, where it was timed, and what the target runs (the
    candidates as given, or made for it: CPU flavours, dynamic INT8; those left out, with why)."""
    backend = record.get("backend") or {}
    if not backend:
        return
    on_target = backend.get("backend") == backend.get("target")
    st.markdown(
        f"Deployment target: **{backend.get('target')}**; measured on {backend.get('backend')} "
        f"({backend.get('device')})"
        + (
            ": latency picks the winner."
            if on_target
            else ": not the target, so latency is shown but picks nothing (accuracy sign-off)."
        )
    )
    made = backend.get("candidates")
    if made:
        title, header, rows = target_table(made)
        with st.expander(title, expanded=any(c.get("made_from") for c in made["candidates"])):
            st.dataframe([dict(zip(header, row)) for row in rows], width="stretch", hide_index=True)


def _serving_view(record) -> None:
    """The serving benchmark (``signoff --serving``): p99 against offered load per candidate and the capacity
    table; nothing when the record has no serving section."""
    serving = record.get("serving")
    if not serving:
        return
    st.subheader("Serving: latency against offered load")
    on_target = serving.get("backend") == (record.get("backend") or {}).get("target")
    st.caption(
        f"On {serving.get('backend')}: {serving.get('summary')}; {serving.get('requests')}. "
        + (
            "Measured on the target: capacity picks the winner."
            if on_target
            else "Not the target: picks nothing."
        )
    )
    loads = serving_data.load_frame(record)
    if loads["p99 ms"].notna().any():
        ui.chart(charts.serving_chart(loads, float(serving["settings"]["p99_ms"])))
    st.dataframe(serving_data.summary_frame(record), width="stretch", hide_index=True)
    with st.expander("Every offered load"):
        st.dataframe(loads, width="stretch", hide_index=True)


def _mark_anchors(folder, frame) -> None:
    """Add the ``made by`` column (marker shape in the chart) when the record has an anchors file beside it."""
    try:
        tools = anchors.anchor_tools(folder)
    except WorkbenchError as exc:
        st.warning(f"Anchor points not marked: {exc}")
        return
    if tools:
        frame[charts.MADE_BY] = frame["candidate"].map(tools).fillna(anchors.WORKBENCH)
        others = sorted({t for t in tools.values() if t not in (anchors.WORKBENCH, "baseline")})
        st.caption(
            f"Anchors record: points made by {', '.join(others) or 'no other tool'} are marked by shape "
            "next to the workbench's own candidates, all judged by this sign-off."
        )

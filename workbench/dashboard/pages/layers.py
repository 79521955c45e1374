"""Layers page: per-layer error (FP32 vs candidate) and sensitivity as a heatmap along the network;
clicking a cell (or choosing a node) opens the node: its metrics per condition, its group's
sensitivity and its ONNX inputs, outputs and attributes."""

from __future__ import annotations

import streamlit as st

from workbench.dashboard import charts, ui
from workbench.dashboard.data import layers as data

DETAIL = [
    "index",
    "tensor",
    "node",
    "op",
    "module",
    "group",
    "precision",
    "cosine",
    "sqnr_db",
    "rel_l2",
    "max_abs_error",
    "mean_abs_error",
    "polygraphy_passed",
    "significant",
]


def _clicked_node(event) -> str | None:
    try:
        points = event.selection["node"]
    except (AttributeError, KeyError, TypeError):
        return None
    return points[0].get("node") if points else None


def render() -> None:
    st.title("Layers")
    roots = ui.roots()
    view = ui.open_picked(
        "Layer comparison",
        data.layer_runs(roots),
        "layers",
        "engines",
        lambda label: data.load_layer_view(label, roots),
        ui.Missing(
            "layer comparisons",
            "python -m workbench compare",
            "Layer tables live in `engines/<model hash>/compare/layers-*.json`.",
        ),
    )
    if view is None:
        return
    table = view.table
    if table.empty:
        st.warning("This comparison has no rows.")
        return
    cand = view.layers.get("candidate", {})
    summary = view.layers.get("summary", {})
    st.caption(
        f"FP32 vs **{cand.get('name', '?')}** on {len(view.layers.get('clips', []))} clips · "
        f"made {view.layers.get('created', '?')}"
    )
    cols = st.columns(3)
    cols[0].metric("tensors compared", summary.get("tensors", len(table)))
    cols[1].metric("significant", summary.get("significant", int(table["significant"].sum())))
    out = summary.get("output") or {}
    cols[2].metric("output SQNR", f"{out['sqnr_db']:.1f} dB" if out.get("sqnr_db") is not None else "n/a")
    first = view.layers.get("first_significant")
    th = view.layers.get("thresholds", {})
    if first:
        st.warning(
            f"Error starts at **{first['node']}** ({first['module']}): cosine {first['cosine']:.4f}, SQNR "
            f"{first['sqnr_db']:.1f} dB (significant: cosine < {th.get('cosine')} or SQNR < {th.get('sqnr_db')} dB)"
        )
    else:
        st.success("No layer crosses the significance thresholds.")
    if view.sensitivity is None:
        st.caption(
            "No sensitivity ranking beside this comparison (run `python -m workbench compare` without "
            "--no-sensitivity); the heatmap shows the error metrics only."
        )
    compute_only = st.toggle("compute nodes only (MatMul/Gemm/Conv)", value=True, key="compute-only")
    shown = table[table["compute"]] if compute_only and table["compute"].any() else table
    metrics = data.heat_metrics(view)
    nodes = list(shown["node"])
    clicked = _clicked_node(st.session_state.get("heat"))
    if clicked in nodes and clicked != st.session_state.get("layer-clicked"):
        st.session_state["layer-node"] = st.session_state["layer-clicked"] = (
            clicked  # a new click opens its node
        )
    default = first["node"] if first and first["node"] in nodes else nodes[0]
    if st.session_state.get("layer-node") not in nodes:
        st.session_state["layer-node"] = default
    ui.chart(
        charts.layer_heatmap(shown, metrics, st.session_state["layer-node"]),
        on_select="rerun",
        selection_mode="node",
        key="heat",
    )
    if shown["precision"].notna().any():
        ui.chart(
            charts.plan_strip(
                shown[shown["precision"].notna()], f"Precision under {cand.get('name', 'the plan')}"
            )
        )
    node = st.selectbox("Node (click a cell above, or choose)", nodes, key="layer-node")
    row = shown[shown["node"] == node].iloc[0]
    st.subheader(f"{node}")
    st.caption(
        f"{row['op']} · module `{row['module']}` · group `{row['group']}` · precision "
        f"{row.get('precision') or 'n/a'}"
    )
    c = st.columns(4)
    c[0].metric("cosine", f"{row['cosine']:.5f}")
    c[1].metric("SQNR", f"{row['sqnr_db']:.1f} dB")
    c[2].metric("rel L2", f"{row['rel_l2']:.4f}")
    c[3].metric(
        "sensitivity KL",
        f"{row['sensitivity KL']:.4g}"
        if "sensitivity KL" in row and row["sensitivity KL"] == row["sensitivity KL"]
        else "n/a",
    )
    per = row.get("per_condition") or {}
    if per:
        st.dataframe([{"condition": k, **v} for k, v in per.items()], width="stretch", hide_index=True)
    left, right = st.columns(2)
    with left:
        st.markdown("**Row**")
        st.json({k: (row[k].item() if hasattr(row[k], "item") else row[k]) for k in DETAIL if k in row})
    with right:
        st.markdown("**ONNX node (FP32 graph)**")
        info = data.onnx_node(view, node, roots)
        st.json(info) if info else st.caption("model.fp32.onnx is not beside this comparison")
    if view.sensitivity is not None:
        with st.expander("Sensitivity ranking (most sensitive first)"):
            st.dataframe(
                [
                    {k: g.get(k) for k in ("rank", "name", "kl", "token_disagreement", "graph_index")}
                    for g in view.sensitivity.get("layers", [])
                ],
                width="stretch",
                hide_index=True,
            )

"""Calibration page: runs and caches under engines/ (provenance, reuse state), convergence (how far each
range moved over the last quarter of the clips, and the verdict), per-tensor ranges, and each tensor's histogram with the threshold of every method recomputed from the stored histogram."""

from __future__ import annotations

import json

import streamlit as st

from workbench.calibration import convergence
from workbench.calibration.methods import METHODS
from workbench.config import DEFAULT_METHOD
from workbench.dashboard import charts, ui
from workbench.dashboard.data import calibration as data
from workbench.dashboard.paths import display

STATE_ICON = {
    "reusable": ":material/check_circle:",
    "stale": ":material/history:",
    "unusable": ":material/error:",
}


def render() -> None:
    st.title("Calibration")
    roots = ui.roots()
    caches = data.list_caches(roots)
    if not caches:
        ui.empty_state(
            "calibration runs",
            f"python -m workbench calibrate --calib-set demo-calib --method {DEFAULT_METHOD}",
            f"Runs live in `{roots.engines}/<model hash>/` (FP32 ONNX, caches, INT8 variants).",
        )
        return
    st.subheader("Caches")
    st.dataframe(data.caches_frame(caches, roots), width="stretch", hide_index=True)
    labels = [display(c.path, roots) for c in caches]
    label = ui.pick("Cache", labels, "cache", "engines")
    info = caches[labels.index(label)]
    icon = STATE_ICON[info.state]
    message = f"**{info.state}**: {info.reason}"
    (st.success if info.state == "reusable" else st.warning if info.state == "stale" else st.error)(
        message, icon=icon
    )
    with st.expander("Provenance keys and run folder"):
        st.json(info.keys or {})
        st.dataframe(data.run_files(info.path.parent, roots), width="stretch", hide_index=True)
    if info.cache is None:
        return
    show_convergence(info.cache.convergence)
    hists, why = data.load_histograms(info, roots)
    ranges = data.ranges_frame(info, hists)
    ui.chart(charts.ranges_chart(ranges, info.method))
    if hists is None:
        st.info(f"Histograms are not available for this cache: {why}", icon=":material/bar_chart:")
        st.dataframe(ranges, width="stretch", hide_index=True)
        return
    st.subheader("Tensor histogram")
    tensors = list(ranges["tensor"])
    worst = ranges.sort_values("clipped share", ascending=False)["tensor"].iloc[0]
    c1, c2 = st.columns([3, 1])
    tensor = c1.selectbox(
        "Tensor (graph order)",
        tensors,
        index=tensors.index(worst),
        key="tensor",
        help="Starts at the tensor whose cached range clips the largest share of values.",
    )
    percentile = c2.number_input(
        "percentile",
        90.0,
        100.0,
        float(info.keys.get("percentile", 99.99)),
        0.01,
        key="percentile",
        format="%.2f",
    )
    thresholds = data.method_thresholds(hists, tensor, percentile)
    ui.chart(charts.histogram_with_thresholds(data.histogram_frame(hists, tensor), thresholds, info.method))
    row = ranges[ranges["tensor"] == tensor].iloc[0]
    cols = st.columns(len(METHODS) + 1)
    for col, method in zip(cols, METHODS):
        col.metric(
            f"{method}{' (cache)' if method == info.method else ''}",
            f"{thresholds[method]:.4g}",
            help=f"amax recomputed with {method} from the stored histogram",
        )
    cols[-1].metric("cached amax", f"{row['amax']:.4g}", help="scale x 127 read from the cache file")
    st.caption(
        f"{row['clipped share'] * 100:.4f} % of this tensor's calibration values lie above the cached amax "
        "(saturated in INT8)."
    )
    with st.expander("All tensors (table)"):
        st.dataframe(ranges, width="stretch", hide_index=True)
        ui.download(
            "ranges as JSON",
            json.dumps(ranges.to_dict(orient="records"), indent=1),
            file_name=f"{info.path.name}.ranges.json",
            mime="application/json",
        )


def show_convergence(record: object) -> None:
    """The run's convergence verdict and the per-tensor amax change over the last quarter of the clips."""
    st.subheader("Convergence")
    found, note = convergence.from_sidecar(record)
    if found is None:
        st.info(f"Convergence {note}.", icon=":material/timeline:")
        return
    (st.success if found.converged else st.warning)(found.verdict(), icon=":material/timeline:")
    if not found.converged:
        st.caption(found.detail())
    with st.expander(f"amax change over the last {found.last_clips} of {found.clips} clips, per tensor"):
        st.dataframe(data.convergence_frame(found), width="stretch", hide_index=True)

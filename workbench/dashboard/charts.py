"""Altair charts for the dashboard pages (pure functions: DataFrame in, chart out)."""

from __future__ import annotations

import altair as alt
import pandas as pd

CONDITION_COLORS = alt.Scale(domain=["quiet", "noisy", "accented"], range=["#4c78a8", "#e45756", "#f58518"])
PRECISION_COLORS = alt.Scale(
    domain=["int8", "fp16", "fp32", "none"], range=["#54a24b", "#f2cf5b", "#9d755d", "#d9d9d9"]
)
VERDICT_COLORS = alt.Scale(domain=["PASS", "FAIL"], range=["#2e7d32", "#c62828"])
METHOD_COLORS = alt.Scale(
    domain=["entropy", "max", "percentile", "mse"], range=["#7b3294", "#d7191c", "#2c7bb6", "#1a9641"]
)


def balance_heatmap(strata: pd.DataFrame) -> alt.Chart:
    """condition x duration bucket, cell colour and label = utterance count."""
    base = alt.Chart(strata).encode(
        x=alt.X("bucket:N", title="duration bucket", sort=["short", "long"]),
        y=alt.Y("condition:N", title=None, sort=["quiet", "noisy", "accented"]),
    )
    cells = base.mark_rect(cornerRadius=4).encode(
        color=alt.Color("count:Q", scale=alt.Scale(scheme="blues"), legend=None),
        tooltip=["condition", "bucket", "count"],
    )
    labels = base.mark_text(fontSize=18, fontWeight="bold").encode(
        text="count:Q",
        color=alt.condition(
            alt.datum.count > (strata["count"].max() / 2 if len(strata) else 0),
            alt.value("white"),
            alt.value("black"),
        ),
    )
    return (cells + labels).properties(height=56 * max(1, strata["condition"].nunique()), title="Balance")


def distribution(table: pd.DataFrame, field: str, title: str, unit: str, bins: int = 30) -> alt.Chart:
    """Stacked histogram of ``field`` coloured by condition (rows without a value are left out)."""
    data = table.dropna(subset=[field])
    return (
        alt.Chart(data)
        .mark_bar(opacity=0.85)
        .encode(
            x=alt.X(f"{field}:Q", bin=alt.Bin(maxbins=bins), title=f"{title} ({unit})"),
            y=alt.Y("count():Q", title="utterances", stack=True),
            color=alt.Color("condition:N", scale=CONDITION_COLORS, legend=alt.Legend(orient="top")),
            tooltip=["condition:N", "count():Q"],
        )
        .properties(height=140, title=title)
    )


def category_bars(table: pd.DataFrame, field: str, title: str) -> alt.Chart:
    return (
        alt.Chart(table)
        .mark_bar()
        .encode(
            y=alt.Y(f"{field}:N", sort="-x", title=None),
            x=alt.X("count():Q", title="utterances"),
            color=alt.Color("condition:N", scale=CONDITION_COLORS, legend=None),
            tooltip=[f"{field}:N", "condition:N", "count():Q"],
        )
        .properties(title=title, height=alt.Step(22))
    )


def ranges_chart(ranges: pd.DataFrame, method: str) -> alt.Chart:
    """Per-tensor amax (and the observed max when known) along the network, log scale."""
    value_vars = [c for c in ("amax", "observed max") if c in ranges.columns]
    long = ranges.melt(
        id_vars=["position", "tensor"], value_vars=value_vars, var_name="kind", value_name="value"
    )
    long["kind"] = long["kind"].replace({"amax": f"amax ({method})"})
    long = long[long["value"] > 0]
    return (
        alt.Chart(long)
        .mark_line(point=alt.OverlayMarkDef(size=25))
        .encode(
            x=alt.X("position:Q", title="tensor position along the network"),
            y=alt.Y("value:Q", scale=alt.Scale(type="log"), title="|x| range"),
            color=alt.Color("kind:N", legend=alt.Legend(orient="top", title=None)),
            tooltip=["tensor:N", "kind:N", alt.Tooltip("value:Q", format=".4g")],
        )
        .properties(height=260, title="Per-tensor ranges")
        .interactive()
    )


def histogram_with_thresholds(hist: pd.DataFrame, thresholds: dict[str, float], chosen: str) -> alt.Chart:
    """The tensor's |x| histogram (log counts) with one rule per method; the cache's method drawn thick."""
    bars = (
        alt.Chart(hist)
        .mark_area(color="#8c8c8c", opacity=0.7, interpolate="step-after", line=True)
        .encode(
            x=alt.X("lo:Q", title="|x|"),
            y=alt.Y("count:Q", scale=alt.Scale(type="symlog"), title="samples (symlog)"),
            tooltip=[alt.Tooltip("lo:Q", format=".4g"), alt.Tooltip("hi:Q", format=".4g"), "count:Q"],
        )
    )
    rules = pd.DataFrame([{"method": m, "amax": v, "chosen": m == chosen} for m, v in thresholds.items()])
    lines = (
        alt.Chart(rules)
        .mark_rule()
        .encode(
            x="amax:Q",
            color=alt.Color("method:N", scale=METHOD_COLORS, legend=alt.Legend(orient="top")),
            strokeWidth=alt.condition(alt.datum.chosen, alt.value(4), alt.value(1.5)),
            strokeDash=alt.condition(alt.datum.chosen, alt.value([1, 0]), alt.value([6, 3])),
            tooltip=["method:N", alt.Tooltip("amax:Q", format=".5g"), "chosen:N"],
        )
    )
    return (bars + lines).properties(height=300, title="Histogram of |x| with each method's threshold")


def plan_strip(plan: pd.DataFrame, title: str = "Precision per node") -> alt.Chart:
    """One cell per node along the network coloured int8/fp16/fp32 (grey: no float data); FP32 reasons in the
    tooltip when the frame has them."""
    tooltip = ["position:Q", "node:N", "op:N", "precision:N"] + (
        ["reason:N"] if "reason" in plan.columns else []
    )
    return (
        alt.Chart(plan)
        .mark_rect()
        .encode(
            x=alt.X("position:O", title="node along the network", axis=alt.Axis(labels=False, ticks=False)),
            color=alt.Color("precision:N", scale=PRECISION_COLORS, legend=alt.Legend(orient="top")),
            tooltip=tooltip,
        )
        .properties(height=50, title=title)
    )


MADE_BY = "made by"  # the column naming the tool behind each candidate (anchors records)


def tradeoff_chart(
    frame: pd.DataFrame,
    gates: dict,
    latency_field: str,
    latency_title: str,
    wer_title: str,
    unit: str = "WER",
) -> alt.LayerChart | alt.FacetChart:
    """Error-rate delta against the baseline (``unit``: WER or CER, in points; the frame's columns keep the name
    ``delta``) vs latency per candidate: the paired interval as a bar, PASS/FAIL colour, the Pareto front, the
    baseline at 0 and the gate's allowed delta as rules; 0.1-point differences stay visible. With a ``made by`` column (an anchors record: the
    tool that made each candidate) the marker's shape shows the tool."""
    data = frame.dropna(subset=[latency_field]).copy()
    data["delta high pts"] = data["delta upper pts"].fillna(data["delta pts"])
    shape = (
        alt.Shape(f"{MADE_BY}:N", legend=alt.Legend(orient="top"))
        if MADE_BY in data.columns
        else alt.condition(alt.datum.recommended, alt.value("diamond"), alt.value("circle"))
    )
    base = alt.Chart(data).encode(
        x=alt.X(f"{latency_field}:Q", title=latency_title, scale=alt.Scale(zero=False, padding=40))
    )
    errors = base.mark_rule(strokeWidth=2).encode(
        y=alt.Y("delta low pts:Q", title=wer_title, scale=alt.Scale(zero=False, padding=20)),
        y2="delta high pts:Q",
        color=alt.Color("verdict:N", scale=VERDICT_COLORS),
    )
    points = base.mark_point(filled=True, size=160).encode(
        y="delta pts:Q",
        color=alt.Color("verdict:N", scale=VERDICT_COLORS, legend=alt.Legend(orient="top")),
        shape=shape,
        tooltip=[
            "candidate:N",
            *([f"{MADE_BY}:N"] if MADE_BY in data.columns else []),
            alt.Tooltip("WER %:Q", format=".2f"),
            alt.Tooltip("delta pts:Q", format="+.2f"),
            alt.Tooltip("delta upper pts:Q", format="+.2f"),
            alt.Tooltip(f"{latency_field}:Q", format=".1f"),
            "verdict:N",
            "reason:N",
        ],
    )
    labels = base.mark_text(dx=10, dy=-10, align="left", fontSize=13).encode(
        y="delta pts:Q", text="candidate:N"
    )
    front = (
        alt.Chart(data[data["pareto"]].sort_values(latency_field))
        .mark_line(interpolate="step-after", color="#1f77b4", strokeDash=[4, 2], opacity=0.8)
        .encode(x=f"{latency_field}:Q", y="delta pts:Q")
    )
    zero = alt.Chart(pd.DataFrame([{"y": 0.0}])).mark_rule(color="#757575").encode(y="y:Q")
    layers = [zero, errors, front, points, labels]
    if gates.get("allowed_delta") is not None:
        layers.append(
            alt.Chart(
                pd.DataFrame(
                    [{"y": gates["allowed_delta"], "label": f"{unit} gate (+{gates['allowed_delta']} pts)"}]
                )
            )
            .mark_rule(color="#c62828", strokeDash=[8, 4])
            .encode(y="y:Q", tooltip=["label:N"])
        )
    if gates.get("latency") is not None:
        layers.append(
            alt.Chart(pd.DataFrame([{"x": gates["latency"], "label": "latency gate"}]))
            .mark_rule(color="#6a1b9a", strokeDash=[8, 4])
            .encode(x="x:Q", tooltip=["label:N"])
        )
    return (
        alt.layer(*layers)
        .properties(
            height=380, title=f"{unit} delta against the baseline vs latency (dashed blue: Pareto front)"
        )
        .interactive()
    )


def layer_heatmap(
    frame: pd.DataFrame, metrics: list[str], selected: str | None = None
) -> alt.LayerChart | alt.FacetChart:
    """Rows = metrics, columns = layers along the network, colour = metric normalised per row; the
    selected node's column is outlined."""
    long = frame.melt(id_vars=["position", "node"], value_vars=metrics, var_name="metric", value_name="value")
    long["scaled"] = long.groupby("metric")["value"].transform(
        lambda v: (v - v.min()) / (v.max() - v.min()) if v.max() > v.min() else v * 0
    )
    pick = alt.selection_point(name="node", fields=["node"], on="click")
    heat = (
        alt.Chart(long)
        .mark_rect()
        .add_params(pick)
        .encode(
            x=alt.X("position:O", title="layer along the network", axis=alt.Axis(labels=False, ticks=False)),
            y=alt.Y("metric:N", title=None),
            color=alt.Color("scaled:Q", scale=alt.Scale(scheme="inferno", reverse=True), title="relative"),
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.45)),
            tooltip=["position:Q", "node:N", "metric:N", alt.Tooltip("value:Q", format=".4g")],
        )
    )
    outline = (
        alt.Chart(long[long["node"] == selected])
        .mark_rect(fill=None, stroke="#1f77b4", strokeWidth=3)
        .encode(x="position:O", y="metric:N")
    )
    return alt.layer(heat, outline).properties(
        height=40 * max(1, len(metrics)) + 30,
        title="Per-layer error and sensitivity (click a cell to open its node)",
    )


def serving_chart(frame: pd.DataFrame, target_ms: float) -> alt.LayerChart | alt.FacetChart:
    """p99 latency against offered load per candidate (points that meet the target filled), the target drawn."""
    data = frame.dropna(subset=["p99 ms"])
    base = alt.Chart(data).encode(
        x=alt.X("offered QPS:Q", title="offered load (requests per second, Poisson)"),
        y=alt.Y("p99 ms:Q", title="p99 latency (ms)"),
        color=alt.Color("candidate:N", legend=alt.Legend(orient="top")),
    )
    lines = base.mark_line()
    points = base.mark_point(size=80).encode(
        fill=alt.condition(alt.datum["meets target"], alt.Color("candidate:N"), alt.value("white")),
        tooltip=["candidate:N", "offered QPS:Q", "achieved QPS:Q", "p50 ms:Q", "p95 ms:Q", "p99 ms:Q"],
    )
    target = (
        alt.Chart(pd.DataFrame([{"y": target_ms, "label": f"p99 target {target_ms:g} ms"}]))
        .mark_rule(color="#c62828", strokeDash=[8, 4])
        .encode(y="y:Q", tooltip=["label:N"])
    )
    return (
        alt.layer(lines, points, target)
        .properties(height=320, title="Serving: p99 against offered load (hollow: over the target)")
        .interactive()
    )

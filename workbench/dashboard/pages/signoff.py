"""Sign-off page: the report, its verdict, whether its inputs are unchanged, and downloads (JSON,
Markdown, HTML, candidate ONNX files, engines built from them, calibration cache; none in read-only mode)."""

from __future__ import annotations

import base64

import streamlit as st

from workbench.dashboard import ui
from workbench.dashboard.data import reports as data
from workbench.report.render import tables, to_html, verdict_line, verdict_mode

MIME = {
    ".json": "application/json",
    ".html": "text/html",
    ".md": "text/markdown",
    ".onnx": "application/octet-stream",
    ".cache": "text/plain",
    ".engine": "application/octet-stream",
}


@st.cache_data(max_entries=8, show_spinner="rendering the report…")
def _report_page(digest: str, _record: dict) -> str:
    """The report page as a data: URL (an opaque origin: its content cannot reach the app). Keyed by digest."""
    return "data:text/html;base64," + base64.b64encode(to_html(_record).encode("utf-8")).decode("ascii")


def render() -> None:
    st.title("Sign-off")
    roots = ui.roots()
    view = ui.open_picked(
        "Report",
        data.report_names(roots),
        "report",
        "reports",
        lambda name: data.load_report(name, roots),
        ui.Missing(
            "sign-off reports",
            "python -m workbench demo",
            "The demo ends with `reports/demo-signoff/`; `python -m workbench signoff --help` for yours.",
        ),
    )
    if view is None:
        return
    record = view.record
    verdict = verdict_line(record)
    {"ship": st.success, "accuracy-signoff": st.info}.get(verdict_mode(record), st.error)(f"### {verdict}")
    for line in (record.get("label_free") or {}).get("lines", []):  # the label-free shift check
        st.warning(line)
    st.caption(
        f"created {record['created']} · baseline `{record['baseline']}` · record sha256 "
        f"`{record['record_sha256'][:16]}…`"
    )
    model = record.get("model")
    if model:
        st.caption(
            f"model {model['architecture']} `{model['source']}` ({model['model_hash'][:12]}) · errors counted "
            f"in {str(model['error_unit']).upper()} (from {model['error_unit_from']})"
        )
    problems = data.input_problems(view)
    if problems:
        st.warning(
            "Inputs changed since this report was made; `python -m workbench report` will refuse it:\n\n"
            + "\n".join(f"- {p}" for p in problems)
        )
    else:
        st.caption(":material/verified: every input artifact still has the hash recorded in the report")

    if not ui.settings().read_only:
        _downloads(view, roots)

    tab_report, tab_tables = st.tabs(["Report", "Tables"])
    with tab_report:
        st.iframe(_report_page(record["record_sha256"], record), height=900)
        st.caption(
            "Rendered from the digest-checked record (the same page as report.html), in a sandboxed frame."
        )
    with tab_tables:
        for title, header, rows in tables(record):
            st.markdown(f"**{title}**")
            st.dataframe([dict(zip(header, r)) for r in rows], width="stretch", hide_index=True)


def _downloads(view: data.ReportView, roots: ui.ArtifactRoots) -> None:
    """The report files and the artifacts it names, each as a download button (the resolver checks each)."""
    st.subheader("Downloads")
    cols = st.columns(3)
    files = [("report.json", view.json), ("report.html", view.html), ("report.md", view.markdown)]
    for col, (label, path) in zip(cols, files):
        if path is None:
            col.caption(f"{label}: not written")
            continue
        ui.download(
            label,
            ui.lazy_bytes(path, "reports"),
            where=col,
            file_name=f"{view.name}-{label}",
            mime=MIME[path.suffix],
            key=f"dl-{label}",
            icon=":material/download:",
        )
    for number, item in enumerate(data.downloads(view, roots)):
        if item.allowed is None:
            st.caption(f"{item.role}: `{item.path}` (not offered: {item.reason})")
            continue
        ui.download(
            f"{item.role}: {item.allowed.name}",
            ui.lazy_bytes(item.allowed, data.SERVED_AREAS),
            file_name=item.allowed.name,
            mime=MIME.get(item.allowed.suffix, "application/octet-stream"),
            key=f"dl-{number}",
            icon=":material/download:",
        )

"""Overview page: where the dashboard is reachable and what visitors may do, what exists under the
artifact folders and the next command to run."""

from __future__ import annotations

import streamlit as st

from workbench.dashboard import gate, ui
from workbench.dashboard.access import Settings, is_loopback, reach
from workbench.dashboard.data import calibration, layers, reports, sets
from workbench.dashboard.paths import ENV_VAR
from workbench.errors import WorkbenchError
from workbench.report.render import verdict_line, verdict_mode

# (what the step makes, the command that makes it), in the order the steps run
STEPS = [
    ("speech sets", "python -m workbench data build"),
    ("calibration caches", "python -m workbench calibrate --calib-set demo-calib"),
    ("layer comparisons", "python -m workbench compare"),
    ("sign-off reports", "python -m workbench signoff --eval-set demo-eval --calib-set demo-calib"),
]


def render() -> None:
    """Counts per artifact kind, the next command for each missing kind, and the latest sign-off verdict."""
    st.title("Speech precision workbench")
    settings = ui.settings()
    st.caption(serving_line(settings, gate.bound_address(), int(st.get_option("server.port"))))
    roots = ui.roots()
    st.caption(
        f"Workspace: `{roots.root}` (artifacts under its calib_sets/, engines/, reports/; start with "
        f"`streamlit run app.py -- --workspace DIR` or set `{ENV_VAR}` to look elsewhere)"
    )
    counts = [
        len(sets.set_names(roots)),
        len(calibration.list_caches(roots)),
        len(layers.layer_runs(roots)),
        len(reports.report_names(roots)),
    ]
    cols = st.columns(len(STEPS))
    for col, (what, _), n in zip(cols, STEPS, counts):
        col.metric(what, n)
    missing = [(what, command) for (what, command), n in zip(STEPS, counts) if n == 0]
    if not any(counts):
        st.info(
            "Nothing here yet. The whole job on the embedded demo model is one command:\n"
            "```bash\npython -m workbench demo\n```\n"
            + ("" if settings.read_only else "or start steps from the **Run** page.")
        )
    elif missing:
        st.markdown("**Next steps**")
        for what, command in missing:
            st.markdown(f"- no {what} yet: `{command}`")
    names = reports.report_names(roots)
    if names:
        try:
            view = reports.load_report(names[0], roots)
            show = {"ship": st.success, "accuracy-signoff": st.info}.get(verdict_mode(view.record), st.error)
            show(f"Latest sign-off `{names[0]}`: {verdict_line(view.record)}")
        except (WorkbenchError, OSError) as exc:  # a damaged record must not break the overview
            st.warning(f"Latest sign-off `{names[0]}` cannot be read: {exc}")


def serving_line(settings: Settings, address: str | None, port: int) -> str:
    """Where this dashboard can be reached from, who is let in, and whether it is read-only."""
    who = {
        "token": "visitors need the access token",
        "oidc": "visitors log in (OIDC)",
        None: "no sign-in" if is_loopback(address) else "no access control",
    }[settings.access_control]
    mode = (
        "read-only: no Run page, no downloads"
        if settings.read_only
        else f"jobs may be started (at most {settings.max_jobs} at once) and artifacts downloaded"
    )
    return f":material/lan: Reachable from {reach(address, port)} · {who} · {mode}"

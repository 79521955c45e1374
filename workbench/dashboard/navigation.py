"""The dashboard's page list (``st.navigation``) behind the access gate; the entry scripts only call ``main``.

A visitor who has not passed ``gate.granted`` gets, at every page's URL, only the sign-in (or the reason
nothing is shown), with the navigation hidden. Read-only mode leaves the Run page out of the app altogether,
so its URL does not exist, and hides the data-export buttons Streamlit adds to tables.
``streamlit run app.py -- --workspace DIR`` reads artifacts from DIR (same as ``$WORKBENCH_WORKSPACE``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

import streamlit as st

from workbench.dashboard import gate
from workbench.dashboard.access import Settings, read_settings
from workbench.dashboard.pages import calibration, home, layers, run, sets, signoff, tradeoff
from workbench.errors import WorkbenchError
from workbench.workspace import ENV_VAR, resolve_workspace

PAGES: list[tuple[Callable[[], None], str, str, str]] = [
    (home.render, "Overview", "overview", ":material/home:"),
    (sets.render, "Sets", "sets", ":material/graphic_eq:"),
    (calibration.render, "Calibration", "calibration", ":material/tune:"),
    (layers.render, "Layers", "layers", ":material/stacked_bar_chart:"),
    (tradeoff.render, "Trade-off", "tradeoff", ":material/scatter_plot:"),
    (signoff.render, "Sign-off", "signoff", ":material/verified:"),
    (run.render, "Run", "run", ":material/play_circle:"),
]
WRITE_PAGES = frozenset({"run"})  # pages that start work; read-only mode leaves them out


def page_urls(settings: Settings) -> list[str]:
    """The URL paths of the pages this dashboard registers."""
    return [url for _, _, url, _ in PAGES if not (settings.read_only and url in WRITE_PAGES)]


def _locked(settings: Settings | None, problem: str | None) -> Callable[[], None]:
    def sign_in() -> None:
        gate.render(settings, problem)

    return sign_in


def apply_workspace_argument(argv: Sequence[str]) -> None:
    """``--workspace DIR`` after ``--`` on the streamlit command line becomes ``$WORKBENCH_WORKSPACE`` of this
    server process, so every page run and every job started from the Run page uses it."""
    parser = argparse.ArgumentParser(prog="streamlit run app.py --", add_help=False, allow_abbrev=False)
    parser.add_argument("--workspace")
    known, _ = parser.parse_known_args(list(argv))
    if known.workspace:
        os.environ[ENV_VAR] = str(resolve_workspace(known.workspace).root)


def main() -> None:
    st.set_page_config(
        page_title="Speech precision workbench", layout="wide", page_icon=":material/graphic_eq:"
    )
    settings: Settings | None
    try:
        settings, problem = read_settings(), None
    except WorkbenchError as exc:  # a bad token file or setting: fail closed and say why
        settings, problem = None, str(exc)
    if settings is None or not gate.granted(
        settings
    ):  # every page's URL shows the sign-in, and stays put once it is passed
        urls = page_urls(settings) if settings is not None else [url for _, _, url, _ in PAGES]
        st.navigation(
            [
                st.Page(_locked(settings, problem), title="Sign in", url_path=url, default=i == 0)
                for i, url in enumerate(urls)
            ],
            position="hidden",
        ).run()
        return
    try:
        apply_workspace_argument(sys.argv[1:])
        resolve_workspace()
    except WorkbenchError as exc:
        st.error(f"error: {exc}")
        st.stop()
    if settings.read_only and not st.get_option("client.disableDataExport"):
        st.set_option("client.disableDataExport", True)  # no CSV button on tables either
    urls = page_urls(settings)
    pages = [
        st.Page(fn, title=title, url_path=url, icon=icon, default=i == 0)
        for i, (fn, title, url, icon) in enumerate(p for p in PAGES if p[2] in urls)
    ]
    st.navigation(pages).run()

"""The dashboard's page list (``st.navigation``); ``app.py`` only calls ``main``.

``streamlit run app.py -- --workspace DIR`` reads artifacts from DIR (same as ``$WORKBENCH_WORKSPACE``).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

import streamlit as st

from workbench.errors import WorkbenchError
from workbench.workspace import ENV_VAR, resolve_workspace

from workbench.dashboard.pages import calibration, home, layers, run, sets, signoff, tradeoff

PAGES = [
    (home.render, "Overview", "overview", ":material/home:"),
    (sets.render, "Sets", "sets", ":material/graphic_eq:"),
    (calibration.render, "Calibration", "calibration", ":material/tune:"),
    (layers.render, "Layers", "layers", ":material/stacked_bar_chart:"),
    (tradeoff.render, "Trade-off", "tradeoff", ":material/scatter_plot:"),
    (signoff.render, "Sign-off", "signoff", ":material/verified:"),
    (run.render, "Run", "run", ":material/play_circle:"),
]


def apply_workspace_argument(argv: Sequence[str]) -> None:
    """``--workspace DIR`` after ``--`` on the streamlit command line becomes ``$WORKBENCH_WORKSPACE`` of this
    server process, so every page run and every job started from the Run page uses it."""
    parser = argparse.ArgumentParser(prog="streamlit run app.py --", add_help=False, allow_abbrev=False)
    parser.add_argument("--workspace")
    known, _ = parser.parse_known_args(list(argv))
    if known.workspace:
        os.environ[ENV_VAR] = str(resolve_workspace(known.workspace).root)


def main() -> None:
    st.set_page_config(page_title="Speech precision workbench", layout="wide", page_icon=":material/graphic_eq:")
    try:
        apply_workspace_argument(sys.argv[1:])
        resolve_workspace()
    except WorkbenchError as exc:
        st.error(f"error: {exc}")
        st.stop()
    pages = [st.Page(fn, title=title, url_path=url, icon=icon, default=i == 0)
             for i, (fn, title, url, icon) in enumerate(PAGES)]
    st.navigation(pages).run()

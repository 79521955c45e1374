"""The dashboard's page list (``st.navigation``); ``app.py`` only calls ``main``."""

from __future__ import annotations

import streamlit as st

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


def main() -> None:
    st.set_page_config(page_title="Speech precision workbench", layout="wide", page_icon=":material/graphic_eq:")
    pages = [st.Page(fn, title=title, url_path=url, icon=icon, default=i == 0)
             for i, (fn, title, url, icon) in enumerate(PAGES)]
    st.navigation(pages).run()

"""Streamlit dashboard entry point: ``streamlit run app.py``.

Placeholder until the dashboard issue lands: it lists the speech sets that exist and their balance
tables, read through the same library functions the CLI uses. Nothing here writes files.
"""

from __future__ import annotations

import streamlit as st

from workbench.config import CALIB_SETS_DIR
from workbench.errors import WorkbenchError
from workbench.speech.store import balance_table, load_set

st.set_page_config(page_title="Speech precision workbench", layout="wide")
st.title("Speech precision workbench")
st.info("Placeholder page: the full dashboard (calibration, layers, trade-off, sign-off) is a later "
        "issue. For now it shows the speech sets under calib_sets/.")

names = sorted(p.name for p in CALIB_SETS_DIR.glob("*") if (p / "card.json").exists())
if not names:
    st.write("No sets yet. Build them with `python -m workbench data build`.")
else:
    choice = st.selectbox("Speech set", names)
    try:
        speech_set = load_set(CALIB_SETS_DIR / choice)
    except WorkbenchError as exc:
        st.error(str(exc))
    else:
        card = speech_set.card
        st.metric("utterances", card["utterances"])
        st.markdown(balance_table(card))
        st.json({"accents": card["accents"], "noise_kinds": card["noise_kinds"], "content_hash": card["content_hash"]})

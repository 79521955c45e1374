"""Sets page: balance per condition x duration bucket, SNR / level / duration distributions, accents,
and a filterable utterance table with an audio player."""

from __future__ import annotations

import streamlit as st

from workbench.dashboard import charts, ui
from workbench.dashboard.data import sets as data
from workbench.errors import WorkbenchError


def _distribution(view: data.SetView, field: str, title: str, unit: str) -> None:
    if view.table[field].notna().any():
        ui.chart(charts.distribution(view.table, field, title, unit))
    else:
        st.caption(f"{title}: not recorded for this set's utterances")


def render() -> None:
    st.title("Speech sets")
    roots = ui.roots()
    view = ui.open_picked(
        "Speech set",
        data.set_names(roots),
        "set",
        "calib_sets",
        lambda name: data.load_set_view(name, roots),
        ui.Missing(
            "speech sets",
            "python -m workbench data build",
            f"Sets live in `{roots.calib_sets}/<name>/` (manifest, FLAC audio, card).",
        ),
    )
    if view is None:
        return
    card = view.card
    cols = st.columns(5)
    cols[0].metric("utterances", card["utterances"])
    cols[1].metric("audio", f"{card['total_duration_s'] / 60:.1f} min")
    cols[2].metric("speakers", card["speakers"])
    cols[3].metric("accents", len(card["accents"]))
    snr = card.get("snr_db")
    cols[4].metric("SNR range", f"{snr['min']:.0f} to {snr['max']:.0f} dB" if snr else "n/a")
    st.caption(
        f"content hash `{card['content_hash'][:16]}…` · made by `{card['made'].get('command', 'data build')}`"
        if isinstance(card.get("made"), dict)
        else f"content hash `{card['content_hash'][:16]}…`"
    )

    left, right = st.columns([2, 3])
    with left:
        ui.chart(charts.balance_heatmap(data.strata_frame(card)))
        ui.chart(charts.category_bars(view.table, "accent", "Accents"))
    with right:
        for field, title, unit in (("snr_db", "Measured SNR", "dB"), ("level_dbfs", "Speech level", "dBFS")):
            _distribution(view, field, title, unit)
    with left:
        _distribution(view, "duration_s", "Duration", "s")
    if card.get("skipped"):
        with st.expander(f"{len(card['skipped'])} inputs skipped while building"):
            st.dataframe(card["skipped"])

    st.subheader("Utterances")
    table = view.table
    f1, f2, f3, f4 = st.columns(4)
    conditions = f1.multiselect("condition", sorted(table["condition"].unique()), key="f-condition")
    buckets = f2.multiselect("bucket", sorted(table["bucket"].dropna().unique()), key="f-bucket")
    accents = f3.multiselect("accent", sorted(table["accent"].unique()), key="f-accent")
    text = f4.text_input("text or id contains", key="f-text")
    shown = table
    if conditions:
        shown = shown[shown["condition"].isin(conditions)]
    if buckets:
        shown = shown[shown["bucket"].isin(buckets)]
    if accents:
        shown = shown[shown["accent"].isin(accents)]
    if text:
        needle = text.strip().lower()
        shown = shown[
            shown["text"].str.lower().str.contains(needle, regex=False)
            | shown["id"].str.lower().str.contains(needle, regex=False)
        ]
    st.caption(f"{len(shown)} of {len(table)} utterances")
    st.dataframe(
        shown.drop(columns=["audio"]),
        width="stretch",
        hide_index=True,
        height=280,
        column_config={
            "duration_s": st.column_config.NumberColumn("duration s", format="%.2f"),
            "snr_db": st.column_config.NumberColumn("SNR dB", format="%.1f"),
            "requested_snr_db": st.column_config.NumberColumn("requested SNR", format="%.1f"),
            "level_dbfs": st.column_config.NumberColumn("level dBFS", format="%.1f"),
        },
    )
    if shown.empty:
        st.info("No utterance matches these filters.")
        return
    ids = list(shown["id"])
    utt = st.selectbox(
        "Listen to",
        ids,
        key="listen",
        format_func=lambda i: f"{i} · {shown.loc[shown['id'] == i, 'text'].iloc[0][:70]}",
    )
    row = shown[shown["id"] == utt].iloc[0]
    try:
        st.audio(data.audio_bytes(view, utt, roots), format="audio/flac")
    except (WorkbenchError, OSError, KeyError) as exc:
        st.error(f"cannot play {utt}: {exc}")
    snr_text = (
        f"SNR {row['snr_db']:.1f} dB"
        if row["snr_db"] == row["snr_db"] and row["snr_db"] is not None
        else "no SNR"
    )
    st.markdown(
        f"**{row['text']}**  \n{row['condition']} · {row['bucket']} · {row['duration_s']:.2f} s · "
        f"{snr_text} · accent {row['accent']} · voice {row['voice']} · speaker {row['speaker']}"
    )

"""Small Streamlit helpers shared by the pages: roots, friendly empty states, query-parameter pickers."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

import streamlit as st

from workbench.dashboard.paths import ArtifactRoots, OutsideArtifacts, artifact_roots, resolve


def roots() -> ArtifactRoots:
    return artifact_roots()


def empty_state(what: str, command: str, detail: str = "") -> None:
    """Say that nothing is there yet and which command makes it."""
    st.info(f"**No {what} yet.** {detail}\n\nMake one with:\n```bash\n{command}\n```\n"
            "or start it from the **Run** page.", icon=":material/inbox:")


def pick(label: str, options: Sequence[str], param: str, area: str | tuple[str, ...],
         key: str | None = None) -> str | None:
    """A selectbox whose choice is mirrored in the URL (``?param=value``) so views can be linked.

    A value from the URL that is not one of ``options`` is not opened: a path outside the artifact
    folders is refused with the resolver's message, any other unknown value with a warning.
    """
    options = list(options)
    if not options:
        return None
    wanted = st.query_params.get(param)
    index = 0
    if wanted is not None:
        if wanted in options:
            index = options.index(wanted)
        else:
            try:
                resolve(wanted, area, roots())
                st.warning(f"`{wanted}` is not one of the {label.lower()} options; showing `{options[0]}`.")
            except OutsideArtifacts as exc:
                st.error(str(exc))
    choice = st.selectbox(label, options, index=index, key=key or f"pick-{param}")
    if choice is not None and st.query_params.get(param) != choice:
        st.query_params[param] = choice
    return choice


def fmt_pct(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None or value != value else f"{value:.{digits}f} %"


def lazy_bytes(path: Path, areas: str | tuple[str, ...]) -> Callable[[], bytes]:
    """Download data read only when the button is pressed, re-checked by the resolver at that moment."""
    def read() -> bytes:
        return resolve(path, areas, roots()).read_bytes()

    return read


def chart(spec, **kwargs):
    """``st.altair_chart`` at full width whose plot keeps the height the chart asks for (width fits only)."""
    import altair as alt

    return st.altair_chart(spec.properties(autosize=alt.AutoSizeParams(type="fit-x", contains="padding")),
                           width="stretch", **kwargs)

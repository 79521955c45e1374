"""Small Streamlit helpers shared by the pages: roots, access settings, friendly empty states,
query-parameter pickers, opening the picked artifact, downloads (none in read-only mode) and full-width charts."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import streamlit as st

from workbench.dashboard.access import Settings, read_settings
from workbench.dashboard.paths import ArtifactRoots, OutsideArtifacts, artifact_roots, resolve
from workbench.errors import WorkbenchError

T = TypeVar("T")


def roots() -> ArtifactRoots:
    """The artifact folders, read from the environment on every page run."""
    return artifact_roots()


def settings() -> Settings:
    """The access settings (read-only mode, job limit), read from the environment on every page run."""
    return read_settings()


@dataclass(frozen=True)
class Missing:
    """What a page says when it has nothing to open: what is missing, the command that makes it, where it lives."""

    what: str
    command: str
    detail: str = ""


def empty_state(what: str, command: str, detail: str = "") -> None:
    """Say that nothing is there yet and which command makes it."""
    run_page = "" if settings().read_only else "or start it from the **Run** page."
    st.info(
        f"**No {what} yet.** {detail}\n\nMake one with:\n```bash\n{command}\n```\n{run_page}",
        icon=":material/inbox:",
    )


def pick(
    label: str, options: Sequence[str], param: str, area: str | tuple[str, ...], key: str | None = None
) -> str:
    """A selectbox whose choice is mirrored in the URL (``?param=value``) so views can be linked.

    A value from the URL that is not one of ``options`` is not opened: a path outside the artifact
    folders is refused with the resolver's message, any other unknown value with a warning. Callers show
    an empty state instead of calling this with no ``options``.
    """
    options = list(options)
    if not options:
        raise ValueError(f"no {label.lower()} options to pick from")
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
    if choice is None:  # a selectbox with options and an index always holds one
        choice = options[index]
    if st.query_params.get(param) != choice:
        st.query_params[param] = choice
    return choice


def open_picked(
    label: str,
    options: Sequence[str],
    param: str,
    area: str | tuple[str, ...],
    load: Callable[[str], T],
    missing: Missing,
) -> T | None:
    """The artifact a page shows: ``missing`` as an empty state when there are no ``options``, else a
    picker (``pick``) whose choice is opened with ``load``; a user error from ``load`` is shown.

    None when nothing was opened (the page stops there).
    """
    if not options:
        empty_state(missing.what, missing.command, missing.detail)
        return None
    choice = pick(label, options, param, area)
    try:
        return load(choice)
    except WorkbenchError as exc:
        st.error(str(exc))
        return None


def download(label: str, data: Any, *, where: Any = st, **kwargs: Any) -> bool:
    """``st.download_button`` (drawn in ``where``, e.g. a column), or nothing at all in read-only mode."""
    if settings().read_only:
        return False
    return where.download_button(label, data, **kwargs)


def lazy_bytes(path: Path, areas: str | tuple[str, ...]) -> Callable[[], bytes]:
    """Download data read only when the button is pressed, re-checked by the resolver at that moment."""

    def read() -> bytes:
        return resolve(path, areas, roots()).read_bytes()

    return read


def chart(spec: Any, **kwargs: Any) -> Any:
    """``st.altair_chart`` at full width whose plot keeps the height the chart asks for (width fits only)."""
    import altair as alt

    return st.altair_chart(
        spec.properties(autosize=alt.AutoSizeParams(type="fit-x", contains="padding")),
        width="stretch",
        **kwargs,
    )

"""The placeholder dashboard page runs under Streamlit's AppTest and shows the sets that exist."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

APP = Path(__file__).resolve().parent.parent / "app.py"


def test_placeholder_page_lists_sets(tiny_sets, monkeypatch, tmp_path) -> None:
    import workbench.config as config

    root = tmp_path / "calib_sets"
    shutil.copytree(tiny_sets.calib.path, root / tiny_sets.calib.path.name)
    monkeypatch.setattr(config, "CALIB_SETS_DIR", root)
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    assert not at.exception
    assert at.selectbox[0].options == [tiny_sets.calib.path.name]
    assert at.metric[0].value == str(tiny_sets.calib.card["utterances"])

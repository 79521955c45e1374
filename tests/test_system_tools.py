"""With no text-to-speech program on PATH (espeak-ng, flite, festival's text2wave; sox is not used),
``data build --source synthetic`` fails with one ``error:`` line naming the Debian packages and writes
nothing, while every other verb runs: data list/show, calibrate, cache, signoff, report."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from workbench.cli import main
from workbench.speech import tts


@pytest.fixture
def no_tts_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """PATH holds only an empty folder; the voice look-ups are re-done under it and again afterwards."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    tts.available_voices.cache_clear()
    tts._espeak_voice_names.cache_clear()
    assert not any(shutil.which(p) for p in ("espeak-ng", "flite", "text2wave", "festival", "sox"))
    yield
    tts.available_voices.cache_clear()
    tts._espeak_voice_names.cache_clear()


def test_synthetic_build_names_the_debian_packages(no_tts_on_path, tmp_path: Path, capsys) -> None:
    ws = tmp_path / "ws"
    assert (
        main(
            [
                "--workspace",
                str(ws),
                "data",
                "build",
                "--name",
                "x",
                "--calib-per-condition",
                "1",
                "--eval-per-condition",
                "1",
            ]
        )
        == 1
    )
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1
    assert "apt-get install espeak-ng flite festival festvox-kallpc16k festvox-kdlpc16k" in err
    assert not (ws / "calib_sets").exists() or not list((ws / "calib_sets").iterdir())


@pytest.mark.slow
def test_every_other_verb_works_without_them(no_tts_on_path, tmp_path: Path, speech_like, capsys) -> None:
    from dashkit import CALIB_TEXTS, EVAL_TEXTS, write_unit_set

    from workbench.model.synthetic import save_random_wav2vec2

    ws = tmp_path / "ws"
    write_unit_set(ws / "calib_sets" / "unit-calib", CALIB_TEXTS, speech_like, seed=0)
    write_unit_set(ws / "calib_sets" / "unit-eval", EVAL_TEXTS, speech_like, seed=1)
    model = save_random_wav2vec2(
        ws / "models" / "tiny", "tiny", seed=0
    )  # inside the workspace: records read nothing outside it
    cli = ["--workspace", str(ws)]
    assert main([*cli, "data", "list"]) == 0
    assert main([*cli, "data", "show", "unit-calib"]) == 0
    assert main([*cli, "calibrate", "--model", str(model), "--set", "unit-calib", "--method", "max"]) == 0
    assert main([*cli, "cache", "list"]) == 0
    assert "method=max" in capsys.readouterr().out
    assert (
        main(
            [
                *cli,
                "signoff",
                "--model",
                str(model),
                "--calib-set",
                "unit-calib",
                "--eval-set",
                "unit-eval",
                "--method",
                "max",
                "--no-latency",
                "--resamples",
                "100",
                "--out",
                str(ws / "reports" / "s"),
            ]
        )
        == 0
    )
    assert main([*cli, "report", "--record", str(ws / "reports" / "s" / "report.json")]) == 0
    assert "error:" not in capsys.readouterr().err
    assert (
        list((ws / "engines").glob("*/calib-*-max*.cache"))
        and (ws / "reports" / "s" / "report.html").is_file()
    )

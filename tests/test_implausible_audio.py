"""Implausible audio at import: a header claiming a sample rate no recording has (1 Hz, 10 MHz) or a 2-hour
"clip" is named at import (calibration imports skip it, evaluation imports refuse unless --skip-implausible),
and a clip far from the median duration is kept but never stretches the set's derived engine profile.

The source is an audio folder (``x.wav`` + ``x.txt``) written on disk by soundfile; the 2-hour clip is a real
2-hour FLAC (8 kHz, silent: it is refused from its header, before anything is decoded)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from workbench.cli import main
from workbench.speech.profiles import card_profile
from workbench.speech.store import load_set

WORDS = ["ALPHA", "BRAVO", "CHARLIE", "DELTA", "ECHO", "FOXTROT", "GOLF", "HOTEL"]


@pytest.fixture(scope="module")
def two_hours(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("long") / "two_hours.flac"
    with sf.SoundFile(str(path), "w", 8_000, 1, format="FLAC", subtype="PCM_16") as out:
        block = np.zeros(8_000 * 600, dtype=np.int16)
        for _ in range(12):
            out.write(block)
    return path


@pytest.fixture
def folder(tmp_path, speech_like, two_hours) -> Path:
    """Eight 2-4 s clips, one 45 s clip (an outlier, plausible), and three implausible files."""
    root = tmp_path / "corpus"
    root.mkdir()
    for i, word in enumerate(WORDS):
        sf.write(str(root / f"c{i}.wav"), speech_like(2.0 + (i % 3), seed=i), 16_000)
        (root / f"c{i}.txt").write_text(f"{word} SAYS CLIP {word}\n")
    sf.write(str(root / "long_talk.wav"), speech_like(45.0, seed=50), 16_000)
    (root / "long_talk.txt").write_text("A LONG TALK\n")
    sf.write(str(root / "one_hz.wav"), (speech_like(0.01, seed=60) * 30000).astype(np.int16), 1)
    (root / "one_hz.txt").write_text("ONE HERTZ\n")
    sf.write(str(root / "ten_mhz.wav"), (speech_like(0.01, seed=61) * 30000).astype(np.int16), 10_000_000)
    (root / "ten_mhz.txt").write_text("TEN MEGAHERTZ\n")
    (root / "two_hours.flac").symlink_to(two_hours)  # read by the import, copied in never: it is refused
    (root / "two_hours.txt").write_text("TWO HOURS\n")
    return root


def _import(folder: Path, role: str, *extra: str) -> list[str]:
    return [
        "data",
        "import",
        "--source",
        "folder",
        "--path",
        str(folder),
        "--name",
        role,
        "--role",
        role,
        "--workers",
        "1",
        "--no-progress",
        "--root",
        str(folder.parent / "sets"),
        *extra,
    ]


def test_calibration_import_skips_implausible_files_and_names_each(folder, capsys) -> None:
    assert main(_import(folder, "calib")) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "left out 3 file(s) that are no plausible utterance:" in out
    assert "one_hz.wav: its header claims a sample rate of 1 Hz" in out
    assert "ten_mhz.wav: its header claims a sample rate of 10000000 Hz" in out
    assert "two_hours.flac: it runs 120.0 min, longer than one utterance" in out
    speech_set = load_set(folder.parent / "sets" / "calib")
    assert len(speech_set.utterances) == 9  # eight clips and the 45 s talk
    assert len(speech_set.card["checks"]["implausible"]) == 3


def test_an_outlier_is_kept_but_does_not_stretch_the_derived_profile(folder, capsys) -> None:
    assert main(_import(folder, "calib")) == 0
    out = capsys.readouterr().out
    speech_set = load_set(folder.parent / "sets" / "calib")
    profile = card_profile(speech_set.card)
    assert profile is not None and profile.max_s == 4.0  # the longest ordinary clip, not the 45 s talk
    assert "1 clip(s) kept in the set but not in its derived profile" in out and "long_talk.wav (45 s)" in out
    talk = next(u for u in speech_set.utterances if u.extra["original"] == "long_talk.wav")
    assert talk.bucket is None
    assert speech_set.card["checks"]["profile_outliers"]["clips"][0]["duration_s"] == 45.0


def test_evaluation_import_refuses_implausible_files_unless_told_to_skip(folder, capsys) -> None:
    assert main(_import(folder, "eval")) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: 3 file(s) of evaluation set eval are no plausible")
    assert "one_hz.wav" in err[0] and "two_hours.flac" in err[0] and "--skip-implausible" in err[0]
    assert not (folder.parent / "sets" / "eval").exists()  # nothing written
    assert main(_import(folder, "eval", "--skip-implausible")) == 0
    assert "left out 3 file(s)" in capsys.readouterr().out
    assert len(load_set(folder.parent / "sets" / "eval").utterances) == 9


def test_a_built_pair_skips_implausible_files_and_outliers_with_reasons(folder, capsys) -> None:
    root = folder.parent / "sets"
    args = ["data", "build", "--source", "folder", "--path", str(folder), "--root", str(root), "--name", "b"]
    assert main([*args, "--calib-per-condition", "2", "--eval-per-condition", "2"]) == 0, capsys.readouterr()
    out = capsys.readouterr().out
    assert "left out as far from the median duration" in out and "--max-seconds 45" in out
    calib = load_set(root / "b-calib")
    reasons = {Path(s["item"]).name: s["reason"] for s in calib.card["skipped"]}
    assert "sample rate of 1 Hz" in reasons["one_hz.wav"], reasons
    assert "120.0 min" in reasons["two_hours.flac"]
    assert "longer than the engine profile's 4.0 s" in reasons["long_talk.wav"]
    assert card_profile(calib.card).max_s == 4.0

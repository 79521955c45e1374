"""Long-form sets: one speaker's utterances of one condition joined into recordings of min-max seconds with
noise-floor pauses, stored through the set writer (card, hash, atomic) and read back."""

from __future__ import annotations

import numpy as np
import pytest
from evalkit import write_small_set

from workbench.errors import WorkbenchError
from workbench.speech.longform import LongFormConfig, build_long_form, noise_floor
from workbench.speech.store import load_set

WORDS = ["ALPHA", "BRAVO", "CHARLIE", "DELTA", "ECHO", "FOXTROT", "GOLF", "HOTEL", "INDIA", "JULIET"]


def test_recordings_keep_speaker_and_condition(tmp_path, speech_like) -> None:
    texts = [f"{WORDS[i % 10]} {WORDS[(i * 3) % 10]} {i}" for i in range(72)]
    source = write_small_set(tmp_path / "sets", texts, speech_like)
    config = LongFormConfig(min_s=5.0, max_s=9.0, pause_s=(0.3, 0.6), seed=1)
    built = build_long_form(source, tmp_path / "sets" / "unit-long", config)
    again = load_set(tmp_path / "sets" / "unit-long")
    assert again.content_hash == built.content_hash and len(again.utterances) >= 10
    by_id = {u.id: u for u in source.utterances}
    for rec in again.utterances:
        parts = [by_id[p] for p in rec.extra["parts"]]
        assert {(p.speaker, p.condition, p.accent) for p in parts} == {
            (rec.speaker, rec.condition, rec.accent)
        }
        assert rec.text == " ".join(p.text for p in parts)
        pauses = rec.extra["pauses_s"]
        assert len(pauses) == len(parts) - 1 and all(0.3 <= s <= 0.6 for s in pauses)
        assert config.min_s <= rec.duration_s <= config.max_s
        assert rec.duration_s == pytest.approx(sum(p.duration_s for p in parts) + sum(pauses), abs=0.01)
        audio = again.audio(rec)
        assert len(audio) == pytest.approx(rec.duration_s * 16_000, abs=8)  # duration to the ms
        gap = audio[
            int(parts[0].duration_s * 16_000) + 80 : int((parts[0].duration_s + pauses[0]) * 16_000) - 80
        ]
        floor = noise_floor(source.audio(parts[0]))  # the pause sits at the noise floor, not at zero
        assert floor > 0 and np.sqrt(np.mean(gap**2)) == pytest.approx(floor, rel=0.15)
    assert built.card["made"]["config"]["from_set"] == source.name


def test_noise_floor_is_the_quiet_part() -> None:
    rng = np.random.default_rng(0)
    audio = np.concatenate([0.01 * rng.standard_normal(16_000), 0.5 * rng.standard_normal(16_000)])
    assert noise_floor(audio) == pytest.approx(0.01, rel=0.1)


def test_too_little_speech_is_refused_and_nothing_written(tmp_path, speech_like) -> None:
    source = write_small_set(tmp_path / "sets", ["ONE TWO", "THREE FOUR"], speech_like)
    with pytest.raises(WorkbenchError, match="no speaker with 30 s"):
        build_long_form(source, tmp_path / "sets" / "unit-long")
    assert not (tmp_path / "sets" / "unit-long").exists()
    with pytest.raises(WorkbenchError, match="0 < min <= max"):
        build_long_form(source, tmp_path / "sets" / "x", LongFormConfig(min_s=50, max_s=40))


def test_data_long_form_command(tmp_path, speech_like, capsys) -> None:
    from workbench.cli import main

    texts = [f"{WORDS[i % 10]} {WORDS[(i * 7) % 10]}" for i in range(24)]
    write_small_set(tmp_path, texts, speech_like)
    argv = [
        "data",
        "long-form",
        "unit-eval",
        "--root",
        str(tmp_path),
        "--min-seconds",
        "4",
        "--max-seconds",
        "8",
    ]
    assert main([*argv, "--name", "unit-long"]) == 0
    assert load_set(tmp_path / "unit-long").utterances and "unit-long" in capsys.readouterr().out
    assert main([*argv, "--name", "../escape"]) == 1
    assert "may hold only letters" in capsys.readouterr().err and not (tmp_path.parent / "escape").exists()

"""Long-form sets: one speaker's utterances of one condition joined into recordings of min-max seconds at one
speech level with room-tone pauses, stored through the set writer (card, hash, atomic) and read back."""

from __future__ import annotations

import numpy as np
import pytest
from evalkit import write_small_set

from workbench.errors import WorkbenchError
from workbench.speech.audio import rms_dbfs
from workbench.speech.conditions import make_noise
from workbench.speech.longform import PEAK_LIMIT, LongFormConfig, build_long_form, noise_floor, room_tone
from workbench.speech.records import Clip, Utterance
from workbench.speech.store import load_set, write_set

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
        # the pause sits at the noise floor of the part before it (at that part's gain), not at zero
        floor = noise_floor(source.audio(parts[0])) * 10 ** (rec.extra["gains_db"][0] / 20)
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


def _one_speaker_set(root, speech_like, levels_dbfs: list[float]):
    """One speaker, one condition, each utterance at its own speech level (as a set draws them)."""
    clips = []
    for i, level in enumerate(levels_dbfs):
        audio = speech_like(3.0, seed=i).astype(np.float64)
        audio *= 10 ** ((level - rms_dbfs(audio)) / 20)
        utt = Utterance(
            id=f"u{i:03d}",
            text=f"{WORDS[i % 10]} {i}",
            speaker="spk0",
            voice="voice0",
            accent="us",
            condition="quiet",
            duration_s=3.0,
            source="unit",
            level_dbfs=round(rms_dbfs(audio), 3),
        )
        clips.append(Clip(utt, audio.astype(np.float32)))
    return write_set(root / "unit-eval", clips, {"how": "unit test"}, [], {})


def test_parts_are_joined_at_one_speech_level(tmp_path, speech_like) -> None:
    # levels drawn 20 dB apart, as a set's level range allows: the recording holds them at their median
    levels = [-35.0, -15.0, -28.0, -20.0, -33.0, -17.0, -25.0]
    source = _one_speaker_set(tmp_path, speech_like, levels)
    built = build_long_form(source, tmp_path / "unit-long", LongFormConfig(min_s=10.0, max_s=40.0, seed=3))
    (rec,) = built.utterances
    audio = built.audio(rec)
    start, parts = 0, []
    for i, pause in enumerate([0.0, *rec.extra["pauses_s"]]):
        start += int(round(pause * 16_000)) + (48_000 if i else 0)
        parts.append(audio[start : start + 48_000])
    measured = [rms_dbfs(p) for p in parts]
    assert max(measured) - min(measured) < 0.5  # was 20 dB apart
    assert measured[0] == pytest.approx(float(np.median(levels)), abs=0.5) == rec.level_dbfs
    assert rec.extra["gains_db"] == pytest.approx([np.median(levels) - lv for lv in levels], abs=0.05)


def test_a_loud_part_lowers_the_whole_recording_not_just_itself(tmp_path, speech_like) -> None:
    source = _one_speaker_set(tmp_path, speech_like, [-40.0, -12.0, -40.0, -40.0])  # -12 dB peaks near 1
    built = build_long_form(source, tmp_path / "unit-long", LongFormConfig(min_s=10.0, max_s=40.0))
    (rec,) = built.utterances
    audio = built.audio(rec)
    gains = rec.extra["gains_db"]
    assert np.max(np.abs(audio)) <= PEAK_LIMIT + 1e-3
    assert gains[0] == gains[2] == gains[3] and gains[0] - gains[1] == pytest.approx(28.0, abs=0.05)


def test_room_tone_keeps_the_background_of_the_clip() -> None:
    # pink noise (energy at low frequencies) under loud bursts: the pause is that noise, not white noise
    rng = np.random.default_rng(0)
    background = make_noise("pink", 48_000, rng)
    background *= 0.01 / np.sqrt(np.mean(background**2))
    bursts = np.zeros(48_000)
    for k in range(0, 48_000, 8_000):
        bursts[k : k + 5_000] = 0.3 * np.sin(2 * np.pi * 200 * np.arange(5_000) / 16_000)
    tone = room_tone((background + bursts).astype(np.float32), 16_000, np.random.default_rng(1))

    def centroid_hz(x: np.ndarray) -> float:
        power = np.abs(np.fft.rfft(x)) ** 2
        return float(np.sum(np.fft.rfftfreq(len(x), 1 / 16_000) * power) / np.sum(power))

    assert len(tone) == 16_000 and tone.dtype == np.float32
    # the background's level (between its floor and its RMS), none of the bursts (30 times louder)
    assert noise_floor(background) < np.sqrt(np.mean(tone**2)) < 0.01
    white = centroid_hz(rng.standard_normal(16_000))  # about 4,000 Hz: the earlier white-noise pauses
    assert centroid_hz(background) < 1_000 and centroid_hz(tone) < white / 2
    assert not room_tone(np.zeros(100, dtype=np.float32), 500, rng).any()  # too short to sample: silence

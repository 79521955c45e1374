"""External sources (audio folder, JSONL manifest, Hugging Face dataset on disk) and bad input:
each problem is fixed and recorded on the utterance, or skipped with a reason in the set's card."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from workbench.config import EngineProfile, SetBuildConfig
from workbench.errors import WorkbenchError
from workbench.speech.builder import build_external_sets
from workbench.speech.sources import AudioFolderSource, HFDatasetSource, ManifestSource, collect
from workbench.speech.store import load_set, verify_set

WORDS = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
    "mike",
    "november",
    "oscar",
]
# speaker -> accent; two speakers per accent so each accent has one evaluation speaker
SPEAKERS = {"ann": "us", "bob": "us", "cat": "us", "dan": "us", "eve": "scottish", "fay": "scottish"}


def _text(i: int) -> str:
    return (
        " ".join(WORDS[(i + k * 7) % len(WORDS)] for k in range(3))
        + f" {WORDS[i % len(WORDS)]}s number {'x' * (i + 1)}"
    )


def _good_clips(speech_like) -> list[dict]:
    """Four clips per speaker (two short, two long), each with a unique transcript."""
    out = []
    i = 0
    for speaker in SPEAKERS:
        for seconds in (1.5, 2.5, 4.5, 6.0):
            out.append(
                {
                    "file": f"{speaker}/{speaker}_{i:02d}.wav",
                    "text": _text(i),
                    "speaker": speaker,
                    "audio": speech_like(seconds, seed=i),
                }
            )
            i += 1
    return out


def _bad_clips(speech_like) -> dict[str, tuple[np.ndarray | bytes, str | None, int]]:
    """file -> (audio or raw bytes, transcript, rate)."""
    stereo = np.stack([speech_like(2.0, 44_100, 50), speech_like(2.0, 44_100, 51)], axis=1)
    return {
        "ann/silent.wav": (np.zeros(32_000, dtype=np.float32), "silence is golden", 16_000),
        "ann/corrupt.wav": (b"RIFF\x10\x00\x00\x00WAVEfmt garbage", "never read", 16_000),
        "bob/empty_text.wav": (speech_like(2.0, seed=60), "   ", 16_000),
        "bob/stereo_44k.wav": (stereo, "two channels at forty four k", 44_100),
        "cat/odd_chars.wav": (speech_like(2.0, 8_000, 61), "Héllo, wörld! Ça va? (yes)", 8_000),
        "cat/too_long.wav": (speech_like(9.5, seed=62), "a clip that runs on for far too long", 16_000),
        "dan/digits.wav": (speech_like(2.0, seed=63), "call me at 555 1234", 16_000),
    }


def _write(path: Path, audio, rate: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(audio, bytes):
        path.write_bytes(audio)
    else:
        sf.write(str(path), audio, rate, subtype="PCM_16")


@pytest.fixture
def audio_folder(tmp_path, speech_like) -> Path:
    root = tmp_path / "folder"
    for clip in _good_clips(speech_like):
        _write(root / clip["file"], clip["audio"], 16_000)
        (root / clip["file"]).with_suffix(".txt").write_text(clip["text"] + "\n")
    for name, (audio, text, rate) in _bad_clips(speech_like).items():
        _write(root / name, audio, rate)
        (root / name).with_suffix(".txt").write_text(text)
    speakers = [f"{c['file']}\t{c['speaker']}\t{SPEAKERS[c['speaker']]}" for c in _good_clips(speech_like)]
    (root / "speakers.tsv").write_text("\n".join(speakers) + "\n")
    return root


@pytest.fixture
def manifest(tmp_path, speech_like) -> Path:
    root = tmp_path / "manifest"
    lines = []
    for clip in _good_clips(speech_like):
        _write(root / clip["file"], clip["audio"], 16_000)
        lines.append(
            json.dumps(
                {
                    "audio": clip["file"],
                    "text": clip["text"],
                    "speaker": clip["speaker"],
                    "accent": SPEAKERS[clip["speaker"]],
                }
            )
        )
    for name, (audio, text, rate) in _bad_clips(speech_like).items():
        _write(root / name, audio, rate)
        lines.append(json.dumps({"audio": name, "text": text, "speaker": name.split("/")[0]}))
    lines.append("{not json")
    lines.append(json.dumps({"text": "no audio field"}))
    lines.append(json.dumps({"audio": "missing/file.wav", "text": "file is not there"}))
    path = root / "data.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def _reasons(card: dict) -> dict[str, str]:
    return {s["item"]: s["reason"] for s in card["skipped"]}


def _check_bad_input_handling(clips, skipped, built, key) -> None:
    """The shared expectations for every external source (``key`` maps a file to its item name)."""
    reasons = {s.item: s.reason for s in skipped}
    assert "silent" in reasons[key("ann/silent.wav")]
    assert "unreadable or corrupt" in reasons[key("ann/corrupt.wav")]
    assert reasons[key("bob/empty_text.wav")] == "empty transcript"
    assert "digits" in reasons[key("dan/digits.wav")]
    by_original = {c.utterance.extra["original"]: c.utterance for c in clips}
    stereo = by_original[key("bob/stereo_44k.wav")]
    assert "downmixed 2 channels to mono" in stereo.fixes and "resampled 44100 Hz to 16000 Hz" in stereo.fixes
    odd = by_original[key("cat/odd_chars.wav")]
    assert odd.text == "HELLO WORLD CA VA YES"
    assert (
        any("outside the alphabet" in f for f in odd.fixes) and "resampled 8000 Hz to 16000 Hz" in odd.fixes
    )
    # the card lists every skipped input with its reason, the over-long clip included
    card_reasons = _reasons(built.calib.card)
    for name in ("ann/silent.wav", "ann/corrupt.wav", "bob/empty_text.wav", "dan/digits.wav"):
        assert key(name) in card_reasons
    assert "longer than the engine profile's 8.0 s" in card_reasons[key("cat/too_long.wav")]
    card_md = (built.calib.path / "card.md").read_text()
    assert "longer than the engine profile" in card_md and "empty transcript" in card_md
    # stored audio is 16 kHz mono, fixes are kept in the manifest, and the hash verifies
    for speech_set in (built.calib, built.eval):
        stored = load_set(speech_set.path)
        verify_set(stored)
        for utt, audio in stored.iter_audio():
            assert audio.ndim == 1 and abs(len(audio) / 16_000 - utt.duration_s) < 1e-3
    assert built.checks["disjoint_by_text"] and built.checks["disjoint_by_speaker"]


def _build(clips, skipped, tmp_path, name):
    cfg = SetBuildConfig(
        name=name, calib_per_condition=4, eval_per_condition=2, workers=1, profile=EngineProfile()
    )
    return build_external_sets(cfg, clips, skipped, name, root=tmp_path / "sets")


def test_audio_folder_source(audio_folder, tmp_path):
    clips, skipped = collect(AudioFolderSource(audio_folder))
    built = _build(clips, skipped, tmp_path, "folder")
    _check_bad_input_handling(clips, skipped, built, key=lambda name: name)
    speakers = {u.speaker for u in built.calib.utterances} | {u.speaker for u in built.eval.utterances}
    assert speakers <= set(SPEAKERS) | {"bob", "cat", "ann", "dan"}
    assert {u.accent for u in built.calib.utterances if u.condition == "accented"} == {"scottish"}


def test_manifest_source(manifest, tmp_path):
    clips, skipped = collect(ManifestSource(manifest))
    reasons = {s.item: s.reason for s in skipped}
    last = len(manifest.read_text().splitlines())
    assert reasons[f"line {last - 2}"].startswith("not valid JSON")
    assert reasons[f"line {last - 1}"] == "no 'audio' field"
    assert "unreadable or corrupt" in reasons[f"line {last} (missing/file.wav)"]
    line_of = {}
    for number, line in enumerate(manifest.read_text().splitlines(), 1):
        with contextlib.suppress(json.JSONDecodeError):
            line_of[json.loads(line).get("audio")] = number

    def key(name: str) -> str:
        return f"line {line_of[name]} ({name})" if name in ("ann/silent.wav", "ann/corrupt.wav") else name

    built = _build(clips, skipped, tmp_path, "manifest")
    _check_bad_input_handling(clips, skipped, built, key)


def test_hf_dataset_on_disk(tmp_path, speech_like):
    datasets = pytest.importorskip("datasets")
    rows = {"audio": [], "sentence": [], "client": [], "accent": []}
    for clip in _good_clips(speech_like):
        path = tmp_path / "hf_src" / clip["file"]
        _write(path, clip["audio"], 16_000)
        rows["audio"].append({"bytes": path.read_bytes(), "path": None})
        rows["sentence"].append(clip["text"])
        rows["client"].append(clip["speaker"])
        rows["accent"].append(SPEAKERS[clip["speaker"]])
    for name, (audio, text, rate) in _bad_clips(speech_like).items():
        path = tmp_path / "hf_src" / name
        _write(path, audio, rate)
        rows["audio"].append({"bytes": path.read_bytes(), "path": None})
        rows["sentence"].append(text)
        rows["client"].append(name.split("/")[0])
        rows["accent"].append("us")
    n_good = len(_good_clips(speech_like))
    saved = tmp_path / "tiny_hf"
    table = datasets.Dataset.from_dict(rows).cast_column("audio", datasets.Audio())  # as hub datasets have it
    datasets.DatasetDict({"train": table}).save_to_disk(str(saved))

    with pytest.raises(WorkbenchError, match="no column 'text'"):
        collect(HFDatasetSource(str(saved), "train"))
    with pytest.raises(WorkbenchError, match="splits"):
        collect(HFDatasetSource(str(saved), "test", text_column="sentence"))
    source = HFDatasetSource(str(saved), "train", "audio", "sentence", "client", "accent")
    clips, skipped = collect(source)
    index = {name: n_good + i for i, name in enumerate(_bad_clips(speech_like))}
    built = _build(clips, skipped, tmp_path, "hf")
    _check_bad_input_handling(clips, skipped, built, key=lambda name: f"tiny_hf[{index[name]}]")
    assert {u.speaker for u in built.eval.utterances} & set(SPEAKERS)
    # ids do not depend on where the dataset was saved
    moved = tmp_path / "elsewhere" / "tiny_hf"
    moved.parent.mkdir()
    saved.rename(moved)
    again, _ = collect(HFDatasetSource(str(moved), "train", "audio", "sentence", "client", "accent"))
    assert [c.utterance.id for c in again] == [c.utterance.id for c in clips]


def test_balance_with_external_clips(audio_folder, tmp_path):
    """Every condition x bucket stratum holds the requested count; noisy copies carry measured SNR."""
    clips, skipped = collect(AudioFolderSource(audio_folder))
    cfg = SetBuildConfig(
        name="bal", calib_per_condition=3, eval_per_condition=2, workers=1, profile=EngineProfile()
    )
    built = build_external_sets(cfg, clips, skipped, "folder", root=tmp_path / "sets")
    assert built.calib.card["strata"] == {c: {"long": 1, "short": 2} for c in ("accented", "noisy", "quiet")}
    assert built.calib.card["checks"]["shortfall"] == {}
    assert built.eval.card["strata"] == {c: {"long": 1, "short": 1} for c in ("accented", "noisy", "quiet")}
    for utt in built.calib.utterances + built.eval.utterances:
        if utt.condition == "noisy":
            assert utt.noise_kind and abs(utt.snr_db - utt.requested_snr_db) <= 0.5
            assert any("noise mixed" in f for f in utt.fixes)


def test_shortfall_is_reported(audio_folder, tmp_path):
    clips, skipped = collect(AudioFolderSource(audio_folder))
    cfg = SetBuildConfig(
        name="short", calib_per_condition=20, eval_per_condition=2, workers=1, profile=EngineProfile()
    )
    built = build_external_sets(cfg, clips, skipped, "folder", root=tmp_path / "sets")
    assert built.calib.card["checks"]["shortfall"]  # not enough clips for 10 per stratum
    assert "accented/short" in built.calib.card["checks"]["shortfall"]


def test_missing_inputs_are_user_errors(tmp_path):
    with pytest.raises(WorkbenchError, match="does not exist"):
        collect(AudioFolderSource(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(WorkbenchError, match="no audio files"):
        collect(AudioFolderSource(tmp_path / "empty"))
    with pytest.raises(WorkbenchError, match="not found"):
        collect(ManifestSource(tmp_path / "nope.jsonl"))
    with pytest.raises(WorkbenchError, match="could not load dataset"):
        collect(HFDatasetSource(str(tmp_path / "not-a-dataset-dir-or-hub-id-\u2603")))

"""An evaluation set imported whole is whole: a LibriSpeech split or a Common Voice TSV whose audio files or
transcripts are missing is refused (the first few named, the count given, nothing written), accepted with
``--allow-missing N``, and the shortfall is in the set's card and in every sign-off report that uses it.
A calibration import keeps skipping them with reasons. Fixtures are in the exact on-disk layouts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from layoutkit import text_of, write_commonvoice, write_librispeech

from workbench.cli import main
from workbench.speech.store import load_set


def _librispeech(root: Path, speech_like, speakers=("19", "26"), first_text: int = 0) -> Path:
    """A 5-utterance split with one listed .flac deleted and one transcript line removed."""
    split, ids = write_librispeech(
        root, "test-clean", speakers, 1, 3, lambda i: 1.6, speech_like, first_text=first_text, limit=5
    )
    gone = split / speakers[0] / f"{int(speakers[0]) * 10}" / f"{ids[1]}.flac"
    gone.unlink()
    trans = (
        split / speakers[1] / f"{int(speakers[1]) * 10}" / f"{speakers[1]}-{int(speakers[1]) * 10}.trans.txt"
    )
    lines = trans.read_text().splitlines()
    trans.write_text("\n".join(lines[:-1]) + "\n")  # its last .flac keeps no transcript line
    return split


def _import(root: Path, source: str, path: Path, name: str, *extra: str) -> int:
    argv = ["data", "import", "--name", name, "--source", source, "--path", str(path), "--workers", "1"]
    return main([*argv, "--no-progress", "--root", str(root), *extra])


def _refused(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


def test_librispeech_with_missing_files_is_refused_then_accepted(tmp_path, speech_like, capsys) -> None:
    split = _librispeech(tmp_path / "corpus", speech_like)
    root = tmp_path / "sets"
    assert _import(root, "librispeech", split, "ls") == 1
    err = _refused(capsys)
    assert "2 of the 5 utterances" in err and "--allow-missing 2" in err
    assert "19-190-0001" in err and "which is missing" in err and "no transcript line" in err
    assert not (root / "ls").exists()
    assert _import(root, "librispeech", split, "ls", "--allow-missing", "1") == 1
    assert "--allow-missing 1 accepts fewer" in _refused(capsys)
    assert _import(root, "librispeech", split, "ls", "--allow-missing", "2") == 0
    out = capsys.readouterr().out
    assert "lacks 2 of the 5 utterances" in out
    card = load_set(root / "ls").card
    assert card["utterances"] == 3
    found = card["checks"]["missing"]
    assert (found["count"], found["listed"], found["allowed"]) == (2, 5, 2)
    assert {i["item"] for i in found["items"]} == {"19-190-0001", "26-260-0001"}


def test_commonvoice_with_missing_clip_and_transcript_is_refused_then_accepted(
    tmp_path, speech_like, capsys
) -> None:
    rows = [
        {"client_id": f"c{i}" + "f" * 60, "path": f"cv_{i}.mp3", "sentence": text_of(i), "seconds": 1.5}
        for i in range(4)
    ]
    rows[1].pop("seconds")  # listed in the TSV, no clip in clips/
    rows[2]["sentence"] = ""  # a clip without its sentence
    corpus = write_commonvoice(tmp_path / "cv" / "en", "test", rows, speech_like)
    root = tmp_path / "sets"
    assert _import(root, "commonvoice", corpus, "cv") == 1
    err = _refused(capsys)
    assert "2 of the 4 utterances" in err and "cv_1.mp3" in err and "cv_2.mp3: empty transcript" in err
    assert not (root / "cv").exists()
    assert _import(root, "commonvoice", corpus, "cv", "--allow-missing", "2") == 0
    assert load_set(root / "cv").card["checks"]["missing"]["count"] == 2


def test_calibration_import_keeps_skipping_with_reasons(tmp_path, speech_like) -> None:
    split = _librispeech(tmp_path / "corpus", speech_like)
    root = tmp_path / "sets"
    assert _import(root, "librispeech", split, "ls-calib", "--role", "calib") == 0
    card = load_set(root / "ls-calib").card
    assert card["checks"]["missing"]["count"] == 2 and card["checks"]["missing"]["allowed"] is None
    assert len(card["skipped"]) == 2


@pytest.mark.slow
def test_signoff_report_says_the_evaluation_set_is_not_whole(tmp_path, speech_like, capsys) -> None:
    root = tmp_path / "sets"
    evaluation = _librispeech(tmp_path / "eval", speech_like)
    calib, _ = write_librispeech(
        tmp_path / "calib", "dev-clean", ("31", "32"), 1, 3, lambda i: 1.6, speech_like, first_text=100
    )
    assert _import(root, "librispeech", evaluation, "ls-eval", "--allow-missing", "2") == 0
    assert _import(root, "librispeech", calib, "ls-calib", "--role", "calib") == 0
    out = tmp_path / "report"
    argv = ["signoff", "--calib-set", str(root / "ls-calib"), "--eval-set", str(root / "ls-eval")]
    argv += ["--method", "max", "--engines", str(tmp_path / "engines"), "--no-latency", "--resamples", "100"]
    capsys.readouterr()
    assert main([*argv, "--out", str(out)]) == 0, capsys.readouterr().err[-2000:]
    record = json.loads((out / "report.json").read_text())
    said = [n for n in record["notes"] if "lacks 2 of the 5 utterances" in n]
    assert len(said) == 1 and "--allow-missing 2" in said[0]
    entry = next(a for a in record["provenance"]["artifacts"] if a["role"] == "evaluation set")
    assert entry["missing"] == said[0]
    for name in ("report.md", "report.html"):
        assert "lacks 2 of the 5 utterances" in (out / name).read_text()


def test_audio_folder_with_an_untranscribed_clip_and_a_transcript_without_audio_is_refused(
    tmp_path, speech_like, write_wav, capsys
) -> None:
    corpus = tmp_path / "folder"
    for i in range(3):
        write_wav(corpus / "spk1" / f"c{i}.wav", speech_like(1.4, seed=i))
    rows = [f"spk1/c0.wav\t{text_of(0)}", f"spk1/c1.wav\t{text_of(1)}", f"spk1/c9.wav\t{text_of(9)}"]
    (corpus / "transcripts.tsv").write_text("\n".join(rows) + "\n")  # c2 has no line, c9 no audio
    root = tmp_path / "sets"
    assert _import(root, "folder", corpus, "f") == 1
    err = _refused(capsys)
    assert "2 of the 4 utterances" in err and "spk1/c2.wav: no transcript" in err
    assert "transcripts.tsv names spk1/c9.wav, which is missing" in err
    assert _import(root, "folder", corpus, "f", "--allow-missing", "2") == 0
    assert load_set(root / "f").card["utterances"] == 2

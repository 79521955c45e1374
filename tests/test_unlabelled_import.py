"""Unlabelled sets: audio stored without transcripts (``data import --role unlabelled``), and the verbs that need
references refusing one."""

from __future__ import annotations

import json

import numpy as np
import pytest
from layoutkit import write_librispeech

from workbench.cli import main
from workbench.errors import WorkbenchError
from workbench.speech.importer import ImportConfig, import_set
from workbench.speech.layouts import SourceOptions, open_source
from workbench.speech.store import load_set, verify_set
from workbench.speech.unlabelled import is_unlabelled, require_labelled, require_unlabelled


def _import_cli(root, *args: str) -> int:
    return main(["data", "import", "--no-progress", "--workers", "1", "--root", str(root), *args])


def test_folder_without_transcripts_becomes_an_unlabelled_set(tmp_path, speech_like, write_wav, capsys):
    folder = tmp_path / "prod"
    for i in range(4):
        write_wav(folder / f"spk{i % 2}" / f"clip{i}.wav", speech_like(1.0 + 0.3 * i, seed=i))
    root = tmp_path / "sets"
    assert (
        _import_cli(
            root, "--name", "prod", "--role", "unlabelled", "--source", "folder", "--path", str(folder)
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "came with a transcript" not in out  # none given, none ignored
    sset = load_set(root / "prod")
    verify_set(sset)
    assert is_unlabelled(sset) and sset.card["utterances"] == 4
    assert {u.text for u in sset.utterances} == {""}
    assert sset.card["checks"]["transcripts_ignored"] == 0
    assert {u.speaker for u in sset.utterances} == {"spk0", "spk1"}


def test_transcripts_given_are_ignored_and_said(tmp_path, speech_like, capsys):
    split, ids = write_librispeech(
        tmp_path / "corpus", "test-clean", ("19", "26"), 1, 2, lambda i: 1.5, speech_like
    )
    root = tmp_path / "sets"
    args = ["--name", "ls-u", "--role", "unlabelled", "--source", "librispeech", "--path", str(split)]
    assert _import_cli(root, *args) == 0
    out = capsys.readouterr().out
    assert f"{len(ids)} of the {len(ids)} utterances of ls-u came with a transcript" in out
    assert "ignored" in out
    sset = load_set(root / "ls-u")
    assert sset.card["checks"]["transcripts_ignored"] == len(ids)
    assert all(u.text == "" for u in sset.utterances)
    manifest = [json.loads(x) for x in (sset.path / "manifest.jsonl").read_text().splitlines()]
    assert all(m["text"] == "" for m in manifest)
    # the same audio imported as an evaluation set keeps its transcripts and hashes differently
    assert _import_cli(root, "--name", "ls-e", "--source", "librispeech", "--path", str(split)) == 0
    labelled = load_set(root / "ls-e")
    assert all(u.text for u in labelled.utterances) and labelled.content_hash != sset.content_hash


def test_manifest_without_text_field(tmp_path, speech_like, write_wav):
    write_wav(tmp_path / "a.wav", speech_like(1.2, seed=1))
    write_wav(tmp_path / "b.wav", speech_like(1.4, seed=2))
    manifest = tmp_path / "m.jsonl"
    manifest.write_text('{"audio": "a.wav", "speaker": "s1"}\n{"audio": "b.wav", "speaker": "s2"}\n')
    cfg = ImportConfig(name="m-u", role="unlabelled", workers=1)
    result = import_set(
        open_source("manifest", manifest), cfg, "test", root=tmp_path / "sets", progress=False
    )
    assert result.speech_set.card["utterances"] == 2
    # a labelled import of the same manifest finds no transcripts: an evaluation set is refused, nothing written
    with pytest.raises(WorkbenchError, match="no transcript"):
        import_set(
            open_source("manifest", manifest),
            ImportConfig(name="m-e", workers=1),
            "test",
            root=tmp_path / "sets",
            progress=False,
        )
    assert not (tmp_path / "sets" / "m-e").exists()


def test_hf_dataset_needs_no_text_column_when_unlabelled(tmp_path, speech_like):
    datasets = pytest.importorskip("datasets")
    rows = {"audio": [{"array": speech_like(1.0, seed=i), "sampling_rate": 16_000} for i in range(2)]}
    folder = tmp_path / "ds"
    datasets.Dataset.from_dict(rows).save_to_disk(str(folder))
    with pytest.raises(WorkbenchError, match="no column 'text'"):
        list(open_source("hf", folder).entries())
    source = open_source("hf", folder, SourceOptions(labelled=False))
    cfg = ImportConfig(name="hf-u", role="unlabelled", workers=1)
    assert (
        import_set(source, cfg, "test", root=tmp_path / "sets", progress=False).speech_set.card["utterances"]
        == 2
    )


def test_silent_and_noisy_options_are_refused(tmp_path, write_wav, capsys):
    folder = tmp_path / "silent"
    for i in range(2):
        write_wav(folder / f"s{i}.wav", np.zeros(16_000, dtype=np.float32))
    root = tmp_path / "sets"
    assert (
        _import_cli(
            root, "--name", "sil", "--role", "unlabelled", "--source", "folder", "--path", str(folder)
        )
        == 1
    )
    err = capsys.readouterr().err
    assert err.startswith("error: no usable utterances for sil; nothing written") and err.count("\n") == 1
    assert not (root / "sil").exists()
    with pytest.raises(WorkbenchError, match="drop --noisy-share"):
        ImportConfig(name="x", role="unlabelled", noisy_share=0.25)


def test_labelled_and_unlabelled_sets_are_not_interchangeable(tmp_path, speech_like, write_wav):
    folder = tmp_path / "prod"
    write_wav(folder / "a.wav", speech_like(1.0))
    cfg = ImportConfig(name="u", role="unlabelled", workers=1)
    unlabelled = import_set(
        open_source("folder", folder), cfg, "t", root=tmp_path / "sets", progress=False
    ).speech_set
    with pytest.raises(WorkbenchError, match="--eval-set u is an unlabelled set"):
        require_labelled(unlabelled, "--eval-set")
    assert require_unlabelled(unlabelled, "--unlabelled-set") is unlabelled
    (folder / "a.txt").write_text("hello there")
    labelled = import_set(
        open_source("folder", folder),
        ImportConfig(name="l", workers=1),
        "t",
        root=tmp_path / "sets",
        progress=False,
    ).speech_set
    with pytest.raises(WorkbenchError, match="--unlabelled-set l is an? eval set with transcripts"):
        require_unlabelled(labelled, "--unlabelled-set")
    card = json.loads((labelled.path / "card.json").read_text())
    card.get("made", {}).pop("role", None)  # a card that records no role (no "a ? set")
    (labelled.path / "card.json").write_text(json.dumps(card))
    roleless = load_set(labelled.path, verify=False)
    with pytest.raises(WorkbenchError, match="--unlabelled-set l is a set whose card records no role with"):
        require_unlabelled(roleless, "--unlabelled-set")


def test_signoff_refuses_bad_unlabelled_sets_before_any_model_work(
    tmp_path, speech_like, write_wav, monkeypatch, capsys
):
    from evalkit import constant_ctc_onnx, write_small_set

    from workbench.resources import demo_model_dir
    from workbench.workspace import ENV_VAR

    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    sets = tmp_path / "calib_sets"
    write_small_set(sets, ["HELLO WORLD", "HELLO THERE", "GOODBYE WORLD"], speech_like)
    (tmp_path / "engines").mkdir()
    fp32 = constant_ctc_onnx(tmp_path / "engines" / "fp32.onnx", "HELLO WORLD")
    folder = tmp_path / "long"
    for i in range(3):
        write_wav(folder / f"c{i}.wav", speech_like(5.0, seed=i))
    cfg = ImportConfig(name="long-u", role="unlabelled", workers=1)
    import_set(open_source("folder", folder), cfg, "t", root=sets, progress=False)
    out = tmp_path / "reports" / "r"
    base = [
        "signoff",
        "--eval-set",
        "unit-eval",
        "--candidate",
        f"fp32={fp32}",
        "--model",
        str(demo_model_dir()),
    ]
    base += ["--no-latency", "--min-seconds", "0.5", "--max-seconds", "3", "--out", str(out)]
    cases = [
        (
            ["--unlabelled-set", "long-u"],
            "3 of 3 clips of unlabelled set long-u fall outside the deployment profile",
        ),
        (
            ["--unlabelled-set", "unit-eval"],
            "--unlabelled-set unit-eval is a set whose card records no role with transcripts",
        ),
        (["--unlabelled-set", "long-u", "--unlabelled-set", "long-u"], "given twice"),
    ]
    for extra, match in cases:
        assert main([*base, *extra]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("error: "), err
        import re

        assert re.search(match, err), err
        assert not out.exists()


def test_long_form_of_an_unlabelled_set_stays_unlabelled(tmp_path, speech_like, write_wav):
    from workbench.speech.longform import LongFormConfig, build_long_form

    folder = tmp_path / "prod"
    for i in range(4):
        write_wav(folder / "spk0" / f"c{i}.wav", speech_like(1.5, seed=i))
    cfg = ImportConfig(name="u", role="unlabelled", workers=1)
    source = import_set(
        open_source("folder", folder), cfg, "t", root=tmp_path / "sets", progress=False
    ).speech_set
    joined = build_long_form(source, tmp_path / "sets" / "u-long", LongFormConfig(3.0, 8.0))
    again = load_set(joined.path)
    assert is_unlabelled(again) and again.utterances and all(u.text == "" for u in again.utterances)

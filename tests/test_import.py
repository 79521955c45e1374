"""Whole-set import from corpora in their real layouts (LibriSpeech FLAC tree, Common Voice TSV + MP3),
profiles that follow the data, and what sign-off does with any calibration/evaluation pair.

Fixtures are written by ``layoutkit`` in each exact layout; MP3 clips are written by soundfile
(libsndfile 1.1+ encodes MPEG layer III), so no external encoder is needed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from layoutkit import text_of, write_commonvoice, write_librispeech

from workbench.cli import main
from workbench.config import EngineProfile
from workbench.errors import WorkbenchError
from workbench.journal import SUFFIX
from workbench.speech.importer import ImportConfig, import_set
from workbench.speech.layouts import SourceOptions, open_source
from workbench.speech.layouts.commonvoice import accent_name
from workbench.speech.profiles import card_profile
from workbench.speech.store import load_set, verify_set

SPEAKERS = ("19", "26", "32")
LONG = 12.3  # seconds: longer than the default 8 s profile, as a fifth of LibriSpeech test-clean is


def _duration(i: int) -> float:
    return LONG if i == 7 else 1.2 + 0.45 * (i % 9)


@pytest.fixture
def libri(tmp_path, speech_like):
    """A test-clean-like split: 3 speakers x 2 chapters x 3 utterances, one 12.3 s clip, one listed clip
    missing, one silent clip, one FLAC without a transcript line."""
    split, ids = write_librispeech(
        tmp_path / "corpus",
        "test-clean",
        SPEAKERS,
        2,
        3,
        _duration,
        speech_like,
        sexes={"19": "F", "26": "M"},
    )
    missing = split / "26" / "261" / "26-261-0001.flac"
    missing.unlink()
    silent = split / "32" / "321" / "32-321-0002.flac"
    sf.write(str(silent), np.zeros(16_000 * 2, dtype=np.float32), 16_000, format="FLAC")
    orphan = split / "19" / "190" / "19-190-0099.flac"
    sf.write(str(orphan), speech_like(2.0, seed=99), 16_000, format="FLAC")
    usable = [i for i in ids if i not in ("26-261-0001", "32-321-0002")]
    return split, usable, ids


def _import(source, tmp_path, name="ls-eval", **kw):
    cfg = ImportConfig(name=name, **{"workers": 1, **kw})
    return import_set(source, cfg, f"test:{name}", root=tmp_path / "sets", progress=False)


def _reasons(card: dict) -> dict[str, str]:
    return {s["item"]: s["reason"] for s in card["skipped"]}


def test_librispeech_import_keeps_every_usable_utterance(libri, tmp_path):
    split, usable, ids = libri
    result = _import(open_source("librispeech", split), tmp_path, workers=2, allow_missing=2)
    sset = load_set(result.speech_set.path)
    verify_set(sset)
    assert sorted(u.extra["original"] for u in sset.utterances) == usable  # 16 of 18 listed, nothing sampled
    assert sset.card["utterances"] == len(usable) and sset.card["made"]["role"] == "eval"
    assert sset.card["checks"]["whole_source"] is True
    by_id = {u.extra["original"]: u for u in sset.utterances}
    for utt_id, utt in by_id.items():
        speaker, chapter, _ = utt_id.split("-")
        assert utt.speaker == f"librispeech:{speaker}" and utt.extra["chapter"] == chapter
        assert utt.condition == "quiet" and utt.accent == "us"
        assert utt.text == text_of(ids.index(utt_id))
    assert by_id["19-190-0000"].extra["gender"] == "F" and by_id["26-260-0000"].extra["gender"] == "M"
    assert "gender" not in by_id["32-320-0000"].extra  # not in SPEAKERS.TXT
    reasons = _reasons(sset.card)
    assert "missing" in reasons["26-261-0001"] and "silent" in reasons["32-321-0002"]
    assert "no transcript line" in reasons["19-190-0099"]
    # the profile follows the data: the 12.3 s clip is kept and the profile reaches it
    profile = card_profile(sset.card)
    assert profile.max_s >= LONG and profile.min_s <= 1.2 and "derived" in sset.card["profile"]["how"]
    assert max(u.duration_s for u in sset.utterances) == pytest.approx(LONG, abs=1e-3)
    assert result.fit.outside == 0
    # the stored set does not depend on the worker count
    again = _import(open_source("librispeech", split), tmp_path, name="ls-eval-1", workers=1, allow_missing=2)
    assert [
        json.loads(x)["id"] for x in (again.speech_set.path / "manifest.jsonl").read_text().splitlines()
    ] == [u.id for u in sset.utterances]
    assert again.speech_set.content_hash == sset.content_hash


def test_fixed_profile_says_how_many_and_what_to_pass(libri, tmp_path, capsys):
    split, usable, _ = libri
    root = tmp_path / "sets"
    assert (
        main(
            [
                "data",
                "import",
                "--name",
                "ls8",
                "--source",
                "librispeech",
                "--path",
                str(split),
                "--max-seconds",
                "8",
                "--allow-missing",
                "2",
                "--no-progress",
                "--workers",
                "1",
                "--root",
                str(root),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert f"left out by the fixed profile: 1 of {len(usable)} clips (0 shorter, 1 longer" in out
    assert "pass --max-seconds 12.3" in out
    sset = load_set(root / "ls8")
    assert sset.card["utterances"] == len(usable) - 1
    assert sset.card["checks"]["profile_fit"]["to_keep_them_pass"] == "--max-seconds 12.3"
    assert "longer than the engine profile's 8.0 s" in _reasons(sset.card)["26-260-0001"]
    assert card_profile(sset.card) == EngineProfile(1.0, 4.0, 8.0)


def test_take_keeps_a_seeded_sample(libri, tmp_path):
    split, _, _ = libri
    one = _import(open_source("librispeech", split), tmp_path, name="t1", take=5, role="calib")
    two = _import(open_source("librispeech", split), tmp_path, name="t2", take=5, role="calib", workers=2)
    assert one.speech_set.card["utterances"] == 5 and one.speech_set.card["checks"]["take"] == {
        "requested": 5,
        "kept": 5,
    }
    assert [u.id for u in one.speech_set.utterances] == [u.id for u in two.speech_set.utterances]
    # workers that ran past the fifth clip left no audio behind
    assert len(list((two.speech_set.path / "audio").iterdir())) == 5
    verify_set(load_set(two.speech_set.path))


# ---------------------------------------------------------------- Common Voice

CLIENTS = {  # client -> (accents cell, gender, age)
    "a1": ("United States English", "male_masculine", "twenties"),
    "a2": ("United States English", "female_feminine", "thirties"),
    "a3": ("United States English", "", ""),
    "b1": ("England English", "female_feminine", "fourties"),
    "b2": ("England English", "male_masculine", "twenties"),
    "c1": ("Scottish English|England English", "male_masculine", "sixties"),
    "d1": ("", "", ""),
    "d2": ("", "female_feminine", ""),
}


def _cv_rows() -> list[dict]:
    rows = []
    for n, (client, (accent, gender, age)) in enumerate(CLIENTS.items()):
        for k in range(2):
            i = 2 * n + k
            rows.append(
                {
                    "client_id": f"{client}{'f' * 60}",
                    "path": f"common_voice_en_{100 + i}.mp3",
                    "sentence": text_of(200 + i).capitalize() + ".",
                    "accent": accent,
                    "gender": gender,
                    "age": age,
                    "seconds": 1.5 + 0.5 * k,
                }
            )
    rows.append(
        {"client_id": "a1" + "f" * 60, "path": "common_voice_en_999.mp3", "sentence": "Gone missing."}
    )
    rows.append(
        {"client_id": "a2" + "f" * 60, "path": "common_voice_en_998.mp3", "sentence": "", "seconds": 1.5}
    )
    return rows


def test_commonvoice_import_places_accents_and_speakers(tmp_path, speech_like):
    root = write_commonvoice(tmp_path / "cv-corpus" / "en", "test", _cv_rows(), speech_like)
    result = _import(
        open_source("commonvoice", root, SourceOptions(split="test")),
        tmp_path,
        name="cv-test",
        allow_missing=2,
    )
    sset = load_set(result.speech_set.path)
    verify_set(sset)
    assert sset.card["utterances"] == 16
    expected = {
        "a": ("us", "quiet"),
        "b": ("england", "accented"),
        "c": ("scotland", "accented"),
        "d": ("unknown", "accent-unknown"),
    }
    for utt in sset.utterances:
        client = utt.speaker.removeprefix("commonvoice:")[:2]
        assert utt.speaker == f"commonvoice:{client}{'f' * 60}"
        assert (utt.accent, utt.condition) == expected[client[0]], utt
        accent_cell, gender, age = CLIENTS[client]
        assert utt.extra.get("gender", "") == gender and utt.extra.get("age", "") == age
        assert utt.extra.get("accent_label", "") == accent_cell
        assert (
            abs(
                utt.duration_s
                - (
                    1.5
                    if utt.extra["original"].endswith(("0.mp3", "2.mp3", "4.mp3", "6.mp3", "8.mp3"))
                    else 2.0
                )
            )
            < 0.06
        )  # decoded from MP3 at 48 kHz
        assert "resampled 48000 Hz to 16000 Hz" in utt.fixes
    assert sset.card["accents"] == {"england": 4, "scotland": 2, "unknown": 4, "us": 6}
    assert sset.card["conditions"] == {"quiet": 6, "accented": 6, "accent-unknown": 4}
    reasons = _reasons(sset.card)
    assert "missing from clips/" in reasons["common_voice_en_999.mp3"]
    assert reasons["common_voice_en_998.mp3"] == "empty transcript"


def test_commonvoice_old_accent_column_and_bad_input(tmp_path, speech_like, monkeypatch):
    rows = [
        {"client_id": "x1", "path": "a.mp3", "sentence": "Alpha bravo.", "accent": "us", "seconds": 1.5},
        {
            "client_id": "x2",
            "path": "b.mp3",
            "sentence": "Charlie delta.",
            "accent": "england",
            "seconds": 1.5,
        },
        {"client_id": "x3", "path": "c.mp3", "sentence": "Echo foxtrot.", "accent": "indian", "seconds": 1.5},
    ]
    root = write_commonvoice(tmp_path / "cv", "dev", rows, speech_like, old_format=True)
    sset = _import(
        open_source("commonvoice", root, SourceOptions(split="dev")), tmp_path, name="cv-dev"
    ).speech_set
    assert sorted((u.accent, u.condition) for u in sset.utterances) == [
        ("england", "accented"),
        ("indian", "accented"),
        ("us", "quiet"),
    ]
    assert accent_name("India and South Asia (India, Pakistan, Sri Lanka)") == "indian"
    assert accent_name("Nigerian English, slight") == "nigerian-english-slight"
    with pytest.raises(WorkbenchError, match=r"no test.tsv in .*it has dev.tsv"):
        list(open_source("commonvoice", root).entries())
    monkeypatch.setattr(sf, "available_formats", lambda: {"WAV": "WAV", "FLAC": "FLAC"})  # an old libsndfile
    with pytest.raises(WorkbenchError, match="cannot read MP3.*pip install -U soundfile"):
        list(open_source("commonvoice", root, SourceOptions(split="dev")).entries())


# ---------------------------------------------------------------- conditions from a manifest, gates


def test_manifest_conditions_get_their_own_rows_and_gates(tmp_path, speech_like):
    from workbench.evaluate.accuracy import compare_accuracy
    from workbench.evaluate.gates import GateConfig, judge

    lines = []
    for i in range(12):
        condition = ("telephone", "far-field", None)[i % 3]
        path = tmp_path / "m" / f"c{i}.wav"
        path.parent.mkdir(exist_ok=True)
        sf.write(str(path), speech_like(1.5 + 0.2 * i, seed=i), 8_000 if condition == "telephone" else 16_000)
        lines.append(
            json.dumps(
                {
                    "audio": path.name,
                    "text": text_of(300 + i),
                    "speaker": f"s{i % 4}",
                    **({"condition": condition.upper()} if condition else {}),
                }
            )
        )
    manifest = tmp_path / "m" / "list.jsonl"
    manifest.write_text("\n".join(lines) + "\n")
    sset = _import(open_source("manifest", manifest), tmp_path, name="cond").speech_set
    assert sset.card["conditions"] == {"telephone": 4, "far-field": 4, "quiet": 4}
    assert set(sset.card["strata"]) == {"telephone", "far-field", "quiet"}
    # every condition, whatever its name, gets a row and a gate in sign-off
    utts = sset.utterances
    wrong_on_phone = [("ZULU " + u.text) if u.condition == "telephone" else u.text for u in utts]
    accuracy = compare_accuracy(
        utts, {"fp32": [u.text for u in utts], "int8": wrong_on_phone}, "fp32", resamples=200
    )
    verdict = {v.candidate: v for v in judge(accuracy, None, GateConfig(max_wer_delta_points=100.0))}["int8"]
    checks = {c.name: c for c in verdict.checks}
    assert {"condition telephone", "condition far-field", "condition quiet"} <= set(checks)
    assert not checks["condition telephone"].passed and checks["condition far-field"].passed
    assert not verdict.passed


# ---------------------------------------------------------------- sign-off on any pair


@pytest.fixture
def pair(tmp_path, speech_like):
    """An evaluation import (test-clean-like, derived profile, one 12.3 s clip) and a calibration import
    (train-like, the default fixed 1-8 s profile) that share speaker 26 and two texts (of speaker 40)."""
    corpus = tmp_path / "corpus"
    test_split, _ = write_librispeech(corpus, "test-clean", SPEAKERS, 1, 3, _duration, speech_like)
    train_split, _ = write_librispeech(
        corpus,
        "train-clean-100",
        ("40", "41", "26"),
        1,
        3,
        lambda i: 1.5 + 0.3 * (i % 5),
        speech_like,
        first_text=7,
    )
    root = tmp_path / "sets"
    for name, split, role, profile in (
        ("ls-test", test_split, "eval", None),
        ("ls-train", train_split, "calib", EngineProfile()),
    ):
        import_set(
            open_source("librispeech", split),
            ImportConfig(name=name, role=role, workers=1, profile=profile),
            name,
            root=root,
            progress=False,
        )
    return root, train_split


def test_overlapping_pair_is_refused_with_counts(pair, capsys):
    root, train_split = pair
    argv = [
        "signoff",
        "--eval-set",
        "ls-test",
        "--calib-set",
        "ls-train",
        "--candidate",
        "fp32=none.onnx",
        "--root",
        str(root),
    ]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(
        "error: calibration set ls-train and evaluation set ls-test share 1 speaker(s) "
        "(librispeech:26) and 2 text(s)"
    )
    assert "--disjoint-from" in err and "Traceback" not in err
    # re-importing the calibration set disjoint from the evaluation set makes the pair acceptable
    assert (
        main(
            [
                "data",
                "import",
                "--name",
                "ls-train",
                "--replace",
                "--role",
                "calib",
                "--source",
                "librispeech",
                "--path",
                str(train_split),
                "--disjoint-from",
                "ls-test",
                "--max-seconds",
                "8",
                "--allow-missing",
                "2",
                "--no-progress",
                "--root",
                str(root),
            ]
        )
        == 0
    )
    calib = load_set(root / "ls-train")
    assert calib.card["checks"]["disjoint_from"] == {
        "set": "ls-test",
        "dropped_for_speaker": 3,
        "dropped_for_text": 2,
    }
    from workbench.jobs.signoff import select_utterances

    utts, notes = select_utterances(load_set(root / "ls-test"), calib, "score")
    assert len(utts) == 9 and notes[0].startswith(
        "1 of 9 evaluation clips are outside the deployment profile 1-8 s"
    )


def test_clips_outside_the_deployment_profile_are_never_silent(pair):
    from workbench.jobs.signoff import select_utterances

    root, _ = pair
    evaluation = load_set(root / "ls-test")
    calib = _without_shared(load_set(root / "ls-train"), evaluation)
    with pytest.raises(WorkbenchError) as refused:
        select_utterances(evaluation, calib)  # default: refuse
    message = str(refused.value)
    assert "1 of 9 evaluation clips fall outside the deployment profile" in message
    assert (
        "0 shorter, 1 longer" in message
        and "--outside-profile score" in message
        and "--max-seconds 12.3" in message
    )
    kept, notes = select_utterances(evaluation, calib, "skip")
    assert len(kept) == 8 and max(u.duration_s for u in kept) < LONG and "left out" in notes[0]
    scored, notes = select_utterances(evaluation, calib, "score")
    assert len(scored) == 9 and "would not accept them" in notes[0]
    assert select_utterances(evaluation, calib, "refuse", max_s=13.0) == (list(evaluation.utterances), [])
    _, notes = select_utterances(evaluation, None)
    assert "no deployment profile known" in notes[0]


def test_signoff_report_says_what_it_did_with_outside_clips(pair, tmp_path):
    from evalkit import DEFAULT_MODEL, constant_ctc_onnx

    from workbench.jobs.signoff import SignoffInputs, run

    root, train_split = pair
    import_set(
        open_source("librispeech", train_split),
        ImportConfig(
            name="ls-train", role="calib", workers=1, profile=EngineProfile(), disjoint_from=("ls-test",)
        ),
        "train",
        root=root,
        progress=False,
    )
    evaluation, calib = load_set(root / "ls-test"), load_set(root / "ls-train")
    fp32 = constant_ctc_onnx(tmp_path / "fp32.onnx", "ALPHA")
    common = dict(
        candidates=[("fp32", fp32)],
        model=DEFAULT_MODEL,
        eval_set=evaluation,
        calib_set=calib,
        latency=None,
        threads=1,
        resamples=100,
    )
    with pytest.raises(WorkbenchError, match="outside the deployment profile"):
        run(SignoffInputs(out_dir=tmp_path / "r0", **common))
    result = run(SignoffInputs(out_dir=tmp_path / "r1", outside_profile="skip", **common))
    record, paths = result.record, result.paths
    assert record["accuracy"]["candidates"]["fp32"]["overall"]["utterances"] == 8
    assert any(
        n.startswith("1 of 9 evaluation clips outside the deployment profile 1-8 s") for n in record["notes"]
    )
    assert "were left out" in paths["markdown"].read_text()


def _without_shared(calib, evaluation):
    """The calibration set minus what it shares with ``evaluation`` (what --disjoint-from gives)."""
    speakers = {u.speaker for u in evaluation.utterances}
    texts = {u.text for u in evaluation.utterances}
    calib.utterances = [u for u in calib.utterances if u.speaker not in speakers and u.text not in texts]
    return calib


def test_bad_import_input_is_one_error_line(tmp_path, capsys, libri):
    split, _, _ = libri
    root = tmp_path / "sets"
    (tmp_path / "empty").mkdir()
    cases = [
        (["--source", "librispeech", "--path", str(tmp_path / "nope")], "does not exist"),
        (["--source", "librispeech", "--path", str(tmp_path / "empty")], "trans.txt files under"),
        (
            ["--source", "librispeech", "--path", str(split), "--noise-dir", str(tmp_path)],
            "also give --noisy-share",
        ),
        (
            ["--source", "librispeech", "--path", str(split), "--noisy-share", "1.5"],
            "takes a finite number in [0, 1]",
        ),
        (["--source", "librispeech", "--path", str(split), "--disjoint-from", "nothing"], "no speech set"),
        (["--source", "manifest"], "needs --path"),
    ]
    for extra, message in cases:
        assert main(["data", "import", "--name", "x", "--no-progress", "--root", str(root), *extra]) == 1
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1 and err.startswith("error: "), err
    assert not root.exists() or not any(p.name == "x" for p in root.iterdir())
    shutil.rmtree(root, ignore_errors=True)


# ---------------------------------------------------------------- interrupted import


def _tree(root: Path) -> dict[str, bytes]:
    """Every visible file under ``root`` (hidden temporary folders of a killed writer excluded)."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
    }


@pytest.mark.slow
@pytest.mark.parametrize("sig", ["SIGKILL", "SIGINT"])
def test_interrupted_import_leaves_existing_sets_byte_identical(tmp_path, speech_like, sig):
    import os
    import signal
    import subprocess
    import sys
    import time

    root = tmp_path / "sets"
    small, _ = write_librispeech(
        tmp_path / "small", "dev-clean", ("19", "26"), 1, 3, lambda i: 2.0, speech_like
    )
    for name in ("victim", "bystander"):  # "victim" is the set the interrupted import would replace
        import_set(
            open_source("librispeech", small),
            ImportConfig(name=name, workers=1),
            name,
            root=root,
            progress=False,
        )
    big, _ = write_librispeech(
        tmp_path / "big", "test-clean", [str(s) for s in range(100, 120)], 1, 6, lambda i: 3.0, speech_like
    )
    before = _tree(root)
    repo = Path(__file__).resolve().parent.parent
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "workbench",
            "data",
            "import",
            "--name",
            "victim",
            "--replace",
            "--source",
            "librispeech",
            "--path",
            str(big),
            "--workers",
            "2",
            "--no-progress",
            "--root",
            str(root),
        ],
        cwd=repo,
        env={**os.environ, "PYTHONPATH": str(repo)},
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        # a test run started in the background by a non-interactive shell (`pytest &`) ignores SIGINT and the
        # child would inherit that: give it the default disposition, the one a terminal's Ctrl-C meets
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 120
    written = 0
    while time.monotonic() < deadline and proc.poll() is None:
        written = len(list(root.glob(f".*{SUFFIX}/**/audio/*.flac")))  # the journal's temporary parent
        if written >= 20:
            break
        time.sleep(0.02)
    assert proc.poll() is None, f"the import finished before it could be interrupted: {proc.communicate()}"
    os.killpg(proc.pid, getattr(signal, sig))  # the CLI and its worker processes, mid-write
    _, err = proc.communicate(timeout=120)
    assert 20 <= written < 120
    assert _tree(root) == before  # both sets byte-identical, no new visible set
    verify_set(load_set(root / "victim"))
    if sig == "SIGINT":
        assert proc.returncode == 130 and b"interrupted" in err
        assert sorted(p.name for p in root.iterdir()) == [
            "bystander",
            "victim",
        ]  # the temporary folder is gone
    else:
        assert proc.returncode == -signal.SIGKILL
        leftovers = [p.name for p in root.iterdir() if p.name not in ("bystander", "victim")]
        assert all(n.startswith(".") and n.endswith(SUFFIX) for n in leftovers)  # hidden, never listed
        assert main(["data", "list", "--root", str(root)]) == 0


def test_repeated_disjoint_from_drops_what_every_set_holds(tmp_path, speech_like):
    """``--disjoint-from A --disjoint-from B`` keeps only what neither set holds (the last one alone kept more)."""
    corpus = tmp_path / "corpus"
    root = tmp_path / "sets"
    train_split, _ = write_librispeech(
        corpus, "train-clean-100", ("40", "41", "26"), 1, 2, lambda i: 2.0, speech_like
    )
    for name, split, speaker, first in (("set-a", "test-clean", "41", 50), ("set-b", "test-other", "26", 60)):
        folder, _ = write_librispeech(
            corpus, split, (speaker,), 1, 2, lambda i: 2.0, speech_like, first_text=first
        )
        import_set(
            open_source("librispeech", folder),
            ImportConfig(name=name, role="eval", workers=1, profile=EngineProfile()),
            name,
            root=root,
            progress=False,
        )
    argv = ["data", "import", "--name", "dev", "--role", "eval", "--source", "librispeech", "--path"]
    argv += [str(train_split), "--disjoint-from", "set-a", "--disjoint-from", "set-b", "--no-progress"]
    assert main(argv + ["--root", str(root)]) == 0
    dev = load_set(root / "dev")
    assert {u.speaker.split(":")[-1] for u in dev.utterances} == {"40"}
    assert dev.card["checks"]["disjoint_from"]["set"] == "set-a or set-b"
    assert dev.card["checks"]["disjoint_from"]["dropped_for_speaker"] == 4

"""Integrity, one row per class (docs/bad-input.md, "Integrity"): values outside their domain, artifacts replaced
without consent or written where they do not belong, checks made before any work, one rule for broken audio, no
tracebacks, messages that do not mislead, a set's role. Each row runs the real verb (``cli.main``) on a private copy
of real artifacts and checks the one ``error:`` line and that every file is byte-identical afterwards; the sign-off
whose transcripts are all empty runs to its end and must not pass."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import soundfile as sf
from layoutkit import write_commonvoice
from test_bad_input import Workspace, make_workspace, snapshot

from workbench.cli import main
from workbench.speech.layouts import SourceOptions, open_source


@pytest.fixture
def workspace(dash_artifacts, tmp_path, monkeypatch) -> Workspace:
    return make_workspace(dash_artifacts, tmp_path, monkeypatch)


@dataclass(frozen=True)
class Row:
    id: str
    klass: str
    plant: Callable[[Workspace], list[str]]
    expect: str


def _manifest_with(ws: Workspace, broken: bytes | None) -> list[str]:
    """A 3-utterance manifest source whose third audio file holds ``broken`` (an evaluation import of it)."""
    from conftest import _speech_like

    folder = ws.user("broken-src")
    folder.mkdir()
    rows = []
    for i, text in enumerate(["alpha bravo", "charlie delta", "echo foxtrot"]):
        path = folder / f"c{i}.wav"
        if i == 2 and broken is not None:
            path.write_bytes(broken)
        else:
            sf.write(str(path), _speech_like(1.5, seed=i), 16_000, subtype="PCM_16")
        rows.append(json.dumps({"audio": path.name, "text": text, "speaker": f"s{i}"}))
    (folder / "data.jsonl").write_text("\n".join(rows) + "\n")
    return [
        "data",
        "import",
        "--name",
        "broken",
        "--source",
        "manifest",
        "--path",
        str(folder / "data.jsonl"),
    ]


def _import_over(ws: Workspace) -> list[str]:
    """An evaluation import of a good source under the name of the existing set unit-eval."""
    argv = _manifest_with(ws, None)
    argv[argv.index("--name") + 1] = "unit-eval"
    return _with_root(ws, argv)


def _render_over(ws: Workspace) -> list[str]:
    """``report`` re-rendering a record into the folder of another sign-off (its own record there)."""
    other = ws.user("other/report.json")
    shutil.copy(ws.record, other)
    return ["report", "--record", str(ws.record), "--out", str(other.parent)]


def _with_root(ws: Workspace, argv: list[str]) -> list[str]:
    return [*argv, "--root", str(ws.sets), "--workers", "1", "--no-progress"]


def _bad_lm(ws: Workspace) -> list[str]:
    lm = ws.user("words.txt")
    lm.write_text("hello world\n")
    return ws.signoff("--decoder", "beam+lm", "--lm", str(lm))


def _eval_role_copy(ws: Workspace) -> Path:
    copy = ws.sets / "held-out"
    shutil.copytree(ws.eval, copy)
    card = json.loads((copy / "card.json").read_text())
    card.setdefault("made", {})["role"] = "eval"
    (copy / "card.json").write_text(json.dumps(card))
    return copy


ROWS = [
    # 1. values outside their domain
    Row(
        "blank-penalty-nan",
        "domain",
        lambda ws: ws.signoff("--blank-penalty", "nan"),
        "--blank-penalty: takes a finite number, got 'nan'",
    ),
    Row(
        "lm-beta-inf",
        "domain",
        lambda ws: ws.signoff("--lm-beta", "inf"),
        "--lm-beta: takes a finite number, got 'inf'",
    ),
    Row(
        "max-seconds-inf",
        "domain",
        lambda ws: ws.signoff("--max-seconds", "inf"),
        "--max-seconds: takes a finite number in (0, 86400]",
    ),
    Row(
        "batch-size-zero",
        "domain",
        lambda ws: ws.signoff("--batch-size", "0"),
        "--batch-size: takes a whole number >= 1, got '0'",
    ),
    Row(
        "lm-alpha-without-lm",
        "domain",
        lambda ws: ws.signoff("--lm-alpha", "0.7"),
        "--lm-alpha and --lm-beta weigh a language model",
    ),
    Row(
        "empty-hotword",
        "domain",
        lambda ws: ws.signoff("--decoder", "beam", "--hotword", " "),
        "--hotword takes a word, not an empty text",
    ),
    Row(
        "stride-without-chunks",
        "domain",
        lambda ws: ws.signoff("--stride-seconds", "1"),
        "--stride-seconds needs --chunk-seconds",
    ),
    Row(
        "beam-width-with-greedy",
        "domain",
        lambda ws: ws.signoff("--beam-width", "8"),
        "--beam-width sets the beam decoder's width",
    ),
    Row(
        "decoder-limit-with-one-decoder",
        "domain",
        lambda ws: ws.signoff("--decoder-limit", "3"),
        "--decoder-limit limits the further --decoder entries",
    ),
    # 2. artifacts replaced without consent
    Row(
        "import-over-an-existing-set",
        "consent",
        lambda ws: _import_over(ws),
        "already exists; pass --replace",
    ),
    Row(
        "build-over-an-existing-pair",
        "consent",
        lambda ws: ["data", "build", "--name", "unit", "--root", str(ws.sets)],
        "unit-calib, ",
    ),
    Row(
        "signoff-over-an-existing-report",
        "consent",
        lambda ws: [*ws.signoff()[:-4], "--out", str(ws.record.parent), *ws.signoff()[-2:]],
        "sign-off report",
    ),
    Row("report-into-another-report", "consent", lambda ws: _render_over(ws), "sign-off report "),
    # 3. artifacts written where they do not belong
    Row(
        "out-inside-a-set",
        "place",
        lambda ws: [*ws.signoff(), "--out", str(ws.eval / "r")],
        "lies inside the speech set folder",
    ),
    Row(
        "engines-inside-a-set",
        "place",
        lambda ws: [*ws.calibrate(), "--engines", str(ws.calib / "e")],
        "--engines",
    ),
    # 4. every check before the work
    Row(
        "search-confirm-2",
        "order",
        lambda ws: ["search", "--set", str(ws.calib), "--confirm", "2"],
        "--confirm: takes a finite number in [0, 1)",
    ),
    Row(
        "search-finer-negative",
        "order",
        lambda ws: ["search", "--set", str(ws.calib), "--finer", "-1"],
        "--finer: takes a whole number >= 0",
    ),
    Row("lm-not-a-language-model", "order", _bad_lm, "is neither an ARPA file nor a KenLM binary"),
    Row(
        "ray-empty-address",
        "order",
        lambda ws: [*ws.calibrate(), "--ray", "ray://"],
        "the address after ray:// is empty",
    ),
    # 5. one rule for broken audio
    Row(
        "eval-import-0-byte-file",
        "audio",
        lambda ws: _with_root(ws, _manifest_with(ws, b"")),
        "no readable audio",
    ),
    Row(
        "eval-import-non-audio-file",
        "audio",
        lambda ws: _with_root(ws, _manifest_with(ws, b"not audio at all\n")),
        "--allow-missing 1",
    ),
    # 6. no tracebacks
    Row(
        "stride-nan",
        "traceback",
        lambda ws: ws.signoff("--chunk-seconds", "4", "--stride-seconds", "nan"),
        "--stride-seconds: takes seconds >= 0",
    ),
    Row(
        "lm-alpha-nan-beam",
        "traceback",
        lambda ws: ws.signoff("--decoder", "beam", "--lm-alpha", "nan"),
        "--lm-alpha: takes a finite number, got 'nan'",
    ),
    # 7. messages that do not mislead
    Row(
        "tiny-chunks",
        "message",
        lambda ws: ws.signoff("--chunk-seconds", "0.001"),
        "[0.5, 86400] (seconds), got '0.001'",
    ),
    Row(
        "chunk-seconds-0",
        "message",
        lambda ws: ws.calibrate() + ["--chunk-seconds", "0"],
        "--chunk-seconds: takes a finite number in [0.5, 86400]",
    ),
    # 8. the role of a set
    Row(
        "calibrate-on-an-evaluation-set",
        "role",
        lambda ws: [*ws.calibrate()[:3], "--set", str(_eval_role_copy(ws)), *ws.calibrate()[5:]],
        "is an evaluation set",
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=[f"{r.klass}:{r.id}" for r in ROWS])
def test_integrity_row(row: Row, workspace: Workspace, capsys) -> None:
    ws = workspace
    argv = row.plant(ws)
    planted = snapshot(ws.root, ws.outside)
    capsys.readouterr()
    status = main(argv)
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert "Traceback" not in out + err
    assert status == 1 and len(lines) == 1 and lines[0].startswith("error: "), (out, err)
    assert row.expect in lines[0], lines[0]
    assert "python -m workbench lm" not in lines[0]
    assert snapshot(ws.root, ws.outside) == planted  # nothing inside or outside the workspace changed


def test_replace_swaps_an_existing_set_for_the_new_one(workspace: Workspace, capsys) -> None:
    ws = workspace
    argv = _import_over(ws)
    assert main([*argv, "--replace"]) == 0, capsys.readouterr().err
    from workbench.speech.store import load_set

    assert sorted(u.text for u in load_set(ws.sets / "unit-eval").utterances) == [
        "ALPHA BRAVO",
        "CHARLIE DELTA",
        "ECHO FOXTROT",
    ]


def test_broken_audio_accepted_with_allow_missing_is_recorded(workspace: Workspace, capsys) -> None:
    ws = workspace
    argv = _with_root(ws, _manifest_with(ws, b""))
    assert main([*argv, "--allow-missing", "1"]) == 0, capsys.readouterr().err
    from workbench.speech.store import load_set

    card = load_set(ws.sets / "broken").card
    assert card["utterances"] == 2 and card["checks"]["missing"]["count"] == 1
    assert "unreadable or corrupt audio" in card["checks"]["missing"]["items"][0]["reason"]


def test_empty_transcripts_never_pass(workspace: Workspace, capsys) -> None:
    """A blank penalty so negative that every frame decodes to the blank: both candidates write nothing, their WER
    delta is 0, and the verdict is still FAIL, saying why."""
    ws = workspace
    int8 = next(ws.run.glob("model.int8-*.onnx"))
    out = ws.root / "reports" / "empty"
    argv = [*ws.signoff("--blank-penalty=-1e6", "--candidate", f"int8={int8}")]
    argv[argv.index("--out") + 1] = str(out)
    assert main(argv) == 0, capsys.readouterr().err
    record = json.loads((out / "report.json").read_text())
    verdicts = {v["candidate"]: v for v in record["verdicts"]}
    assert not verdicts["int8"]["passed"]
    assert any("wrote no text on any of" in c["detail"] for c in verdicts["int8"]["checks"])
    assert record["decision"]["passing"] == [] and record["recommendation"] in (None, "", "fp32")


def test_a_byte_order_mark_opens_a_common_voice_table(tmp_path, speech_like) -> None:
    rows = [{"client_id": "a" * 8, "path": "a.mp3", "sentence": "hello there", "accent": "", "seconds": 1.2}]
    root = write_commonvoice(tmp_path / "cv", "test", rows, speech_like)
    table = root / "test.tsv"
    table.write_bytes(b"\xef\xbb\xbf" + table.read_bytes())
    entries = list(open_source("commonvoice", root, SourceOptions(split="test")).entries())
    assert [e.text for e in entries] == ["hello there"] and entries[0].speaker.startswith("commonvoice:aaaa")

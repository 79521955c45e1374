"""Sign-off as deployed: the inference options reach the record and the report (WER per decoder with S/D/I),
and a profile that cannot hold the chunk length is refused in one line before any model work."""

from __future__ import annotations

import json

import pytest
from evalkit import constant_ctc_onnx, write_small_set

from workbench.cli import main
from workbench.optional import has_module
from workbench.resources import demo_model_dir
from workbench.workspace import ENV_VAR

TEXTS = ["HELLO WORLD", "HELLO WORLD AGAIN", "HELLO WORLD", "GOODBYE WORLD", "HELLO WORLD", "HELLO THERE"]


@pytest.fixture
def workspace(tmp_path, speech_like, monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    (tmp_path / "engines").mkdir()
    write_small_set(tmp_path / "calib_sets", TEXTS, speech_like)
    fp32 = constant_ctc_onnx(tmp_path / "engines" / "fp32.onnx", "HELLO WORLD")
    int8 = constant_ctc_onnx(tmp_path / "engines" / "int8.onnx", "HELLO")  # a deleted word everywhere
    base = [
        "signoff",
        "--eval-set",
        "unit-eval",
        "--candidate",
        f"fp32={fp32}",
        "--candidate",
        f"int8={int8}",
    ]
    base += ["--model", str(demo_model_dir())]  # the default vocabulary the constant graphs write in
    return tmp_path, base + ["--no-latency", "--threads", "1", "--resamples", "200", "--target", "ort-cpu"]


@pytest.mark.skipif(
    not has_module("flashlight.lib.text.decoder"),
    reason="flashlight-text is not installed (setup.sh installs it)",
)
def test_decoders_and_chunking_reach_the_record_and_report(workspace, capsys) -> None:
    tmp_path, args = workspace
    out = tmp_path / "reports" / "r"
    argv = args + ["--out", str(out), "--decoder", "greedy,beam", "--beam-width", "8", "--chunk-seconds", "4"]
    assert main([*argv, "--blank-penalty", "0.5"]) == 0, capsys.readouterr().err
    record = json.loads((out / "report.json").read_text())
    assert record["inference"]["chunks"] == {"length_s": 4.0, "left_s": 4 / 6, "right_s": 4 / 6}
    assert record["inference"]["decoder"]["name"] == "greedy"
    assert record["inference"]["decoder"]["blank_penalty"] == 0.5
    assert set(record["decoders"]) == {"greedy", "beam"}
    assert record["decoders"]["beam"]["decoder"]["beam_width"] == 8
    for decoder in ("greedy", "beam"):
        int8 = record["decoders"][decoder]["candidates"]["int8"]
        # 'HELLO' for references of two or three words: deletions, no insertions
        assert int8["extra_deletions"] > 0 and int8["extra_insertions"] == 0 and int8["delta"]["estimate"] > 0
    md = (out / "report.md").read_text()
    assert "WER per decoder" in md and "| beam | int8 |" in md and "4 s chunks" in md
    assert "blank penalty 0.5" in md


@pytest.mark.skipif(
    not has_module("flashlight.lib.text.decoder"),
    reason="flashlight-text is not installed (setup.sh installs it)",
)
def test_decoder_limit_scores_the_further_decoders_on_a_spread_and_the_verdict_on_all(
    workspace, capsys
) -> None:
    """``--decoder-limit 3``: beam decodes 3 of the 6 utterances (spread over the set), the per-decoder table judges
    greedy on the same 3 and says so; the verdict's greedy WER covers all 6, as without the limit."""
    tmp_path, args = workspace
    full, limited = tmp_path / "reports" / "full", tmp_path / "reports" / "limited"
    decoders = ["--decoder", "greedy,beam", "--beam-width", "8"]
    assert main(args + ["--out", str(full), *decoders]) == 0, capsys.readouterr().err
    assert main(args + ["--out", str(limited), *decoders, "--decoder-limit", "3"]) == 0, (
        capsys.readouterr().err
    )
    a, b = (json.loads((p / "report.json").read_text()) for p in (full, limited))
    assert a["accuracy"] == b["accuracy"]  # the verdict decoder scores every utterance either way
    assert {d: (e["utterances"], e["of"]) for d, e in a["decoders"].items()} == {
        "greedy": (6, 6),
        "beam": (6, 6),
    }
    assert {d: (e["utterances"], e["of"]) for d, e in b["decoders"].items()} == {
        "greedy": (3, 6),
        "beam": (3, 6),
    }
    words = {d: e["candidates"]["fp32"]["reference_words"] for d, e in b["decoders"].items()}
    assert words["greedy"] == words["beam"] < a["decoders"]["beam"]["candidates"]["fp32"]["reference_words"]
    assert any("scored on 3 of 6 utterances" in n for n in b["notes"])
    assert "| beam (3 of 6 utt.) | int8 |" in (limited / "report.md").read_text()
    assert main(args + ["--out", str(tmp_path / "bad"), *decoders, "--decoder-limit", "0"]) == 1
    assert "argument --decoder-limit: takes a whole number >= 1" in capsys.readouterr().err


def test_profile_that_cannot_hold_the_chunk_is_refused(workspace, capsys) -> None:
    tmp_path, args = workspace
    out = tmp_path / "reports" / "refused"
    code = main(
        args + ["--out", str(out), "--chunk-seconds", "10", "--max-seconds", "5", "--min-seconds", "1"]
    )
    err = capsys.readouterr().err.strip()
    assert code == 1 and err.count("\n") == 0 and "10 s chunks do not fit the engine profile 1-5 s" in err
    assert not out.exists()


@pytest.mark.parametrize(
    "extra,match",
    [
        (["--decoder", "beam+lm"], "needs a language model"),
        (["--decoder", "greedy,viterbi"], "--decoder takes"),
        (["--stride-seconds", "1"], "needs --chunk-seconds"),
        (["--chunk-seconds", "2", "--stride-seconds", "a,b"], "--stride-seconds: takes seconds"),
    ],
)
def test_bad_inference_options_are_one_line(workspace, capsys, extra, match) -> None:
    tmp_path, args = workspace
    assert main(args + ["--out", str(tmp_path / "reports" / "x"), *extra]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and match in err

"""Sign-offs in one process share a candidate's overflow check and transcripts (``workbench.jobs.signoff_memo``): the
second sign-off of the same file on the same sets reuses them and says so in its record, gets the same accuracy,
and a changed file or another evaluation set is worked out again."""

from __future__ import annotations

import onnx

from workbench.jobs.signoff import SignoffInputs, run
from workbench.jobs.signoff_memo import SignoffMemo


def _inputs(dash, out, candidates, eval_set=None) -> SignoffInputs:
    return SignoffInputs(
        candidates=candidates,
        eval_set=eval_set or dash.eval,
        out_dir=out,
        model=dash.calibrated.model,
        calib_set=dash.calib,
        cache=dash.calibrated.cache,
        latency=None,
        threads=1,
        resamples=200,
        target="ort-cpu",
        as_given=True,
    )


def test_second_signoff_reuses_the_same_files_work_and_names_it(dash_artifacts, tmp_path) -> None:
    dash = dash_artifacts
    fp32, int8 = dash.calibrated.fp32_onnx, dash.calibrated.int8_onnx
    memo = SignoffMemo()
    first = run(_inputs(dash, tmp_path / "a", [("fp32", fp32), ("int8", int8)]), memo).record
    assert not any("reused" in n for n in first["notes"])
    proto = onnx.load(str(int8))
    proto.doc_string += " (a copy)"  # another file, same model: its hash differs, so it is worked out again
    copy = tmp_path / "int8-copy.onnx"
    onnx.save(proto, str(copy))
    second = run(_inputs(dash, tmp_path / "b", [("fp32", fp32), ("int8", copy)]), memo).record
    reused = [n for n in second["notes"] if "reused" in n]
    assert reused == [
        "fp32: overflow check reused from an earlier sign-off in this run",
        "fp32: transcripts and batch check reused from an earlier sign-off in this run",
    ]
    assert second["accuracy"]["candidates"]["fp32"] == first["accuracy"]["candidates"]["fp32"]
    plain = run(_inputs(dash, tmp_path / "c", [("fp32", fp32), ("int8", copy)])).record
    assert plain["accuracy"]["candidates"]["fp32"] == second["accuracy"]["candidates"]["fp32"]
    assert plain["accuracy"]["candidates"]["int8"] == second["accuracy"]["candidates"]["int8"]


def test_transcripts_are_keyed_by_the_set_and_serve_fewer_decoders_only(dash_artifacts, tmp_path) -> None:
    from workbench.evaluate.inference import DecoderSettings
    from workbench.evaluate.transcribe import Transcripts

    memo = SignoffMemo()
    path = dash_artifacts.calibrated.fp32_onnx
    key = memo.transcripts_key(path, "set-a", ["u1"], "model", {"batch": 1})
    beam = DecoderSettings("beam", beam_width=4)
    memo.keep_transcripts(key, Transcripts("fp32", ["A"], 0.1, {}, {"beam": ["A"]}), None, [beam])
    assert (
        memo.find_transcripts(memo.transcripts_key(path, "set-b", ["u1"], "model", {"batch": 1}), [], "x")
        is None
    )
    assert memo.find_transcripts(key, [DecoderSettings("beam", beam_width=8)], "fp32") is None
    found = memo.find_transcripts(key, [], "fp32")
    assert found is not None and found[0].by_decoder == {} and found[0].texts == ["A"]
    found = memo.find_transcripts(key, [beam], "fp32")
    assert found is not None and found[0].by_decoder == {"beam": ["A"]}


def test_transcripts_with_a_decoder_on_some_utterances_serve_only_the_same_utterances(
    dash_artifacts, tmp_path
) -> None:
    """Beam decoded on utterances 0 and 2 (``--decoder-limit``) serves a later request for beam on the same two,
    and a request for greedy alone; not beam on every utterance or on others."""
    from workbench.evaluate.inference import DecoderSettings
    from workbench.evaluate.transcribe import Transcripts

    memo = SignoffMemo()
    key = memo.transcripts_key(dash_artifacts.calibrated.fp32_onnx, "set-a", ["u1", "u2", "u3"], "model", {})
    beam = DecoderSettings("beam", beam_width=4)
    memo.keep_transcripts(
        key, Transcripts("fp32", ["A", "B", "C"], 0.1, {}, {"beam": ["A", "C"]}), None, [beam], [0, 2]
    )
    assert memo.find_transcripts(key, [beam], "fp32") is None
    assert memo.find_transcripts(key, [beam], "fp32", [0, 1]) is None
    found = memo.find_transcripts(key, [beam], "fp32", [0, 2])
    assert found is not None and found[0].by_decoder == {"beam": ["A", "C"]}
    found = memo.find_transcripts(key, [], "fp32")
    assert found is not None and found[0].texts == ["A", "B", "C"] and found[0].by_decoder == {}


def test_overflow_clips_checks_outputs_on_a_sample_says_so_and_is_kept_apart_in_the_memo(
    dash_artifacts, tmp_path
) -> None:
    """``overflow_clips=2``: the record's overflow check covers 2 calibration clips and a note says of how many;
    a later sign-off asking for every clip does not take that check from the memo."""
    from dataclasses import replace

    dash = dash_artifacts
    fp32 = dash.calibrated.fp32_onnx
    total = len(dash.calib.utterances)
    assert total > 2
    memo = SignoffMemo()
    sampled = run(replace(_inputs(dash, tmp_path / "a", [("fp32", fp32)]), overflow_clips=2), memo).record
    assert any(f"outputs on 2 of the {total} calibration clips" in n for n in sampled["notes"])
    assert any("no inf/NaN: outputs on 2 calibration clips" in n for n in sampled["notes"])
    whole = run(_inputs(dash, tmp_path / "b", [("fp32", fp32)]), memo).record
    assert not any("overflow check reused" in n for n in whole["notes"])
    assert any(f"no inf/NaN: outputs on {total} calibration clips" in n for n in whole["notes"])

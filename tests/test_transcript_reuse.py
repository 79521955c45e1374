"""Dev transcripts shared between searches (``workbench.search.transcripts``): a plan's variant is transcribed once
per clip, whichever evaluator asks (another selection rule's search, the choice on part of the dev speakers, the
check on the held-back rest), and every evaluation and search record is the one the searches make without sharing.

The model is the tiny random Wav2Vec2ForCTC with the planted outlier of ``tests.test_compare`` (INT8 in its LM head
changes its transcripts), run by ONNX Runtime; references are the FP32 model's own transcripts, as there."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import onnx
import pytest

from tests.test_compare import plant_outlier
from workbench.compare.groups import node_groups, plan_for
from workbench.compare.sensitivity import VariantRunner
from workbench.evaluate.gates import GateConfig
from workbench.evaluate.transcribe import transcribe
from workbench.jobs.prepare import prepare
from workbench.quantize.plan import PrecisionPlan
from workbench.search.confirm import split_speakers
from workbench.search.evaluator import DevEvaluator, Evaluation
from workbench.search.transcripts import TranscriptCache
from workbench.speech.records import Clip
from workbench.speech.select import all_clips

GATES = GateConfig(max_wer_delta_points=25.0, max_condition_wer_delta_points=50.0)


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory, tiny_sets):
    folder = plant_outlier(tmp_path_factory.mktemp("models") / "planted")
    prepared = prepare(folder, str(tiny_sets.calib.path), "max", root=tmp_path_factory.mktemp("engines"))
    model = onnx.load(str(prepared.fp32_onnx))
    variants = VariantRunner(model, prepared.cache.amax())
    clips = all_clips(tiny_sets.calib)
    own = transcribe(
        variants.runner(PrecisionPlan("fp32")), [c.audio for c in clips], prepared.description
    ).texts
    dev = [Clip(replace(c.utterance, text=t), c.audio) for c, t in zip(clips, own)]
    return prepared, model, variants, dev


def _plans(model: onnx.ModelProto) -> list[PrecisionPlan]:
    groups = node_groups(model)
    names = {g.name for g in groups}
    return [
        PrecisionPlan("int8", "int8"),
        plan_for("head-int8", groups, "int8", "fp16", {"lm_head"}),  # the planted layer alone in INT8
        plan_for("all-fp16", groups, "fp16", "int8", names),
    ]


def _reading(ev: Evaluation) -> dict[str, Any]:
    """What a search records of an evaluation, less its timing."""
    return {
        "passed": ev.passed,
        "reasons": ev.reasons,
        "wer": ev.wer_json(),
        "delta": ev.delta_json(),
        "judged": ev.judged,
        "utterances": ev.utterances,
        "evidence": ev.evidence,
    }


def _evaluator(prepared, variants, clips, cache=None, **kw) -> DevEvaluator:
    return DevEvaluator(
        variants,
        clips,
        GATES,
        resamples=200,
        progress=False,
        model=prepared.description,
        transcripts=cache,
        **kw,
    )


def test_a_plan_is_transcribed_once_and_reads_as_without_sharing(planted) -> None:
    prepared, model, variants, dev = planted
    plans = _plans(model)
    alone = _evaluator(prepared, variants, dev)
    expected = [_reading(alone.evaluate(p)) for p in plans]
    assert (
        len({str(r["wer"]) for r in expected}) > 1
    )  # the plans read differently: a mixed-up entry would show

    cache = TranscriptCache()
    first = _evaluator(prepared, variants, dev, cache)
    assert cache.counts() == {"reused": 0, "transcribed": len(dev), "entries": len(dev)}  # the FP32 baseline
    assert [_reading(first.evaluate(p)) for p in plans] == expected
    ran = cache.counts()["transcribed"]
    assert ran == len(dev) * (1 + len(plans))  # one evaluation of these few clips reads the whole set

    # another search of the same dev clips (another selection rule): nothing transcribed again, the same readings
    second = _evaluator(prepared, variants, dev, cache, confidence=0.95)
    again = [second.evaluate(p) for p in plans]
    assert cache.counts()["transcribed"] == ran and cache.counts()["reused"] == ran
    assert [_reading(e) for e in again] == [
        _reading(e) for e in (_evaluator(prepared, variants, dev, confidence=0.95).evaluate(p) for p in plans)
    ]
    # a plan under another name builds the same variant: its transcripts are reused too
    renamed = replace(plans[1], name="head-int8-again")
    reading, before = _reading(second.evaluate(renamed)), _reading(again[1])
    assert reading.pop("reasons") != before.pop("reasons")  # they name the plan
    assert reading == before
    assert cache.counts()["transcribed"] == ran


def test_the_held_back_check_reads_its_own_speakers_from_the_shared_transcripts(planted) -> None:
    """The confirmation's two evaluators (the choice on part of the dev speakers, the check on the held-back rest)
    judge on their own clips: sharing changes what is transcribed, never which clips a reading covers."""
    prepared, model, variants, dev = planted
    chosen, held = split_speakers(dev, 0.5)
    plans = _plans(model)
    cache = TranscriptCache()
    _evaluator(prepared, variants, dev, cache).evaluate(
        plans[0]
    )  # the whole dev set's search read INT8 first
    ran = cache.counts()["transcribed"]
    for clips in (chosen, held):
        shared = _evaluator(prepared, variants, clips, cache)
        alone = _evaluator(prepared, variants, clips)
        assert [c.utterance.id for c in shared.clips] == [c.utterance.id for c in alone.clips]
        for plan in plans:
            assert _reading(shared.evaluate(plan)) == _reading(alone.evaluate(plan))
    # FP32 and INT8 on either part came from the whole set's transcripts; only the two other plans ran, once a clip
    assert cache.counts()["transcribed"] == ran + 2 * len(dev)


def test_a_cache_needs_one_clip_batches_transcribed_here(planted) -> None:
    prepared, _, variants, dev = planted
    with pytest.raises(ValueError, match="one-clip batches"):
        _evaluator(prepared, variants, dev, TranscriptCache(), batch_size=2)


@pytest.mark.slow
def test_searches_sharing_transcripts_write_the_records_they_write_alone(
    planted, tiny_sets, tmp_path
) -> None:
    """The three selection rules' searches of one dev set, sharing one cache, against each searching alone: the same
    records (less timings and paths), and the later searches transcribe less."""
    from workbench.jobs.compare import run_compare
    from workbench.jobs.search import SearchInputs, run

    prepared, _, _, _ = planted
    ranked = run_compare(prepared, tiny_sets.calib, 1, layers=False, out=tmp_path / "rank", progress=False)
    common = {
        "sensitivity": ranked.files["sensitivity_json"],
        "model": prepared.model,
        "calib_set": str(tiny_sets.calib.path),
        "cache": prepared.cache_path,
        "method": "max",
        "per_condition": 1,
        "engines": prepared.folder.parent,
        "calib_root": tiny_sets.calib.path.parent,
        "gates": GATES,
        "resamples": 200,
        "refine": 1,
        "threads": 1,
        "progress": False,
    }
    cache = TranscriptCache()
    runs: dict[str, list[dict[str, Any]]] = {"alone": [], "shared": []}
    spent = []
    for rule in ("as-read", "shrink", "confirm"):
        for how in ("alone", "shared"):
            before = cache.counts()["transcribed"]
            data = run(
                SearchInputs(
                    **common,
                    selection=rule,
                    out=tmp_path / how / rule,
                    transcripts=cache if how == "shared" else None,
                )
            ).data
            runs[how].append(_stable(data))
            if how == "shared":
                spent.append(cache.counts()["transcribed"] - before)
    assert runs["shared"] == runs["alone"]
    assert runs["alone"][0]["found"] is not None and runs["alone"][2]["confirmation"]["tried"]
    assert spent[1] < spent[0] and cache.counts()["reused"] > 0


VOLATILE = {"mean_ms_per_utterance", "latency", "created", "plan_path", "onnx_path", "path"}


def _stable(value: Any) -> Any:
    """A record without its timings, times of day and file paths (the two runs write into other folders)."""
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value

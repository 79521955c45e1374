"""Confirmation of the found plan on held-back dev speakers (``search --confirm``): the split holds back whole
speakers per condition, the same on every run; the search chooses on the rest and keeps the best passing plan
that passes again on the held-back speakers; the record says what was tried there."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.errors import WorkbenchError
from workbench.search.confirm import split_speakers
from workbench.speech.records import Clip, Utterance


def clips(speakers_per_condition: int, per_speaker: int = 3) -> list[Clip]:
    out = []
    for condition in ("quiet", "noisy"):
        for s in range(speakers_per_condition):
            for u in range(per_speaker):
                utt = Utterance(
                    id=f"{condition}-{s}-{u}",
                    text="a b",
                    condition=condition,
                    speaker=f"spk{s}",
                    duration_s=1.0,
                    voice="espeak:en-us",
                    accent="us",
                    source="synthetic",
                )
                out.append(Clip(utt, np.zeros(16000, np.float32)))
    return out


def test_whole_speakers_are_held_back_per_condition_the_same_on_every_run() -> None:
    given = clips(6)
    chosen, held = split_speakers(given, 1 / 3)
    assert split_speakers(given, 1 / 3) == (chosen, held)
    assert len(chosen) + len(held) == len(given)
    for condition in ("quiet", "noisy"):
        held_speakers = {c.utterance.speaker for c in held if c.condition == condition}
        chosen_speakers = {c.utterance.speaker for c in chosen if c.condition == condition}
        assert len(held_speakers) == 2 and not held_speakers & chosen_speakers
    with pytest.raises(WorkbenchError, match="at least two speakers"):
        split_speakers(clips(1), 0.5)
    with pytest.raises(WorkbenchError, match="between 0 and 1"):
        split_speakers(given, 1.0)


@pytest.mark.slow
def test_the_search_confirms_its_plan_on_the_held_back_speakers(tiny_sets, tmp_path) -> None:
    from workbench.evaluate.gates import GateConfig
    from workbench.jobs.search import SearchInputs, run, summary_lines
    from workbench.model.synthetic import save_random_wav2vec2

    model = save_random_wav2vec2(tmp_path / "tiny", "tiny", seed=0)
    common = {
        "model": model,
        "calib_set": str(tiny_sets.calib.path),
        "method": "max",
        "per_condition": 1,
        "engines": tmp_path / "engines",
        "calib_root": tiny_sets.calib.path.parent,
        "resamples": 200,
        "refine": 0,
        "threads": 1,
        "progress": False,
    }
    # a random model transcribes noise: wide gates, so plans pass on both parts
    wide = GateConfig(max_wer_delta_points=100.0, max_condition_wer_delta_points=100.0)
    data = run(SearchInputs(**common, gates=wide, confirm=0.5)).data
    record = data["confirmation"]
    dev_utterances = len(tiny_sets.calib.utterances)  # the dev set defaults to the calibration set
    assert record["chosen_on_utterances"] + record["held_back_utterances"] == dev_utterances
    assert record["tried"] and record["tried"][0]["passed"] and record["found"] == record["tried"][0]["name"]
    picked = next(c for c in data["candidates"] if c["name"] == record["found"])
    assert data["found"] is not None and data["found"]["int8_macs_share"] == picked["int8_macs_share"]
    assert all(c["evidence"]["utterances"] <= record["chosen_on_utterances"] for c in data["candidates"])
    # the record states the rule and the found plan's forecast, from its held-back reading
    assert data["selection"]["rule"] == "as-read" and data["selection"]["confirm_share"] == 0.5
    forecast = data["signoff_forecast"]
    assert forecast["basis"] == "held-back" and forecast["plans_compared"] == 1
    assert 0.0 <= forecast["pass_chance"] <= forecast["pass_chance_upper"] <= 1.0
    assert any("predicted chance that the sign-off" in line for line in summary_lines(data))
    shrunk = run(SearchInputs(**common, gates=wide, selection="shrink")).data
    assert shrunk["selection"]["judged_confidence"] > 0.9 and shrunk["budget"]["confidence"] > 0.9
    assert shrunk["signoff_forecast"]["basis"] == "dev"
    assert shrunk["signoff_forecast"]["plans_compared"] == shrunk["evaluations"]
    with pytest.raises(WorkbenchError, match="do not combine"):
        run(SearchInputs(**common, gates=wide, confirm=0.5, latency_target="ort-cpu"))

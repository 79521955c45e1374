"""The chunk sweep of ``benchmarks/as_deployed.py`` (``benchmarks/chunk_sweep.py``): a recording's parts found
where the long-form builder put them, seams where chunked merging switches chunks, and one sweep row on
the demo model."""

from __future__ import annotations

import numpy as np
import pytest
from benchkit import load_benchmark
from evalkit import write_small_set

from workbench.evaluate.chunking import chunked_logits, spans_of
from workbench.evaluate.inference import ChunkSettings
from workbench.speech.longform import LongFormConfig, build_long_form

sweep = load_benchmark("chunk_sweep.py", "chunk_sweep_under_test")

TEXTS = [f"ALPHA BRAVO {i}" for i in range(36)]


@pytest.fixture
def long_form(tmp_path, speech_like):
    source = write_small_set(tmp_path, TEXTS, speech_like)
    built = build_long_form(source, tmp_path / "unit-long", LongFormConfig(min_s=6.0, max_s=14.0, seed=2))
    return source, built


def test_parts_are_where_the_builder_put_them(long_form) -> None:
    source, built = long_form
    by_id = {u.id: u for u in source.utterances}
    for rec in built.utterances:
        audio = built.audio(rec)
        parts = sweep.parts_of(rec, source, 16_000)
        assert [p.text for p in parts] == [by_id[i].text for i in rec.extra["parts"]]
        assert parts[0].low == 0 and parts[-1].high == len(audio)
        for part, gain_db, nxt in zip(parts, rec.extra["gains_db"], [*parts[1:], None]):
            original = source.audio(by_id[rec.extra["parts"][parts.index(part)]])
            expected = original * 10 ** (gain_db / 20)
            assert np.abs(audio[part.start : part.end] - expected).max() < 2e-4  # 16-bit FLAC
            if nxt is not None:  # each part's stretch ends in the middle of the pause after it
                assert part.high == nxt.low and part.end < part.high < nxt.start


def test_seams_are_where_merged_logits_switch_chunks() -> None:
    settings = ChunkSettings.of(2.0, 0.3)
    n = 16_000 * 7 + 123
    audio = np.zeros(n, dtype=np.float32)
    calls: list[int] = []

    def infer(row: np.ndarray) -> np.ndarray:  # each chunk's frames carry its number
        calls.append(len(row))
        return np.full((int(round(len(row) / 320)), 2), len(calls), dtype=np.float32)

    merged = chunked_logits(audio, settings, infer, lambda a: a, 16_000, 320)
    switches = [i * 320 for i in range(1, len(merged)) if merged[i, 0] != merged[i - 1, 0]]
    assert sweep.seams_of(n, settings, 16_000, 320) == switches
    assert len(switches) == len(spans_of(n, settings, 16_000, 320)) - 1 > 2


def test_settings_text() -> None:
    whole, default, given = sweep.parse_settings("0, 6, 8/2")
    assert whole is None and default == ChunkSettings(6.0, 1.0, 1.0) and given == ChunkSettings(8.0, 2.0, 2.0)


def test_one_sweep_row_on_the_demo_model(demo_onnx, long_form) -> None:
    from workbench.backends.onnxruntime import OnnxRuntimeRunner
    from workbench.evaluate.wer import Scoring
    from workbench.model.description import describe_model
    from workbench.resources import demo_model_dir

    source, built = long_form
    model = describe_model(demo_model_dir())
    runner = OnnxRuntimeRunner(demo_onnx)
    scoring = Scoring.for_model(model)
    runner.activate()
    try:
        whole = sweep.sweep_row(runner, model, built, source, None, scoring)
        chunked = sweep.sweep_row(runner, model, built, source, ChunkSettings.of(1.5, 0.25), scoring)
    finally:
        runner.deactivate()
    parts = sum(len(r.extra["parts"]) for r in built.utterances)
    assert whole["parts"] == chunked["parts"] == parts and whole["parts_with_a_seam"] == 0
    assert whole["wer_parts_with_a_seam"] is None and whole["stride_s"] is None
    assert 0 < chunked["parts_with_a_seam"] <= parts and chunked["stride_s"] == [0.25, 0.25]
    assert chunked["wer"] >= 0 and chunked["wer_parts_with_a_seam"] is not None

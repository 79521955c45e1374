"""Calibration as deployed: when inference chunks long audio, the statistics pass is fed the chunks (as the
deployed engine sees them), under its own cache keys and files."""

from __future__ import annotations

import numpy as np
from evalkit import write_small_set

from workbench.calibration import cache as cache_mod
from workbench.calibration.methods import MethodSpec
from workbench.evaluate.chunking import chunk_audio
from workbench.evaluate.inference import ChunkSettings
from workbench.jobs import calibrate
from workbench.model.description import describe_model
from workbench.model.synthetic import save_random_wav2vec2


def test_chunked_calibration_sees_chunks_under_its_own_keys(tmp_path, speech_like) -> None:
    model = save_random_wav2vec2(tmp_path / "model", "tiny", seed=0)
    texts = [f"HELLO NUMBER {w}" for w in ("ONE", "TWO", "THREE", "FOUR", "FIVE", "SIX")]
    sset = write_small_set(tmp_path / "sets", texts, speech_like)  # clips of 1.2 and 2.0 s
    chunks = ChunkSettings.of(1.0, 0.1)
    description = describe_model(model)
    pieces = calibrate.calibration_pieces(sset, description, chunks)
    fed = list(pieces.audio())
    assert len(fed) == len(pieces.conditions) > len(sset.utterances)
    assert max(len(a) for a in fed) == 16_000 and all(len(a) <= 16_000 for a in fed)
    first = sset.utterances[0]
    assert [len(a) for a in chunk_audio(sset.audio(first), chunks, 16_000, 320)] == [len(a) for a in fed[:2]]
    common = dict(
        model=model, calib_set=str(sset.path), method=MethodSpec("max"), engines=tmp_path / "engines"
    )
    whole = calibrate.run(calibrate.CalibrateInputs(**common, parity_clips=1))
    chunked = calibrate.run(calibrate.CalibrateInputs(**common, parity_clips=1, chunks=chunks))
    assert chunked.cache != whole.cache and "chunk1s" in chunked.cache.name and whole.cache.is_file()
    assert cache_mod.load(chunked.cache).keys["chunks"] == {"length_s": 1.0, "left_s": 0.1, "right_s": 0.1}
    assert "chunks" not in cache_mod.load(whole.cache).keys
    a, b = cache_mod.load(whole.cache).amax(), cache_mod.load(chunked.cache).amax()
    assert set(a) == set(b) and any(not np.isclose(a[t], b[t]) for t in a)  # other inputs, other ranges
    assert chunked.convergence is None or chunked.convergence.clips == len(fed)

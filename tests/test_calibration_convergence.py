"""Convergence of a calibration run (workbench/calibration/convergence.py): a stream whose range keeps
growing in one condition is "not converged: add <that condition> clips", a stationary one converges; the
checkpoint snapshot equals the statistics of the first clips; the sidecar keeps it and older sidecars read as
"not recorded"; calibrate prints it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from workbench.calibration import cache as cache_mod
from workbench.calibration import convergence as conv
from workbench.calibration.collectors import StreamingStats
from workbench.calibration.methods import METHODS, MethodSpec
from workbench.calibration.runner import ranges_from_statistics
from workbench.config import CONVERGENCE

CONDITIONS = ("quiet", "noisy", "accented")


def stream(
    clips: int, growing: str | None, seed: int = 0, checkpoint: int | None = None, samples: int = 4000
) -> tuple[StreamingStats, list[str]]:
    """Three tensors over ``clips`` clips cycling through the conditions; in condition ``growing`` the
    values of tensor ``b`` get larger with every clip of that condition (the others are stationary)."""
    rng = np.random.default_rng(seed)
    stats = StreamingStats()
    conditions = [CONDITIONS[k % 3] for k in range(clips)]
    for k, condition in enumerate(conditions):
        if k == checkpoint:
            stats.mark_checkpoint()
        scale = 1.0 + 0.08 * k if condition == growing else 1.0
        stats.update("a", rng.uniform(-1, 1, samples).astype(np.float32))
        stats.update("b", (rng.laplace(0, 0.2, samples) * scale).astype(np.float32))
        stats.update("c", rng.normal(0, 0.5, samples).astype(np.float32))
    return stats, conditions


@pytest.mark.parametrize("method", ["entropy", "max", "percentile"])
def test_a_range_that_keeps_growing_in_one_condition_asks_for_that_condition(method: str) -> None:
    clips = 48
    stats, conditions = stream(clips, "noisy", checkpoint=conv.checkpoint_for(clips))
    spec = MethodSpec(method)
    found = conv.measure(stats, ranges_from_statistics(stats, spec), spec, conditions)
    assert found is not None and found.clips == clips and found.last_clips == 12
    assert not found.converged
    assert found.verdict() == "not converged: add noisy clips"
    moving = {c.tensor: c for c in found.moving}
    assert "b" in moving and moving["b"].driver == "noisy" and moving["b"].steps > CONVERGENCE.grow_steps
    assert "a" not in moving  # the bounded uniform tensor did not move
    assert "over the last 12 of 48 clips" in found.detail() and "noisy" in found.detail()


def test_a_stationary_stream_converges() -> None:
    clips = 48
    stats, conditions = stream(clips, None, checkpoint=conv.checkpoint_for(clips), samples=20000)
    spec = MethodSpec("entropy")
    found = conv.measure(stats, ranges_from_statistics(stats, spec), spec, conditions)
    assert found is not None and found.converged, found.detail()
    assert (
        found.max_growth_steps <= CONVERGENCE.grow_steps
        and found.max_shrink_steps <= CONVERGENCE.shrink_steps
    )
    assert found.verdict() == (
        "converged: no range grew more than 2 INT8 steps or shrank more than 6 over the last 12 clips "
        f"(largest growth {max(found.max_growth_steps, 0):.1f}, shrink {max(found.max_shrink_steps, 0):.1f} steps)"
    )


def test_moves_are_judged_in_int8_steps_growth_stricter_than_shrinking() -> None:
    """Growth clips what the earlier range saw (2 steps allowed); shrinking only refines steps (6 allowed)."""
    after = {"grew1": 127.0, "grew3": 127.0, "shrank5": 127.0, "shrank9": 127.0, "same": 3.0}
    before = {"grew1": 126.0, "grew3": 124.0, "shrank5": 132.0, "shrank9": 136.0, "same": 3.0}
    tops = {name: [1.0] * 8 for name in after}
    conditions = ["quiet", "noisy"] * 4
    found = conv.assess(before, after, tops, conditions, 6, "percentile")
    steps = {c.tensor: round(c.steps, 6) for c in found.changes}
    assert steps == {"grew1": 1.0, "grew3": 3.0, "shrank5": -5.0, "shrank9": -9.0, "same": 0.0}
    assert {c.tensor for c in found.moving} == {"grew3", "shrank9"}
    calm = conv.assess({k: before[k] for k in ("grew1", "shrank5")}, after, tops, conditions, 6, "percentile")
    # a range absent at the checkpoint grew from zero: all 127 steps
    assert {c.tensor for c in calm.moving} == {"grew3", "shrank9", "same"}
    only = conv.assess(
        {"a": 126.0, "b": 132.0},
        {"a": 127.0, "b": 127.0},
        {"a": [1.0] * 8, "b": [1.0] * 8},
        conditions,
        6,
        "max",
    )
    assert only.converged and "largest growth 1.0, shrink 5.0 steps" in only.verdict()


def test_the_checkpoint_equals_the_statistics_of_the_first_clips() -> None:
    clips, checkpoint = 20, conv.checkpoint_for(20)
    full, _ = stream(clips, "accented", checkpoint=checkpoint)
    first, _ = stream(checkpoint, "accented")  # same seed: the same first clips
    assert full.checkpoint is not None and full.checkpoint_updates == checkpoint == 15
    for method in METHODS:  # every method's thresholds on the snapshot, not only the one calibrated
        spec = MethodSpec(method)
        assert ranges_from_statistics(full.checkpoint, spec) == ranges_from_statistics(first, spec), method
    for name in ("a", "b", "c"):
        kept, fresh = full.checkpoint.histogram(name), first.histogram(name)
        assert kept is not None and fresh is not None
        assert kept.range_max == fresh.range_max and np.array_equal(kept.counts, fresh.counts)
    assert full.checkpoint.maxes.amax == first.maxes.amax
    assert all(len(t) == clips for t in full.tops.values())
    assert full.tops["b"][:checkpoint] == first.tops["b"]
    assert conv.checkpoint_for(3) is None  # too few clips: not recorded


def test_the_sidecar_keeps_convergence_and_older_sidecars_read_as_not_recorded(tmp_path) -> None:
    stats, conditions = stream(24, "quiet", checkpoint=conv.checkpoint_for(24))
    spec = MethodSpec("entropy")
    amax = ranges_from_statistics(stats, spec)
    found = conv.measure(stats, amax, spec, conditions)
    cache = cache_mod.CalibrationCache.from_amax(amax, {"method": "entropy"})
    cache.convergence = found.to_json()
    path = tmp_path / "calib.cache"
    cache.save(path)
    back, note = conv.from_sidecar(cache_mod.load(path).convergence)
    assert back == found and note == "" and back.verdict() == found.verdict()
    meta = json.loads(cache_mod.sidecar(path).read_text())
    assert meta["convergence"]["verdict"] == found.verdict()
    del meta["convergence"]  # a sidecar written before convergence was recorded
    cache_mod.sidecar(path).write_text(json.dumps(meta))
    old = cache_mod.load(path)
    assert old.scales == cache.scales
    missing, note = conv.from_sidecar(old.convergence)
    assert missing is None and note.startswith("not recorded")
    older = {k: v for k, v in found.to_json().items() if k not in ("grow_steps", "shrink_steps")}
    older["tolerance"] = 0.01  # a record of the relative rule: its amax pairs are judged by today's rule
    again, note = conv.from_sidecar(older)
    assert again is not None and again.rule == conv.Rule() and again.changes == found.changes
    broken, note = conv.from_sidecar({"tensors": [{"tensor": "a"}]})
    assert broken is None and note.startswith("not readable")

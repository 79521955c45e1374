"""Atomic set writes: a build that fails midway leaves existing sets byte-identical and no
temporary folder behind; a successful rebuild replaces both sets of the pair."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import workbench.speech.store as store
from workbench.config import EngineProfile, SetBuildConfig
from workbench.errors import WorkbenchError
from workbench.speech.builder import build_external_sets
from workbench.speech.records import Clip, Utterance


def _snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _clips(speech_like, n: int = 36) -> list[Clip]:
    """Six speakers (two Scottish), each with three short and three long clips of unique text."""
    out = []
    for i in range(n):
        seconds = 1.5 if (i // 6) % 2 else 5.0
        speaker = f"spk{i % 6}"
        accent = "scottish" if i % 6 >= 4 else "us"
        record = Utterance(
            f"u{i:03d}", f"WORD NUMBER {'X' * (i + 1)}", speaker, speaker, accent, "quiet", seconds, "test"
        )
        out.append(Clip(record, speech_like(seconds, seed=i)))
    return out


@pytest.fixture
def existing(tiny_sets, tmp_path) -> Path:
    """A root holding a copy of the tiny pair (``tiny-calib``, ``tiny-eval``)."""
    root = tmp_path / "sets"
    for speech_set in (tiny_sets.calib, tiny_sets.eval):
        shutil.copytree(speech_set.path, root / speech_set.name)
    return root


@pytest.mark.parametrize("fail_at", [3, 9])  # 6 clips go to calibration: 3 fails there, 9 in evaluation
@pytest.mark.parametrize("error", [OSError, KeyboardInterrupt])
def test_failed_build_leaves_existing_sets_untouched(existing, speech_like, monkeypatch, fail_at, error):
    before = _snapshot(existing)
    real_write = store.write_flac
    calls = {"n": 0}

    def flaky_write(path, samples):
        calls["n"] += 1
        if calls["n"] == fail_at:
            raise error("disk full (simulated)")
        real_write(path, samples)

    monkeypatch.setattr(store, "write_flac", flaky_write)
    cfg = SetBuildConfig(
        name="tiny", calib_per_condition=2, eval_per_condition=2, workers=1, profile=EngineProfile()
    )
    with pytest.raises(error):
        build_external_sets(cfg, _clips(speech_like), [], "test", root=existing)
    assert calls["n"] == fail_at
    assert _snapshot(existing) == before
    assert sorted(p.name for p in existing.iterdir()) == ["tiny-calib", "tiny-eval"]


def test_successful_rebuild_replaces_both_and_leaves_no_temp(existing, speech_like):
    old_hashes = {p.name: store.load_set(p).content_hash for p in existing.iterdir()}
    cfg = SetBuildConfig(
        name="tiny", calib_per_condition=2, eval_per_condition=2, workers=1, profile=EngineProfile()
    )
    built = build_external_sets(cfg, _clips(speech_like), [], "test", root=existing)
    assert sorted(p.name for p in existing.iterdir()) == ["tiny-calib", "tiny-eval"]
    assert built.calib.content_hash != old_hashes["tiny-calib"]
    assert store.load_set(existing / "tiny-eval").content_hash == built.eval.content_hash
    store.verify_set(store.load_set(existing / "tiny-calib"))
    assert built.calib.card["checks"]["shortfall"] == {} and built.eval.card["checks"]["shortfall"] == {}
    assert built.calib.card["utterances"] == 6 and built.eval.card["utterances"] == 6
    assert (existing / "tiny-calib").stat().st_mode & 0o755 == 0o755  # not the private mode of a temp dir


def test_empty_set_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(WorkbenchError, match="no usable utterances"):
        store.write_set(tmp_path / "empty", [], {}, [], {})
    assert not list(tmp_path.iterdir())


def test_missing_and_damaged_sets_are_user_errors(tmp_path, tiny_sets):
    with pytest.raises(WorkbenchError, match="no speech set"):
        store.load_set("does-not-exist", root=tmp_path)
    damaged = tmp_path / "damaged"
    shutil.copytree(tiny_sets.calib.path, damaged)
    (damaged / "card.json").write_text("{ truncated")
    with pytest.raises(WorkbenchError, match="damaged"):
        store.load_set(damaged)

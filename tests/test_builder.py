"""Synthetic set builder: strata hold exactly the requested counts, conditions are what they say,
calibration and evaluation are disjoint by text and speaker, and builds are deterministic
(same seed -> same content hash, whatever the worker count)."""

from __future__ import annotations

import shutil

import pytest

from workbench.config import CONDITIONS, MAJORITY_ACCENT, EngineProfile, SetBuildConfig
from workbench.errors import WorkbenchError
from workbench.speech.builder import bucket_targets, build_synthetic_sets
from workbench.speech.overlap import overlap
from workbench.speech.profiles import card_profile
from workbench.speech.records import Utterance
from workbench.speech.split import partition_extra, partition_speakers
from workbench.speech.store import load_set, verify_set
from workbench.speech.text import sentence_pool, split_of


def test_strata_counts_equal_the_request(tiny_sets, tiny_config):
    for speech_set, per_condition in (
        (tiny_sets.calib, tiny_config.calib_per_condition),
        (tiny_sets.eval, tiny_config.eval_per_condition),
    ):
        expected = bucket_targets(per_condition, ["short", "long"])
        assert speech_set.card["strata"] == {c: dict(sorted(expected.items())) for c in sorted(CONDITIONS)}
        assert speech_set.card["checks"]["shortfall"] == {}
        assert speech_set.card["skipped"] == []
        assert speech_set.card["utterances"] == 3 * per_condition == len(speech_set.utterances)


def test_bucket_targets_split_odd_counts():
    assert bucket_targets(5, ["short", "long"]) == {"short": 3, "long": 2}
    assert sum(bucket_targets(100, ["a", "b", "c"]).values()) == 100


def test_utterances_match_their_stratum_and_condition(tiny_sets, tiny_config):
    ranges = tiny_config.conditions
    for speech_set in (tiny_sets.calib, tiny_sets.eval):
        profile = card_profile(speech_set.card)  # synthetic speech is made to fit the default profile
        assert profile == EngineProfile() and "fixed" in speech_set.card["profile"]["how"]
        for utt, audio in speech_set.iter_audio():
            assert abs(len(audio) / 16_000 - utt.duration_s) < 1e-3
            assert profile.bucket_of(utt.duration_s) == utt.bucket
            assert abs(utt.snr_db - utt.requested_snr_db) <= 0.5
            assert ranges.level_dbfs[0] - 0.1 <= utt.level_dbfs <= ranges.level_dbfs[1] + 0.1
            if utt.condition == "quiet":
                assert utt.snr_db >= 29.5 and utt.accent == MAJORITY_ACCENT
            elif utt.condition == "noisy":
                assert ranges.noisy_snr_db[0] - 0.5 <= utt.snr_db <= ranges.noisy_snr_db[1] + 0.5
                assert utt.noise_kind in ranges.noise_kinds and utt.accent == MAJORITY_ACCENT
            else:
                assert utt.condition == "accented" and utt.accent != MAJORITY_ACCENT
            assert utt.text and set(utt.text) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZ' ")


def test_calibration_and_evaluation_are_disjoint(tiny_sets):
    calib, evaluation = tiny_sets.calib.utterances, tiny_sets.eval.utterances
    assert not {u.text for u in calib} & {u.text for u in evaluation}
    assert not {u.speaker for u in calib} & {u.speaker for u in evaluation}
    assert tiny_sets.checks["disjoint_by_text"] and tiny_sets.checks["disjoint_by_speaker"]
    assert tiny_sets.calib.card["checks"]["paired_with"] == "tiny-eval"
    # texts come from their own hash split, never from the training split
    assert {split_of(u.text) for u in calib} == {"calib"}
    assert {split_of(u.text) for u in evaluation} == {"eval"}


def test_text_pools_are_disjoint_and_large():
    pools = sentence_pool()
    assert min(len(p) for p in pools.values()) > 1000
    assert not set(pools["train"]) & set(pools["calib"])
    assert not set(pools["train"]) & set(pools["eval"])
    assert not set(pools["calib"]) & set(pools["eval"])


def _utt(text: str, speaker: str) -> Utterance:
    return Utterance("x", text, speaker, speaker, "us", "quiet", 1.0, "t")


def test_disjointness_detects_overlap():
    report = overlap([_utt("A B", "s1"), _utt("C D", "s2")], [_utt("A B", "s3"), _utt("E F", "s2")])
    assert report["shared_texts"] == ["A B"] and report["shared_speakers"] == ["s2"]
    assert not report["disjoint_by_text"] and not report["disjoint_by_speaker"]


def test_partition_speakers():
    speakers = [f"spk{i}" for i in range(9)] + ["lonely"]
    group = {f"spk{i}": ("us" if i < 6 else "gb") for i in range(9)} | {"lonely": "scottish"}
    roles = partition_speakers(speakers, group.get)
    assert roles == partition_speakers(list(reversed(speakers)), group.get)  # order independent
    assert roles["lonely"] == "calib"
    assert sum(roles[s] == "eval" for s in speakers if group[s] == "us") == 2
    assert sum(roles[s] == "eval" for s in speakers if group[s] == "gb") == 1


def test_dev_role_takes_half_of_what_evaluation_leaves_and_never_an_evaluation_speaker():
    speakers = [f"spk{i}" for i in range(17)] + [f"gb{i}" for i in range(12)] + ["lonely"]
    group = {s: "us" if s.startswith("spk") else "gb" if s.startswith("gb") else "scottish" for s in speakers}
    plain = partition_speakers(speakers, group.get)
    roles = partition_speakers(speakers, group.get, dev=True)
    assert {s for s in speakers if roles[s] == "eval"} == {s for s in speakers if plain[s] == "eval"}
    count = {
        (g, r): sum(group[s] == g and roles[s] == r for s in speakers)
        for g in ("us", "gb")
        for r in ("calib", "eval", "dev")
    }
    assert count == {
        ("us", "calib"): 6,
        ("us", "eval"): 5,
        ("us", "dev"): 6,
        ("gb", "calib"): 4,
        ("gb", "eval"): 4,
        ("gb", "dev"): 4,
    }
    assert roles["lonely"] == "calib"  # a group of one stays in calibration


def test_extra_speakers_go_to_evaluation_and_dev_only_half_each():
    speakers = [f"us{i}" for i in range(7)] + [f"gb{i}" for i in range(4)]
    group = {s: s[:2] for s in speakers}
    roles = partition_extra(speakers, group.get)
    assert roles == partition_extra(list(reversed(speakers)), group.get)  # order independent
    assert set(roles.values()) == {"eval", "dev"}  # never calibration
    assert sum(roles[s] == "eval" for s in speakers if group[s] == "us") == 4  # half, rounded up
    assert sum(roles[s] == "eval" for s in speakers if group[s] == "gb") == 2


def test_extra_voices_leave_the_calibration_set_alone_and_give_evaluation_and_dev_more_speakers():
    """The slot jobs with and without ``extra_voices``: the calibration set's jobs are the same (same speakers,
    texts and noise, so the same bytes and cache); evaluation and dev get many more speakers per condition and
    still share none; the evaluation set's jobs do not depend on whether a dev set is built."""
    from dataclasses import replace

    from workbench.speech.builder import _slot_jobs
    from workbench.speech.tts import available_voices, extra_voices

    if not extra_voices():
        pytest.skip("espeak-ng with its voice variants is not installed (run ./setup.sh)")
    cfg = SetBuildConfig(calib_per_condition=4, eval_per_condition=4, dev_per_condition=4)
    basic, wide = _slot_jobs(cfg, available_voices()), _slot_jobs(cfg, available_voices(), extra_voices())
    assert [j for j in basic if j.slot.role == "calib"] == [j for j in wide if j.slot.role == "calib"]
    no_dev = _slot_jobs(replace(cfg, dev_per_condition=0), available_voices(), extra_voices())
    assert [j for j in no_dev if j.slot.role == "eval"] == [j for j in wide if j.slot.role == "eval"]

    def speakers(jobs, role, condition):
        return {
            v.speaker for j in jobs if j.slot.role == role and j.slot.condition == condition for v in j.voices
        }

    for condition in CONDITIONS:
        for role in ("eval", "dev"):
            assert len(speakers(wide, role, condition)) >= 2 * len(speakers(basic, role, condition))
        assert not speakers(wide, "eval", condition) & speakers(wide, "dev", condition)
        assert not speakers(wide, "calib", condition) & (
            speakers(wide, "eval", condition) | speakers(wide, "dev", condition)
        )
    extra = {v.speaker for v in extra_voices()}
    assert not extra & {v.speaker for j in wide if j.slot.role == "calib" for v in j.voices}


def test_every_extra_voice_sounds_different_from_another_variant_of_its_accent():
    """An extra speaker must be another voice: on each accent extra_voices uses, two of its variants give different
    audio (espeak-ng ignores the variant of some voice names; those accents get no extra speakers)."""
    import numpy as np

    from workbench.speech.tts import extra_voices, synthesize

    voices = extra_voices()
    if not voices:
        pytest.skip("espeak-ng with its voice variants is not installed (run ./setup.sh)")
    for name in sorted({v.name for v in voices}):
        first, second = [v for v in voices if v.name == name][:2]
        a, b = synthesize(first, "a quiet morning"), synthesize(second, "a quiet morning")
        assert len(a) != len(b) or not np.array_equal(a, b), name


def test_held_out_dev_set_shares_nothing_and_leaves_the_evaluation_set_unchanged(
    tiny_sets, tiny_config, tmp_path
):
    """The demo's dev set: no speaker or text of the calibration or evaluation set; the evaluation set is the same
    bytes as without a dev set (its speakers and texts do not move), the calibration set keeps its texts."""
    from dataclasses import replace

    built = build_synthetic_sets(replace(tiny_config, dev_per_condition=2), root=tmp_path)
    assert built.dev is not None and built.dev.name == "tiny-dev" and len(built.dev.utterances) == 6
    assert built.eval.content_hash == tiny_sets.eval.content_hash
    calib, evaluation, dev = (s.utterances for s in (built.calib, built.eval, built.dev))
    for other in (calib, evaluation):
        assert not {u.text for u in dev} & {u.text for u in other}
        assert not {u.speaker for u in dev} & {u.speaker for u in other}
    assert {split_of(u.text) for u in dev} == {"calib"}  # never the model's training texts
    assert {u.condition for u in dev} == set(CONDITIONS)
    checks = built.dev.card["checks"]
    assert checks["held_out_from"] == ["tiny-calib", "tiny-eval"] and checks["disjoint_by_speaker"]
    assert checks["calib_overlap"]["disjoint_by_text"] and checks["calib_overlap"]["disjoint_by_speaker"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny-calib", "tiny-dev", "tiny-eval"]


def test_same_seed_same_hash_any_worker_count(tiny_sets, tiny_config, tmp_path):
    assert tiny_config.workers == 2
    again = build_synthetic_sets(SetBuildConfig(**{**tiny_config.__dict__, "workers": 1}), root=tmp_path)
    assert again.calib.content_hash == tiny_sets.calib.content_hash
    assert again.eval.content_hash == tiny_sets.eval.content_hash
    other = build_synthetic_sets(
        SetBuildConfig(**{**tiny_config.__dict__, "seed": 1, "name": "seed1"}), root=tmp_path
    )
    assert other.calib.content_hash != tiny_sets.calib.content_hash


def test_verify_set_detects_tampering(tiny_sets, tmp_path):
    assert verify_set(load_set(tiny_sets.calib.path)) == tiny_sets.calib.content_hash
    copy = tmp_path / "copy"
    shutil.copytree(tiny_sets.calib.path, copy)
    flac = copy / load_set(copy).utterances[0].audio
    shutil.copy(copy / load_set(copy).utterances[1].audio, flac)
    with pytest.raises(WorkbenchError, match="changed after it was carded"):
        load_set(copy)  # every load verifies
    with pytest.raises(WorkbenchError, match="changed after it was carded"):
        verify_set(load_set(copy, verify=False))

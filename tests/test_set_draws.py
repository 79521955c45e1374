"""Numbered draws of the synthetic evaluation and dev sets (``SetBuildConfig.draw``): another draw deals the speakers
never in calibration again between evaluation and dev and draws new texts, noise and voices, while the calibration
set stays the same bytes; draw 0 is exactly the seed's own sets (the plan of every slot as before draws existed)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace

import pytest

from workbench.config import CONDITIONS, SetBuildConfig
from workbench.speech.split import partition_extra, partition_speakers, redraw_held_out

# The slot plan of SetBuildConfig(calib/eval/dev 4 per condition, seed 0) per role, fingerprinted before draws
# existed, with the voices and WordNet text pools of ./setup.sh (102 basic and 294 extra voices; 14,691 calibration
# and 14,504 evaluation texts)
SEED0_PLAN = {
    "calib": "0b9c076485622248906143a7c4b7121541bdb18359faa50a33562ed59816948d",
    "eval": "d6bf943418a8398d12ca6db075d1bec597270d9e8a7762aed9b7cd335cfc8e93",
    "dev": "2ef1c52eed00cb9c48f7b524c96c40c7ad377147ae538fc3f46111900b4f8cfc",
}


def _fingerprint(jobs) -> str:
    rows = [
        [
            j.slot.key,
            j.slot.seed,
            [v.speaker for v in j.voices],
            list(j.texts),
            [v.speaker for v in j.babble_voices],
            list(j.babble_texts),
            int(j.slot.rng().integers(2**62)),
        ]
        for j in jobs
    ]
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()


def _voices():
    from workbench.speech.tts import available_voices, extra_voices

    if not extra_voices():
        pytest.skip("espeak-ng with its voice variants is not installed (run ./setup.sh)")
    return available_voices(), extra_voices()


def _speakers(jobs, role: str) -> set[str]:
    return {v.speaker for j in jobs if j.slot.role == role for v in j.voices}


def test_a_draw_deals_only_the_movable_speakers_again_keeping_the_counts() -> None:
    speakers = [f"us{i}" for i in range(17)] + [f"gb{i}" for i in range(12)] + [f"x{i}" for i in range(10)]
    group = {s: "gb" if s.startswith("gb") else "us" for s in speakers}
    roles = partition_speakers(speakers[:29], group.get, dev=True) | partition_extra(speakers[29:], group.get)
    movable = {s for s, r in roles.items() if r == "eval"} | set(speakers[29:])
    assert redraw_held_out(roles, movable, group.get, None) == roles
    one = redraw_held_out(roles, movable, group.get, "0|draw1")
    two = redraw_held_out(roles, movable, group.get, "0|draw2")
    assert one == redraw_held_out(roles, set(reversed(sorted(movable))), group.get, "0|draw1")  # order free
    for drawn in (one, two):
        assert {s for s in speakers if drawn[s] != roles[s]} <= movable  # calibration and fixed dev stay
        for g in ("us", "gb"):
            for role in ("calib", "eval", "dev"):
                count = sum(group[s] == g and drawn[s] == role for s in speakers)
                assert count == sum(group[s] == g and roles[s] == role for s in speakers)
    assert {s for s in speakers if one[s] == "eval"} != {s for s in speakers if two[s] == "eval"}
    with pytest.raises(ValueError):
        redraw_held_out(roles, movable | {next(s for s in speakers if roles[s] == "calib")}, group.get, "d")


def test_draw_zero_is_the_plan_of_every_slot_as_before() -> None:
    from workbench.speech.builder import _slot_jobs
    from workbench.speech.text import sentence_pool

    basic, extra = _voices()
    pools = sentence_pool()
    if (len(basic), len(extra), len(pools["calib"]), len(pools["eval"])) != (102, 294, 14_691, 14_504):
        pytest.skip("the voices or WordNet texts here are not the ones the fingerprint was taken with")
    jobs = _slot_jobs(
        SetBuildConfig(calib_per_condition=4, eval_per_condition=4, dev_per_condition=4), basic, extra
    )
    assert {r: _fingerprint([j for j in jobs if j.slot.role == r]) for r in SEED0_PLAN} == SEED0_PLAN


def test_two_draws_give_new_evaluation_and_dev_speakers_and_texts_beside_the_same_calibration() -> None:
    from workbench.speech.builder import _slot_jobs

    basic, extra = _voices()
    cfg = SetBuildConfig(calib_per_condition=4, eval_per_condition=6, dev_per_condition=6)
    plans = {d: _slot_jobs(replace(cfg, draw=d), basic, extra) for d in (0, 1, 2)}
    calib = [j for j in plans[0] if j.slot.role == "calib"]
    calib_texts = {t for j in calib for t in j.texts}
    for d in (1, 2):
        assert [j for j in plans[d] if j.slot.role == "calib"] == calib  # same speakers, texts, noise draws
    for role in ("eval", "dev"):
        a, b, c = (_speakers(plans[d], role) for d in (0, 1, 2))
        assert a != b and b != c and a != c
        texts = [{t for j in plans[d] if j.slot.role == role for t in j.texts} for d in (0, 1, 2)]
        assert texts[0] != texts[1] and texts[1] != texts[2]
        rngs = [[int(j.slot.rng().integers(2**62)) for j in plans[d] if j.slot.role == role] for d in (0, 1)]
        assert rngs[0] != rngs[1]  # voice, noise and level draws
    for d in (0, 1, 2):
        held = _speakers(plans[d], "eval") | _speakers(plans[d], "dev")
        assert not held & _speakers(plans[d], "calib")
        assert not _speakers(plans[d], "eval") & _speakers(plans[d], "dev")
        dev_texts = {t for j in plans[d] if j.slot.role == "dev" for t in j.texts}
        assert not dev_texts & calib_texts  # the draw's dev texts are ones the calibration set left
        for condition in CONDITIONS:
            assert any(j.slot.condition == condition for j in plans[d] if j.slot.role == "dev")
    # a draw's evaluation set does not depend on whether a dev set is built
    no_dev = _slot_jobs(replace(cfg, draw=1, dev_per_condition=0), basic, extra)
    assert [j for j in no_dev if j.slot.role == "eval"] == [j for j in plans[1] if j.slot.role == "eval"]


def test_a_built_draw_keeps_the_calibration_bytes_and_changes_the_evaluation_set(
    tiny_sets, tiny_config, tmp_path
):
    """Synthesised for real: the calibration set of draw 1 has the same content hash as the seed's own, the
    evaluation set another one, with none of the calibration set's speakers."""
    from workbench.speech.builder import build_synthetic_sets

    _voices()
    drawn = build_synthetic_sets(replace(tiny_config, draw=1), root=tmp_path)
    assert drawn.calib.content_hash == tiny_sets.calib.content_hash
    assert drawn.eval.content_hash != tiny_sets.eval.content_hash
    evaluation = {u.speaker for u in drawn.eval.utterances}
    assert evaluation != {u.speaker for u in tiny_sets.eval.utterances}
    assert not {u.speaker for u in drawn.calib.utterances} & evaluation
    assert drawn.eval.card["made"]["config"]["draw"] == 1


def test_a_draw_of_your_own_speech_is_refused(tmp_path) -> None:
    from workbench.errors import WorkbenchError
    from workbench.speech.builder import build_external_sets

    with pytest.raises(WorkbenchError, match="synthetic speech only"):
        build_external_sets(SetBuildConfig(draw=2), [], [], "folder:x", root=tmp_path)
    assert not any(tmp_path.iterdir())


def test_a_draw_built_beside_the_stored_calibration_set_is_the_draw_built_in_full(
    tiny_sets, tiny_config, tmp_path
) -> None:
    """Synthesised for real: a draw's evaluation and dev sets built beside the seed's stored calibration set (its
    clips not synthesised again) are byte for byte the ones a full build of the draw makes; nothing is written for
    the calibration set, whose name the new sets' cards pair with."""
    from workbench.speech.builder import build_synthetic_sets

    _voices()
    cfg = replace(tiny_config, draw=1, dev_per_condition=2)
    full = build_synthetic_sets(cfg, root=tmp_path / "full")
    beside = build_synthetic_sets(cfg, root=tmp_path / "beside", calib=full.calib)
    assert beside.calib is full.calib
    assert full.dev is not None and beside.dev is not None
    assert (beside.eval.content_hash, beside.dev.content_hash) == (
        full.eval.content_hash,
        full.dev.content_hash,
    )
    assert sorted(p.name for p in (tmp_path / "beside").iterdir()) == ["tiny-dev", "tiny-eval"]
    assert beside.eval.card["checks"]["paired_with"] == full.calib.name
    assert beside.dev.card["checks"]["held_out_from"] == [full.calib.name, beside.eval.name]


def test_a_calibration_set_another_build_makes_is_not_reused(tiny_sets, tiny_config, tmp_path) -> None:
    """Another size, seed or dev split would synthesise other calibration clips (the dev split moves speakers out
    of calibration): refused before anything is synthesised or written."""
    from workbench.errors import WorkbenchError
    from workbench.speech.builder import build_synthetic_sets

    _voices()
    for other, why in (
        (replace(tiny_config, calib_per_condition=6), "calib_per_condition 4"),
        (replace(tiny_config, seed=1), "seed 0"),
        (replace(tiny_config, dev_per_condition=2), "built without a dev set"),
    ):
        with pytest.raises(WorkbenchError, match=why):
            build_synthetic_sets(replace(other, draw=1), root=tmp_path, calib=tiny_sets.calib)
    assert not any(tmp_path.iterdir())

"""Calibration/evaluation set builder: stratified by condition x duration bucket, seeded, disjoint.

Two inputs: synthetic TTS (``build_synthetic_sets``) or clips from an external source
(``build_external_sets``). Both split speakers and texts between calibration and evaluation,
check that the two sets are disjoint, and write both atomically under ``calib_sets/``. Synthetic
builds with ``dev_per_condition`` also write a held-out dev set (``<name>-dev``): speakers of neither
other set, texts of the calibration split that the calibration set does not use; the calibration and
evaluation sets' texts, and the evaluation set's speakers, are the same with or without it. ``SetBuildConfig.draw``
(synthetic speech) draws new evaluation and dev sets beside the same calibration set: speakers dealt again among
those never in calibration, new texts (dev: of the calibration split's texts the calibration set leaves), noise,
levels and voices; draw 0 is the seed's own sets.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from workbench.config import (
    CONDITIONS,
    MAJORITY_ACCENT,
    NOISY_CONDITION,
    REVERBERANT_CONDITION,
    AudioPlausibility,
    EngineProfile,
    SetBuildConfig,
)
from workbench.errors import WorkbenchError
from workbench.speech.beside import check_beside
from workbench.speech.noise_files import files_for_role
from workbench.speech.noisy import NoisePlan, clip_rng, noisy_copy
from workbench.speech.overlap import disjoint, overlap, overlap_message
from workbench.speech.profiles import outside_reason, profile_fit, profile_json, robust_profile
from workbench.speech.records import Clip, Skipped, Utterance
from workbench.speech.split import (
    DEV_ROLE,
    ROLES,
    partition_extra,
    partition_speakers,
    redraw_held_out,
    stable_hash,
)
from workbench.speech.store import SetSpec, SpeechSet, made_record, write_sets
from workbench.speech.synthetic import ATTEMPTS, Slot, SlotJob, synthesize_slot, word_range
from workbench.speech.text import sentence_pool
from workbench.speech.tts import INSTALL_HINT, Voice, extra_voices, require_voices
from workbench.speech.workers import die_with_parent
from workbench.workspace import area_path


@dataclass
class BuiltSets:
    calib: SpeechSet
    eval: SpeechSet
    checks: dict[str, Any]
    dev: SpeechSet | None = None  # the held-out dev set, when one was asked for


def bucket_targets(per_condition: int, buckets: list[str]) -> dict[str, int]:
    """Utterances per duration bucket for one condition: an even split, the remainder to the first."""
    return {
        b: per_condition // len(buckets) + (1 if i < per_condition % len(buckets) else 0)
        for i, b in enumerate(buckets)
    }


def shortfall(
    clips: list[Clip], per_condition: int, cfg: SetBuildConfig, conditions: tuple[str, ...] = CONDITIONS
) -> dict[str, str]:
    """Strata (``condition/bucket``) holding fewer utterances than requested, as ``"have of wanted"``."""
    buckets = [b for b, _, _ in _profile(cfg).buckets()]
    have: dict[tuple[str, str], int] = {}
    for clip in clips:
        key = (clip.utterance.condition, clip.utterance.bucket or "-")
        have[key] = have.get(key, 0) + 1
    out = {}
    for condition in conditions:
        for bucket, want in bucket_targets(per_condition, buckets).items():
            got = have.get((condition, bucket), 0)
            if got < want:
                out[f"{condition}/{bucket}"] = f"{got} of {want}"
    return out


def _profile(cfg: SetBuildConfig) -> EngineProfile:
    """The build's profile; synthetic speech is made to fit the default one when none is fixed."""
    return cfg.profile or EngineProfile()


def _noise_plans(cfg: SetBuildConfig) -> dict[str, NoisePlan]:
    """Per role: recorded noise (and impulse responses) of that role's share of the folders, if given; the dev
    role uses the calibration share (never the evaluation set's recordings)."""
    plans = {}
    for role in ROLES:
        noise = files_for_role(cfg.noise_dir, role, "noise") if cfg.noise_dir else ()
        rirs = files_for_role(cfg.rir_dir, role, "impulse response") if cfg.rir_dir else ()
        plans[role] = NoisePlan(cfg.conditions, noise, rirs)
    plans[DEV_ROLE] = plans["calib"]
    return plans


def _roles(cfg: SetBuildConfig) -> tuple[str, ...]:
    return (*ROLES, DEV_ROLE) if cfg.dev_per_condition > 0 else ROLES


def _per_condition(cfg: SetBuildConfig, role: str) -> int:
    return {
        "calib": cfg.calib_per_condition,
        "eval": cfg.eval_per_condition,
        DEV_ROLE: cfg.dev_per_condition,
    }[role]


def _disjoint(
    a: Sequence[Clip | Utterance],
    b: Sequence[Clip | Utterance],
    name_a: str,
    name_b: str,
    roles: tuple[str, str] = ("calibration set", "evaluation set"),
) -> dict[str, Any]:
    """The overlap check of two lists of clips (or utterances); a user error (nothing written) when they share a
    speaker or text."""
    checks = overlap(_utterances(a), _utterances(b))
    if not disjoint(checks):
        raise WorkbenchError(f"{overlap_message(checks, name_a, name_b, roles)}; nothing written")
    return checks


def _utterances(items: Sequence[Clip | Utterance]) -> list[Utterance]:
    return [c.utterance if isinstance(c, Clip) else c for c in items]


def _check_and_write(
    cfg: SetBuildConfig,
    calib: Sequence[Clip | Utterance],
    evaluation: list[Clip],
    skipped: dict[str, list[Skipped]],
    source: str,
    extra: dict[str, Any],
    root: Path | None,
    conditions: tuple[str, ...] = CONDITIONS,
    derived: bool = False,
    plans: dict[str, NoisePlan] | None = None,
    dev: list[Clip] | None = None,
    stored_calib: SpeechSet | None = None,
) -> BuiltSets:
    """Check the sets are disjoint and write them together; with ``stored_calib`` (whose clips are ``calib``'s)
    the evaluation and dev sets only, beside it."""
    names = {role: f"{cfg.name}-{role}" for role in (*ROLES, DEV_ROLE)}
    if stored_calib is not None:
        names["calib"] = stored_calib.name
    checks = _disjoint(calib, evaluation, names["calib"], names["eval"])
    roles: list[tuple[str, Sequence[Clip | Utterance], int, dict[str, Any]]] = [
        ("calib", calib, cfg.calib_per_condition, {**checks, "paired_with": names["eval"]}),
        ("eval", evaluation, cfg.eval_per_condition, {**checks, "paired_with": names["calib"]}),
    ]
    if stored_calib is not None:
        roles = roles[1:]
    if dev is not None:  # held out from both: the search selects on it, the sign-off never sees it
        with_eval = _disjoint(dev, evaluation, names[DEV_ROLE], names["eval"], ("dev set", "evaluation set"))
        with_calib = _disjoint(dev, calib, names[DEV_ROLE], names["calib"], ("dev set", "calibration set"))
        roles.append(
            (
                DEV_ROLE,
                dev,
                cfg.dev_per_condition,
                {
                    **with_eval,
                    "paired_with": names["eval"],
                    "held_out_from": [names["calib"], names["eval"]],
                    "calib_overlap": with_calib,
                },
            )
        )
    specs = []
    for role, items, per_condition, role_checks in roles:
        clips = [c for c in items if isinstance(c, Clip)]
        set_checks = {
            **role_checks,
            "requested_per_condition": per_condition,
            "shortfall": shortfall(clips, per_condition, cfg, conditions),
        }
        made_extra = {**extra, "noise": plans[role].describe()} if plans else extra
        folder = area_path("calib_sets", root) / names[role]
        specs.append(
            SetSpec(
                folder,
                clips,
                made_record(role, source, asdict(cfg), made_extra),
                skipped[role],
                set_checks,
                profile_json(_profile(cfg), derived),
            )
        )
    written = write_sets(specs)  # all replaced together, or none
    if stored_calib is not None:
        written = [stored_calib, *written]
    return BuiltSets(written[0], written[1], checks, written[2] if dev is not None else None)


# ---------------------------------------------------------------- synthetic


def _slot_jobs(
    cfg: SetBuildConfig, voices: tuple[Voice, ...], extra: tuple[Voice, ...] = ()
) -> list[SlotJob]:
    """One job per slot. ``voices`` are split over calibration, evaluation (and dev); ``extra`` voices (more
    speakers, ``tts.extra_voices``) over evaluation and dev only, so the calibration set is the same with them."""
    plans = _noise_plans(cfg)
    accent_of = {v.speaker: v.accent for v in (*voices, *extra)}
    roles = partition_speakers(
        [v.speaker for v in voices], accent_of.__getitem__, dev=cfg.dev_per_condition > 0
    )
    known = set(roles)
    extra = tuple(v for v in extra if v.speaker not in known)
    roles |= partition_extra([v.speaker for v in extra], accent_of.__getitem__)
    # another draw: the evaluation third of the basic voices and the extra voices are dealt again between evaluation
    # and dev (the basic voices' dev half is calibration without a dev set, so it stays dev: evaluation's speakers
    # do not depend on whether a dev set is built)
    draw = f"{cfg.seed}|draw{cfg.draw}" if cfg.draw else None
    movable = {s for s, r in roles.items() if r == "eval"} | {v.speaker for v in extra}
    roles = redraw_held_out(roles, movable, accent_of.__getitem__, draw)
    pools = sentence_pool()
    babble_voices = tuple(v for v in voices if v.engine == "espeak") or voices
    babble_texts = pools["train"][:: max(1, len(pools["train"]) // 500)]
    jobs: list[SlotJob] = []
    # per text split: its shuffled texts per bucket and how far they are used; the dev role continues the
    # calibration split after the calibration set's slots (disjoint texts, the calibration set unchanged)
    drawn: dict[str, tuple[dict[str, list[str]], dict[str, int]]] = {}
    for role in _roles(cfg):
        per_condition = _per_condition(cfg, role)
        role_voices = sorted(v for v in (*voices, *extra) if roles[v.speaker] == role)
        split = "calib" if role == DEV_ROLE else role
        if split not in drawn:
            texts_by_bucket: dict[str, list[str]] = {}
            # the calibration split's order is the seed's in every draw (the calibration set keeps its texts)
            rng = np.random.default_rng(
                stable_hash(f"{cfg.seed}|{split}|texts" + (f"|{draw}" if draw and split == "eval" else ""))
            )
            for bucket, _, _ in _profile(cfg).buckets():
                lo, hi = word_range(_profile(cfg), bucket)
                cands = [t for t in pools[split] if lo <= len(t.split()) <= hi]
                texts_by_bucket[bucket] = [cands[i] for i in rng.permutation(len(cands))]
            drawn[split] = (texts_by_bucket, {b: 0 for b in texts_by_bucket})
        texts_by_bucket, cursor = drawn[split]
        if role == DEV_ROLE and draw:  # the texts the calibration set left, in the draw's order
            rng = np.random.default_rng(stable_hash(f"{draw}|dev|texts"))
            left = {b: texts[cursor[b] :] for b, texts in texts_by_bucket.items()}
            texts_by_bucket = {b: [t[i] for i in rng.permutation(len(t))] for b, t in left.items()}
            cursor = {b: 0 for b in texts_by_bucket}
        buckets = [b for b, _, _ in _profile(cfg).buckets()]
        for condition in CONDITIONS:
            cond_voices = tuple(v for v in role_voices if v.is_majority_accent == (condition != "accented"))
            if not cond_voices:
                raise WorkbenchError(
                    f"no {role} voices for condition {condition} among the text-to-speech "
                    f"programs found; install the Debian packages: {INSTALL_HINT}"
                )
            for bucket, count in bucket_targets(per_condition, buckets).items():
                for index in range(count):
                    texts = texts_by_bucket[bucket][cursor[bucket] : cursor[bucket] + ATTEMPTS]
                    cursor[bucket] += ATTEMPTS
                    slot = Slot(role, condition, bucket, index, cfg.seed, 0 if role == "calib" else cfg.draw)
                    jobs.append(
                        SlotJob(
                            slot,
                            cond_voices,
                            tuple(texts),
                            babble_voices,
                            tuple(
                                babble_texts[i % len(babble_texts)]
                                for i in np.random.default_rng(stable_hash(slot.key)).integers(
                                    0, len(babble_texts), 4
                                )
                            ),
                            _profile(cfg),
                            cfg.conditions,
                            plans[role].noise_files,
                        )
                    )
    return jobs


def run_jobs(jobs: list[SlotJob], workers: int, desc: str) -> list[Clip | Skipped]:
    if workers <= 1:
        return [synthesize_slot(j) for j in tqdm(jobs, desc=desc, unit="utt")]
    with ProcessPoolExecutor(
        max_workers=workers, initializer=die_with_parent, initargs=(os.getpid(),)
    ) as pool:
        return list(
            tqdm(pool.map(synthesize_slot, jobs, chunksize=4), total=len(jobs), desc=desc, unit="utt")
        )


def build_synthetic_sets(
    cfg: SetBuildConfig, root: Path | None = None, calib: SpeechSet | None = None
) -> BuiltSets:
    """Synthesise both sets of ``cfg`` under ``root`` (default: the workspace's calib_sets/). With ``calib``, a
    stored calibration set that ``cfg`` would synthesise again (``workbench.speech.beside.check_beside``: e.g. the
    seed's own, for another ``draw``), only the evaluation (and dev) sets are synthesised and written, beside it."""
    if cfg.rir_dir:
        raise WorkbenchError(
            "--rir-dir makes reverberant copies of recorded speech: use it with --source "
            "folder/manifest/hf/librispeech/commonvoice or 'data import', not synthetic speech"
        )
    cfg = replace(cfg, profile=_profile(cfg))
    voices = require_voices()
    more = extra_voices() if cfg.extra_voices else ()
    jobs = _slot_jobs(cfg, voices, more)
    if calib is not None:
        check_beside(
            calib, asdict(cfg), [v.speaker for v in voices], [j for j in jobs if j.slot.role == "calib"]
        )
        jobs = [j for j in jobs if j.slot.role != "calib"]
    results = run_jobs(jobs, cfg.workers, f"synthesising {cfg.name}")
    split: dict[str, list[Clip]] = {r: [] for r in _roles(cfg)}
    skipped: dict[str, list[Skipped]] = {r: [] for r in _roles(cfg)}
    for job, result in zip(jobs, results):
        if isinstance(result, Clip):
            split[job.slot.role].append(result)
        else:
            skipped[job.slot.role].append(result)
    extra = {
        "voices": [v.speaker for v in voices],
        "extra_voices": [v.speaker for v in more],  # evaluation and dev speakers only
        "text_source": "WordNet (wordnet-base) glosses and examples",
    }
    plans = _noise_plans(cfg) if cfg.noise_dir else None
    return _check_and_write(
        cfg,
        split["calib"] if calib is None else calib.utterances,
        split["eval"],
        skipped,
        "synthetic",
        extra,
        root,
        plans=plans,
        dev=split.get(DEV_ROLE),
        stored_calib=calib,
    )


# ---------------------------------------------------------------- external


def build_external_sets(
    cfg: SetBuildConfig, clips: list[Clip], skipped_in: list[Skipped], source: str, root: Path | None = None
) -> BuiltSets:
    """Stratify clips from a real source. Majority-accent clean clips fill 'quiet', non-majority
    accents fill 'accented', conditions the source names (a manifest's ``condition``, e.g. telephone)
    fill their own rows, and 'noisy' gets copies of other quiet clips with noise mixed in (unless the
    source labels clips noisy itself); with ``cfg.rir_dir`` each of those also gets a reverberant copy.
    Without a fixed ``cfg.profile`` the profile is derived from the clips' durations."""
    if cfg.dev_per_condition > 0:
        raise WorkbenchError(
            "a held-out dev set is built from synthetic speech only; for your own speech import a "
            "dev set with 'python -m workbench data import --disjoint-from' and pass it as --dev-set"
        )
    if cfg.draw:
        raise WorkbenchError(
            f"a draw of the evaluation and dev sets (draw {cfg.draw}) is made from synthetic speech only; your own "
            "speech's sets are split by speaker without one"
        )
    derived = cfg.profile is None
    profile = cfg.profile
    if profile is None:
        durations = [c.utterance.duration_s for c in clips]
        factor = AudioPlausibility().profile_outlier_factor  # clips far from the median do not stretch it
        profile = robust_profile(durations, factor)[0] if clips else EngineProfile()
        cfg = replace(cfg, profile=profile)
    plans = _noise_plans(cfg)
    skipped: dict[str, list[Skipped]] = {r: list(skipped_in) if r == "calib" else [] for r in ROLES}
    usable: list[Clip] = []
    for clip in clips:
        bucket = profile.bucket_of(clip.utterance.duration_s)
        if bucket is None:
            reason = outside_reason(clip.utterance.duration_s, profile)
            skipped["calib"].append(
                Skipped(
                    clip.utterance.extra.get("original", clip.utterance.id),
                    f"{reason}; split the clip or change --min/--max-seconds",
                )
            )
            continue
        clip.utterance.bucket = bucket
        usable.append(clip)
    fit = profile_fit([c.utterance.duration_s for c in clips], profile)
    extras = tuple(
        sorted({c.utterance.condition for c in usable} - set(CONDITIONS) - {REVERBERANT_CONDITION})
    )
    conditions = CONDITIONS + extras + ((REVERBERANT_CONDITION,) if cfg.rir_dir else ())
    speakers = [c.utterance.speaker for c in usable]
    if len(set(speakers)) >= 2:
        roles = partition_speakers(
            speakers, lambda s: next(c.utterance.accent for c in usable if c.utterance.speaker == s)
        )
        role_of = lambda c: roles[c.utterance.speaker]  # noqa: E731
    else:
        from workbench.speech.text import split_of

        role_of = lambda c: "eval" if split_of(c.utterance.text) == "eval" else "calib"  # noqa: E731
    # a text spoken in both roles would break disjointness: keep it in its first role only
    first_role: dict[str, str] = {}
    by_role: dict[str, list[Clip]] = {r: [] for r in ROLES}
    for clip in usable:
        role = role_of(clip)
        if first_role.setdefault(clip.utterance.text, role) != role:
            skipped[role].append(Skipped(clip.utterance.id, "text also used in the other set"))
            continue
        by_role[role].append(clip)
    out: dict[str, list[Clip]] = {}
    for role in ROLES:
        target = cfg.calib_per_condition if role == "calib" else cfg.eval_per_condition
        out[role] = _stratify_external(
            by_role[role],
            target,
            cfg,
            extras,
            plans[role],
            np.random.default_rng(stable_hash(f"{cfg.seed}|{role}")),
        )
    extra = {"profile_fit": fit.to_json()} if fit.outside else {}
    return _check_and_write(
        cfg, out["calib"], out["eval"], skipped, source, extra, root, conditions, derived, plans
    )


def _stratify_external(
    clips: list[Clip],
    per_condition: int,
    cfg: SetBuildConfig,
    extras: tuple[str, ...],
    plan: NoisePlan,
    rng: np.random.Generator,
) -> list[Clip]:
    buckets = [b for b, _, _ in _profile(cfg).buckets()]
    targets = bucket_targets(per_condition, buckets)
    order = list(rng.permutation(len(clips)))
    chosen: list[Clip] = []
    taken: set[int] = set()

    def take(pred: Callable[[Clip], bool], wanted: dict[str, int]) -> list[Clip]:
        picked = []
        for bucket in buckets:
            n = 0
            for i in order:
                if n >= wanted[bucket]:
                    break
                if i not in taken and clips[i].utterance.bucket == bucket and pred(clips[i]):
                    taken.add(i)
                    picked.append(clips[i])
                    n += 1
        return picked

    def quiet(c: Clip) -> bool:
        return c.utterance.condition == "quiet" and c.utterance.accent == MAJORITY_ACCENT

    def labelled(condition: str) -> Callable[[Clip], bool]:
        return lambda c: c.utterance.condition == condition

    for clip in take(lambda c: c.utterance.condition in ("quiet", "accented") and not quiet(c), targets):
        clip.utterance.condition = "accented"  # a non-majority accent, whatever the source called it
        chosen.append(clip)
    for condition in extras:  # conditions the source names itself (telephone, far-field, ...)
        chosen.extend(take(labelled(condition), targets))
    labelled_noisy = take(lambda c: c.utterance.condition == NOISY_CONDITION, targets)
    chosen.extend(labelled_noisy)
    chosen.extend(take(quiet, targets))
    have_noisy = {b: sum(1 for c in labelled_noisy if c.utterance.bucket == b) for b in buckets}
    need_noisy = {b: max(0, targets[b] - have_noisy[b]) for b in buckets}
    to_mix = take(quiet, need_noisy)
    for k, clip in enumerate(to_mix):
        others = [c.audio for c in clips if c is not clip][:6]
        chosen.append(noisy_copy(clip, plan, rng, kind_index=k, others=others))
        if plan.rir_files:
            chosen.append(
                noisy_copy(
                    clip,
                    plan,
                    clip_rng(cfg.seed, clip.utterance.id, "reverberant"),
                    new_id=f"{clip.utterance.id}-rev",
                    reverberant=True,
                )
            )
    return chosen

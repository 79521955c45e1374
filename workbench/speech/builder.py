"""Calibration/evaluation set builder: stratified by condition x duration bucket, seeded, disjoint.

Two inputs: synthetic TTS (``build_synthetic_sets``) or clips from an external source
(``build_external_sets``). Both split speakers and texts between calibration and evaluation,
check that the two sets are disjoint, and write both atomically under ``calib_sets/``.
"""

from __future__ import annotations

import hashlib
import platform
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
from tqdm import tqdm

from workbench import __version__
from workbench.config import CONDITIONS, MAJORITY_ACCENT, SetBuildConfig
from workbench.errors import WorkbenchError
from workbench.speech.conditions import mix_at_snr
from workbench.speech.records import Clip, Skipped
from workbench.speech.store import SetSpec, SpeechSet, write_sets
from workbench.speech.synthetic import ATTEMPTS, Slot, SlotJob, synthesize_slot, word_range
from workbench.speech.text import sentence_pool
from workbench.speech.tts import INSTALL_HINT, Voice, require_voices
from workbench.workspace import area_path

ROLES = ("calib", "eval")


@dataclass
class BuiltSets:
    calib: SpeechSet
    eval: SpeechSet
    checks: dict[str, Any]


def _stable_hash(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def partition_speakers(speakers: list[str], group_of: Callable[[str], str]) -> dict[str, str]:
    """Assign each speaker to calib or eval: per group, a third (at least one) goes to eval.

    Groups with a single speaker stay in calibration only. Deterministic, seed independent.
    """
    groups: dict[str, list[str]] = {}
    for spk in sorted(set(speakers)):
        groups.setdefault(group_of(spk), []).append(spk)
    roles: dict[str, str] = {}
    for members in groups.values():
        ordered = sorted(members, key=_stable_hash)
        n_eval = 0 if len(ordered) < 2 else max(1, len(ordered) // 3)
        for i, spk in enumerate(ordered):
            roles[spk] = "eval" if i < n_eval else "calib"
    return roles


def bucket_targets(per_condition: int, buckets: list[str]) -> dict[str, int]:
    """Utterances per duration bucket for one condition: an even split, the remainder to the first."""
    return {b: per_condition // len(buckets) + (1 if i < per_condition % len(buckets) else 0)
            for i, b in enumerate(buckets)}


def shortfall(clips: list[Clip], per_condition: int, cfg: SetBuildConfig) -> dict[str, str]:
    """Strata (``condition/bucket``) holding fewer utterances than requested, as ``"have of wanted"``."""
    buckets = [b for b, _, _ in cfg.profile.buckets()]
    have: dict[tuple[str, str], int] = {}
    for clip in clips:
        key = (clip.utterance.condition, clip.utterance.bucket or "-")
        have[key] = have.get(key, 0) + 1
    out = {}
    for condition in CONDITIONS:
        for bucket, want in bucket_targets(per_condition, buckets).items():
            got = have.get((condition, bucket), 0)
            if got < want:
                out[f"{condition}/{bucket}"] = f"{got} of {want}"
    return out


def disjointness(calib: list[Clip], evaluation: list[Clip]) -> dict[str, Any]:
    texts = {c.utterance.text for c in calib} & {c.utterance.text for c in evaluation}
    speakers = {c.utterance.speaker for c in calib} & {c.utterance.speaker for c in evaluation}
    return {
        "shared_texts": sorted(texts)[:20],
        "shared_text_count": len(texts),
        "shared_speakers": sorted(speakers)[:20],
        "shared_speaker_count": len(speakers),
        "disjoint_by_text": not texts,
        "disjoint_by_speaker": not speakers,
    }


def _made(cfg: SetBuildConfig, role: str, source: str, extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "role": role,
        "source": source,
        "config": asdict(cfg),
        "workbench": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "command": " ".join(sys.argv),
        **extra,
    }


def _check_and_write(cfg: SetBuildConfig, calib: list[Clip], evaluation: list[Clip],
                     skipped: dict[str, list[Skipped]], source: str, extra: dict[str, Any],
                     root: Path | None) -> BuiltSets:
    checks = disjointness(calib, evaluation)
    if not (checks["disjoint_by_text"] and checks["disjoint_by_speaker"]):
        raise WorkbenchError(f"calibration and evaluation sets overlap: {checks}; nothing written")
    specs = []
    for role, clips in (("calib", calib), ("eval", evaluation)):
        per_condition = cfg.calib_per_condition if role == "calib" else cfg.eval_per_condition
        set_checks = {**checks, "paired_with": f"{cfg.name}-{'eval' if role == 'calib' else 'calib'}",
                      "requested_per_condition": per_condition,
                      "shortfall": shortfall(clips, per_condition, cfg)}
        folder = area_path("calib_sets", root) / f"{cfg.name}-{role}"
        specs.append(SetSpec(folder, clips, _made(cfg, role, source, extra),
                             skipped[role], set_checks))
    calib_set, eval_set = write_sets(specs)  # both replaced together, or neither
    return BuiltSets(calib_set, eval_set, checks)


# ---------------------------------------------------------------- synthetic


def _slot_jobs(cfg: SetBuildConfig, voices: tuple[Voice, ...]) -> list[SlotJob]:
    roles = partition_speakers([v.speaker for v in voices], lambda s: next(v.accent for v in voices if v.speaker == s))
    pools = sentence_pool()
    babble_voices = tuple(v for v in voices if v.engine == "espeak") or voices
    babble_texts = pools["train"][:: max(1, len(pools["train"]) // 500)]
    jobs: list[SlotJob] = []
    for role in ROLES:
        per_condition = cfg.calib_per_condition if role == "calib" else cfg.eval_per_condition
        role_voices = [v for v in voices if roles[v.speaker] == role]
        texts_by_bucket: dict[str, list[str]] = {}
        rng = np.random.default_rng(_stable_hash(f"{cfg.seed}|{role}|texts"))
        for bucket, _, _ in cfg.profile.buckets():
            lo, hi = word_range(cfg.profile, bucket)
            cands = [t for t in pools[role] if lo <= len(t.split()) <= hi]
            texts_by_bucket[bucket] = [cands[i] for i in rng.permutation(len(cands))]
        cursor = {b: 0 for b in texts_by_bucket}
        buckets = [b for b, _, _ in cfg.profile.buckets()]
        for condition in CONDITIONS:
            cond_voices = tuple(v for v in role_voices if v.is_majority_accent == (condition != "accented"))
            if not cond_voices:
                raise WorkbenchError(f"no {role} voices for condition {condition} among the text-to-speech "
                                     f"programs found; install the Debian packages: {INSTALL_HINT}")
            for bucket, count in bucket_targets(per_condition, buckets).items():
                for index in range(count):
                    texts = texts_by_bucket[bucket][cursor[bucket]: cursor[bucket] + ATTEMPTS]
                    cursor[bucket] += ATTEMPTS
                    slot = Slot(role, condition, bucket, index, cfg.seed)
                    jobs.append(SlotJob(slot, cond_voices, tuple(texts), babble_voices,
                                        tuple(babble_texts[i % len(babble_texts)] for i in
                                              np.random.default_rng(_stable_hash(slot.key)).integers(0, len(babble_texts), 4)),
                                        cfg.profile, cfg.conditions))
    return jobs


def run_jobs(jobs: list[SlotJob], workers: int, desc: str) -> list[Clip | Skipped]:
    if workers <= 1:
        return [synthesize_slot(j) for j in tqdm(jobs, desc=desc, unit="utt")]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(tqdm(pool.map(synthesize_slot, jobs, chunksize=4), total=len(jobs), desc=desc, unit="utt"))


def build_synthetic_sets(cfg: SetBuildConfig, root: Path | None = None) -> BuiltSets:
    """Synthesise both sets of ``cfg`` under ``root`` (default: the workspace's calib_sets/)."""
    voices = require_voices()
    jobs = _slot_jobs(cfg, voices)
    results = run_jobs(jobs, cfg.workers, f"synthesising {cfg.name}")
    split: dict[str, list[Clip]] = {r: [] for r in ROLES}
    skipped: dict[str, list[Skipped]] = {r: [] for r in ROLES}
    for job, result in zip(jobs, results):
        if isinstance(result, Clip):
            split[job.slot.role].append(result)
        else:
            skipped[job.slot.role].append(result)
    extra = {"voices": [v.speaker for v in voices], "text_source": "WordNet (wordnet-base) glosses and examples"}
    return _check_and_write(cfg, split["calib"], split["eval"], skipped, "synthetic", extra, root)


# ---------------------------------------------------------------- external


def build_external_sets(cfg: SetBuildConfig, clips: list[Clip], skipped_in: list[Skipped],
                        source: str, root: Path | None = None) -> BuiltSets:
    """Stratify clips from a real source. Majority-accent clean clips fill 'quiet', non-majority
    accents fill 'accented', and 'noisy' gets copies of other majority clips with noise mixed in
    (unless the source labels clips noisy itself)."""
    skipped: dict[str, list[Skipped]] = {r: list(skipped_in) if r == "calib" else [] for r in ROLES}
    usable: list[Clip] = []
    for clip in clips:
        bucket = cfg.profile.bucket_of(clip.utterance.duration_s)
        if bucket is None:
            where = "longer than" if clip.utterance.duration_s > cfg.profile.max_s else "shorter than"
            limit = cfg.profile.max_s if clip.utterance.duration_s > cfg.profile.max_s else cfg.profile.min_s
            skipped["calib"].append(Skipped(clip.utterance.extra.get("original", clip.utterance.id),
                                            f"{clip.utterance.duration_s:.2f} s is {where} the engine profile's "
                                            f"{limit} s; split the clip or change --min/--max-seconds"))
            continue
        clip.utterance.bucket = bucket
        usable.append(clip)
    speakers = [c.utterance.speaker for c in usable]
    if len(set(speakers)) >= 2:
        roles = partition_speakers(speakers, lambda s: next(c.utterance.accent for c in usable if c.utterance.speaker == s))
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
        out[role] = _stratify_external(by_role[role], target, cfg, np.random.default_rng(_stable_hash(f"{cfg.seed}|{role}")))
    return _check_and_write(cfg, out["calib"], out["eval"], skipped, source, {}, root)


def _stratify_external(clips: list[Clip], per_condition: int, cfg: SetBuildConfig,
                       rng: np.random.Generator) -> list[Clip]:
    buckets = [b for b, _, _ in cfg.profile.buckets()]
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

    for clip in take(lambda c: c.utterance.accent != MAJORITY_ACCENT, targets):
        clip.utterance.condition = "accented"
        chosen.append(clip)
    labelled_noisy = take(lambda c: c.utterance.condition == "noisy", targets)
    chosen.extend(labelled_noisy)
    for clip in take(lambda c: c.utterance.accent == MAJORITY_ACCENT and c.utterance.condition != "noisy", targets):
        clip.utterance.condition = "quiet"
        chosen.append(clip)
    have_noisy = {b: sum(1 for c in labelled_noisy if c.utterance.bucket == b) for b in buckets}
    need_noisy = {b: max(0, targets[b] - have_noisy[b]) for b in buckets}
    to_mix = take(lambda c: c.utterance.accent == MAJORITY_ACCENT, need_noisy)
    for k, clip in enumerate(to_mix):
        kind = cfg.conditions.noise_kinds[k % len(cfg.conditions.noise_kinds)]
        if kind == "babble":
            others = [c.audio for c in clips if c is not clip][:6]
            if not others:
                kind = "pink"
        snr = float(rng.uniform(*cfg.conditions.noisy_snr_db))
        level = float(rng.uniform(*cfg.conditions.level_dbfs))
        mix = mix_at_snr(clip.audio, snr, level, kind, rng, others if kind == "babble" else None)
        rec = clip.utterance
        rec.condition, rec.noise_kind = "noisy", kind
        rec.snr_db, rec.requested_snr_db, rec.level_dbfs = round(mix.snr_db, 3), round(snr, 3), round(mix.level_dbfs, 3)
        rec.fixes = rec.fixes + [f"{kind} noise mixed at {snr:.1f} dB SNR"]
        chosen.append(Clip(rec, mix.audio))
    return chosen

"""Whole-set import: a source stored as one evaluation-only or calibration-only set.

Every usable utterance is kept with its speaker, accent, condition and labels (``take`` keeps a
seeded sample of N instead, for calibrating on part of a large corpus). The import streams: the
source lists undecoded entries, worker processes decode, check and write one clip at a time straight
into the set's temporary folder and hand back only the record and the audio hash, so memory stays flat
whatever the corpus size; results come back in source order, so the set does not depend on the worker
count. The set gets the same card, content hash, skip reasons and atomic replacement as ``data
build``. Its engine profile is derived from its durations unless fixed; a fixed profile's misfits are
skipped, counted and the flags that would keep them named. Optional noisy (and reverberant noisy)
copies of a share of the quiet clips use the set role's half of a noise folder, and ``disjoint_from``
drops the speakers and texts of another set (the calibration set of a sign-off pair).
"""

from __future__ import annotations

import os
import signal
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from tqdm import tqdm

from workbench import journal
from workbench.config import (
    MAJORITY_ACCENT,
    AudioPlausibility,
    ConditionRanges,
    EngineProfile,
    ImportDefaults,
)
from workbench.errors import WorkbenchError
from workbench.speech import missing
from workbench.speech.entries import Entry, load_entry
from workbench.speech.noise_files import files_for_role
from workbench.speech.noisy import NoisePlan, clip_rng, noisy_copy
from workbench.speech.profiles import ProfileFit, outside_reason, profile_fit, profile_json, robust_profile
from workbench.speech.records import Skipped, Utterance
from workbench.speech.split import ROLES, stable_fraction, stable_hash
from workbench.speech.store import SpeechSet, finish_set, load_set, made_record, start_set, write_clip_audio
from workbench.speech.unlabelled import UNLABELLED, card_checks
from workbench.speech.workers import die_with_parent
from workbench.workspace import area_path

_DEFAULTS = ImportDefaults()
IMPORT_ROLES: tuple[str, ...] = (*ROLES, UNLABELLED)


@dataclass(frozen=True)
class ImportConfig:
    """What ``data import`` stores: one set ``name`` of role ``role`` from one source."""

    name: str
    role: str = _DEFAULTS.role
    profile: EngineProfile | None = None  # None: derived from the set's durations
    workers: int = _DEFAULTS.workers
    seed: int = 0
    take: int | None = None  # keep a seeded sample of this many usable utterances (None: all)
    noisy_share: float = _DEFAULTS.noisy_share
    noise_dir: Path | None = None
    rir_dir: Path | None = None
    # stored sets whose speakers and texts this set must not have (``--disjoint-from``, repeatable: all of them)
    disjoint_from: tuple[str, ...] = ()
    allow_missing: int = 0  # an evaluation set imported whole may lack this many listed inputs (``missing``)
    conditions: ConditionRanges = field(default_factory=ConditionRanges)
    skip_implausible: bool = False  # evaluation imports: skip implausible clips instead of refusing

    def __post_init__(self) -> None:
        if self.role not in IMPORT_ROLES:
            raise WorkbenchError(f"--role takes {', '.join(IMPORT_ROLES)}, not {self.role!r}")
        if self.role == UNLABELLED and (self.noisy_share > 0.0 or self.noise_dir or self.rir_dir):
            raise WorkbenchError(
                "an unlabelled set is the audio as it comes (it is checked against what the model was signed off "
                "on): drop --noisy-share/--noise-dir/--rir-dir"
            )
        if not self.name or not self.name.replace("-", "").replace("_", "").isalnum():
            raise WorkbenchError(f"set name {self.name!r} may hold only letters, digits, '-' and '_'")
        if not 0.0 <= self.noisy_share <= 1.0:
            raise WorkbenchError(f"--noisy-share is a fraction between 0 and 1, not {self.noisy_share}")
        if (self.noise_dir or self.rir_dir) and self.noisy_share == 0.0:
            raise WorkbenchError(
                "--noise-dir/--rir-dir make noisy copies of quiet clips: also give "
                "--noisy-share (e.g. 0.25 gives a quarter of the quiet clips a noisy copy)"
            )
        if self.take is not None and self.take < 1:
            raise WorkbenchError("--take must be at least 1")
        if self.workers < 1:
            raise WorkbenchError("--workers must be at least 1")
        if self.allow_missing < 0:
            raise WorkbenchError("--allow-missing must be 0 or more")


@dataclass
class ImportResult:
    speech_set: SpeechSet
    fit: ProfileFit  # how the source's clips fit the set's profile (none outside when it was derived)
    derived_profile: bool
    listed: int  # entries the source listed


@dataclass
class _Outcome:
    """What a worker hands back for one entry: stored records with their audio hashes, or a skip."""

    stored: list[tuple[Utterance, str]] = field(default_factory=list)
    skipped: Skipped | None = None
    outside_s: float | None = None  # duration of a clip the fixed profile left out
    excluded: str | None = None  # "speaker" or "text" when ``disjoint_from`` dropped it
    missing: bool = False  # the skip is a listed input whose audio or transcript is not there


@dataclass(frozen=True)
class _Context:
    folder: Path
    cfg: ImportConfig
    plan: NoisePlan
    exclude_name: str = ""
    exclude_speakers: frozenset[str] = frozenset()
    exclude_texts: frozenset[str] = frozenset()


_CONTEXT: _Context | None = None


def _init_worker(context: _Context | None) -> None:
    global _CONTEXT
    _CONTEXT = context


def _init_pool_worker(context: _Context, parent_pid: int) -> None:
    """A worker process leaves Ctrl-C to the main process, which stops the import and waits for the
    workers to finish their clip (a worker killed by it mid-task can leave the pool hanging), and ends
    when the main process ends, killed or not (``workers.die_with_parent``)."""
    die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _init_worker(context)


def _process(entry: Entry) -> _Outcome:
    """Decode, check and store one entry (and its noisy copies) in the set folder being made."""
    ctx = _CONTEXT
    assert ctx is not None, "worker context not initialised"
    cfg = ctx.cfg
    item = load_entry(entry, labelled=cfg.role != UNLABELLED)
    if isinstance(item, Skipped):
        return _Outcome(skipped=item, missing=missing.is_missing(entry) or item.unreadable)
    rec = item.utterance
    if cfg.profile is not None and (reason := outside_reason(rec.duration_s, cfg.profile)):
        return _Outcome(
            skipped=Skipped(
                entry.key,
                f"{reason}; widen --min/--max-seconds or leave them out to derive the profile from the data",
            ),
            outside_s=rec.duration_s,
        )
    if rec.speaker in ctx.exclude_speakers:
        return _Outcome(
            skipped=Skipped(entry.key, f"speaker {rec.speaker} is also in {ctx.exclude_name}"),
            excluded="speaker",
        )
    if rec.text in ctx.exclude_texts:
        return _Outcome(
            skipped=Skipped(entry.key, f"text also in {ctx.exclude_name}: {rec.text[:60]!r}"), excluded="text"
        )
    out = _Outcome(stored=[(rec, write_clip_audio(ctx.folder, item))])
    if _gets_noisy_copy(rec, cfg):
        kinds = len(ctx.plan.ranges.noise_kinds)
        noisy = noisy_copy(
            item,
            ctx.plan,
            clip_rng(cfg.seed, rec.id, "noisy"),
            new_id=f"{rec.id}-noisy",
            kind_index=stable_hash(rec.id) % kinds,
        )
        out.stored.append((noisy.utterance, write_clip_audio(ctx.folder, noisy)))
        if ctx.plan.rir_files:
            reverb = noisy_copy(
                item,
                ctx.plan,
                clip_rng(cfg.seed, rec.id, "reverberant"),
                new_id=f"{rec.id}-rev",
                reverberant=True,
            )
            out.stored.append((reverb.utterance, write_clip_audio(ctx.folder, reverb)))
    return out


def _gets_noisy_copy(rec: Utterance, cfg: ImportConfig) -> bool:
    return (
        cfg.noisy_share > 0
        and rec.condition == "quiet"
        and rec.accent == MAJORITY_ACCENT
        and stable_fraction(f"{cfg.seed}|{rec.id}|noisy-share") < cfg.noisy_share
    )


def ordered_map(
    fn: Callable[[Entry], _Outcome], items: Iterable[Entry], workers: int, window: int, context: _Context
) -> Generator[_Outcome, None, None]:
    """``fn`` over ``items`` in worker processes, results in input order, at most ``window`` in flight.

    Closing the iterator early cancels what has not started and waits for what has.
    """
    if workers <= 1:
        _init_worker(context)
        try:
            yield from (fn(item) for item in items)
        finally:
            _init_worker(None)
        return
    pool = ProcessPoolExecutor(
        max_workers=workers, initializer=_init_pool_worker, initargs=(context, os.getpid())
    )
    pending: deque[Future] = deque()
    try:
        for item in items:
            pending.append(pool.submit(fn, item))
            if len(pending) >= window:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _plan(cfg: ImportConfig) -> NoisePlan:
    noise = files_for_role(cfg.noise_dir, cfg.role, "noise") if cfg.noise_dir else ()
    rirs = files_for_role(cfg.rir_dir, cfg.role, "impulse response") if cfg.rir_dir else ()
    ranges = cfg.conditions
    if not noise:  # generated noise, clip by clip: babble needs other clips, which a worker does not hold
        kinds = tuple(k for k in ranges.noise_kinds if k != "babble") or ("pink",)
        ranges = replace(ranges, noise_kinds=kinds)
    return NoisePlan(ranges, noise, rirs)


def _context(folder: Path, cfg: ImportConfig, root: Path) -> _Context:
    if not cfg.disjoint_from:
        return _Context(folder, cfg, _plan(cfg))
    others = [load_set(name, root) for name in cfg.disjoint_from]
    return _Context(
        folder,
        cfg,
        _plan(cfg),
        " or ".join(other.name for other in others),
        frozenset(u.speaker for other in others for u in other.utterances),
        frozenset(u.text for other in others for u in other.utterances),
    )


def _ordered_entries(
    entries: Iterator[Entry], cfg: ImportConfig, light: bool
) -> tuple[Iterable[Entry], int | None]:
    """The entries in the order they are processed, and how many there are when known."""
    if not light:  # entries that carry their audio (a Hugging Face dataset): stream them in source order
        return entries, None
    listed = list(entries)
    if cfg.take is not None:  # a seeded sample: hash order spreads it over speakers and chapters
        listed.sort(key=lambda e: stable_hash(f"{cfg.seed}|{e.source}|{e.key}"))
    return listed, len(listed)


def import_set(
    source, cfg: ImportConfig, source_label: str, root: Path | None = None, progress: bool = True
) -> ImportResult:
    """Store ``source`` (any ``EntrySource``) as set ``root/cfg.name`` (default root: the workspace's
    calib_sets/); an existing set of that name is replaced only when the new one is complete."""
    root = area_path("calib_sets", root)
    final = root / cfg.name
    for name in cfg.disjoint_from:
        if load_set(name, root).path.resolve() == final.resolve():
            raise WorkbenchError(f"--disjoint-from {name} names the set being imported")
    entries, total = _ordered_entries(source.entries(), cfg, getattr(source, "light_entries", True))
    whole = missing.must_be_whole(cfg.role, cfg.take)
    if whole and isinstance(entries, list):  # listed up front: refuse before decoding anything
        absent = [Skipped(e.where or e.key, missing.reason_of(e)) for e in entries if missing.is_missing(e)]
        missing.refuse_if_incomplete(cfg.name, absent, len(entries), cfg.allow_missing)
    lacking: list[Skipped] = []
    window = cfg.workers * _DEFAULTS.in_flight_per_worker
    stored: list[tuple[Utterance, str]] = []
    skipped: list[Skipped] = []
    outside: list[float] = []
    excluded = {"speaker": 0, "text": 0}
    seen: set[str] = set()
    listed = kept = 0
    with journal.one_folder(final) as tmp:
        start_set(tmp)
        context = _context(tmp, cfg, root)
        bar = tqdm(total=total, desc=f"importing {cfg.name}", unit="utt", disable=not progress)
        results = ordered_map(_process, entries, cfg.workers, window, context)
        try:
            for outcome in results:
                listed += 1
                bar.update(1)
                if outcome.skipped is not None:
                    skipped.append(outcome.skipped)
                    if outcome.missing:
                        lacking.append(outcome.skipped)
                    if outcome.outside_s is not None:
                        outside.append(outcome.outside_s)
                    if outcome.excluded:
                        excluded[outcome.excluded] += 1
                    continue
                if outcome.stored[0][0].id in seen:
                    skipped.append(
                        Skipped(outcome.stored[0][0].extra.get("original", ""), "listed twice; kept once")
                    )
                    continue
                seen.add(outcome.stored[0][0].id)
                stored.extend(outcome.stored)
                kept += 1
                if cfg.take is not None and kept >= cfg.take:
                    break
        finally:
            results.close()
            bar.close()
        if whole:
            missing.refuse_if_incomplete(cfg.name, lacking, listed, cfg.allow_missing)
        implausible = [s for s in skipped if s.implausible]
        if implausible and cfg.role in ("eval", UNLABELLED) and not cfg.skip_implausible:
            raise WorkbenchError(_implausible_refusal(implausible, cfg.name, cfg.role))
        if not stored:
            raise WorkbenchError(
                f"no usable utterances for {cfg.name}; nothing written ({len(skipped)} inputs "
                f"skipped, e.g. {skipped[0].item}: {skipped[0].reason})"
                if skipped
                else f"the source listed no utterances for {cfg.name}; nothing written"
            )
        _remove_unlisted_audio(tmp, {rec.audio for rec, _ in stored})
        derived = cfg.profile is None
        clean = [rec.duration_s for rec, _ in stored]
        far: list[int] = []
        if cfg.profile is None:
            profile, far = robust_profile(clean, _PLAUSIBLE.profile_outlier_factor)
        else:
            profile = cfg.profile
        for rec, _ in stored:
            rec.bucket = profile.bucket_of(rec.duration_s)
        far_set = set(far)
        fitted = [d for i, d in enumerate(clean) if i not in far_set]
        fit = profile_fit(fitted + outside, profile)
        checks: dict[str, Any] = {
            "role": cfg.role,
            "whole_source": cfg.take is None,
            "profile_fit": fit.to_json(),
            "missing": missing.card_record(lacking, listed, cfg.allow_missing if whole else None),
        }
        if cfg.role == UNLABELLED:
            checks.update(card_checks([rec for rec, _ in stored]))
        if implausible:
            checks["implausible"] = [{"item": s.item, "reason": s.reason} for s in implausible]
        if far:
            checks["profile_outliers"] = _outliers_json([stored[i][0] for i in far])
        if cfg.take is not None:
            checks["take"] = {"requested": cfg.take, "kept": kept}
        if cfg.disjoint_from:
            checks["disjoint_from"] = {
                "set": context.exclude_name,
                "dropped_for_speaker": excluded["speaker"],
                "dropped_for_text": excluded["text"],
            }
        made = made_record(
            cfg.role, source_label, asdict(cfg), {"import": True, "noise": context.plan.describe()}
        )
        utts = [rec for rec, _ in stored]
        card = finish_set(
            tmp, cfg.name, utts, [h for _, h in stored], made, skipped, checks, profile_json(profile, derived)
        )
    return ImportResult(SpeechSet(final, card, utts), fit, derived, listed)


_PLAUSIBLE = AudioPlausibility()
SHOWN = 5  # implausible files named in a refusal


def _implausible_refusal(implausible: list[Skipped], name: str, role: str = "eval") -> str:
    """One line: which files of an evaluation (or unlabelled) import are no plausible utterance, and what to do."""
    named = "; ".join(f"{s.item}: {s.reason}" for s in implausible[:SHOWN])
    more = f"; and {len(implausible) - SHOWN} more" if len(implausible) > SHOWN else ""
    return (
        f"{len(implausible)} file(s) of {'evaluation' if role == 'eval' else role} set {name} are no plausible utterance ({named}{more}); "
        "nothing written: fix or remove them, or pass --skip-implausible to leave them out (the card lists them)"
    )


def _outliers_json(recs: list[Utterance]) -> dict[str, Any]:
    factor = _PLAUSIBLE.profile_outlier_factor
    return {
        "rule": f"further than {factor:g}x from the median duration: kept in the set, not in the derived profile",
        "count": len(recs),
        "clips": [
            {"id": r.id, "item": str(r.extra.get("original", "")), "duration_s": r.duration_s}
            for r in recs[:200]
        ],
    }


def _remove_unlisted_audio(folder: Path, kept: set[str]) -> None:
    """Delete audio written by workers for entries past a ``take`` (they finished after the stop)."""
    for path in (folder / "audio").iterdir():
        if f"audio/{path.name}" not in kept:
            path.unlink()

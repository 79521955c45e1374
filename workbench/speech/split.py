"""Deterministic role assignment: stable hashes, and a third of each group's members to evaluation.

Used for speakers (per accent) and for noise and impulse-response files (per kind), so that the
calibration and evaluation sets never share a speaker or a recording, on every machine and seed.
With ``dev=True`` half of the members left after evaluation's third form a held-out dev role (the
search's dev set: neither the data that set the INT8 ranges nor the data that signs off); evaluation's
members are the same with or without it. ``partition_extra`` splits extra speakers (``tts.extra_voices``)
between evaluation and dev only, the same way whether a dev set is built or not. ``redraw_held_out`` gives a numbered
draw of the evaluation and dev speakers among those never in calibration (draw 0: the assignment as it is), so
independent draws of the evaluation and dev sets keep the calibration set's speakers, and so its bytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

ROLES: tuple[str, ...] = ("calib", "eval")
DEV_ROLE = "dev"


def stable_hash(text: str) -> int:
    """A 64-bit hash of ``text`` that does not change between runs or machines."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def stable_fraction(text: str) -> float:
    """``stable_hash`` mapped to [0, 1): for deterministic 'one in N' choices."""
    return stable_hash(text) / 2.0**64


def _groups_in_hash_order(speakers: list[str], group_of: Callable[[str], str]) -> list[list[str]]:
    """The distinct speakers grouped by ``group_of``, each group in ``stable_hash`` order (groups in the order
    their first speaker takes in sorted order)."""
    groups: dict[str, list[str]] = {}
    for spk in sorted(set(speakers)):
        groups.setdefault(group_of(spk), []).append(spk)
    return [sorted(members, key=stable_hash) for members in groups.values()]


def partition_speakers(
    speakers: list[str], group_of: Callable[[str], str], dev: bool = False
) -> dict[str, str]:
    """Assign each member to calib or eval: per group, a third (at least one) goes to eval.

    Groups with a single member stay in calibration only. Deterministic, seed independent. ``dev``: of the
    members not in eval, the last half in hash order (rounded down, so calibration keeps at least as many)
    go to ``DEV_ROLE``; eval's members do not change.
    """
    roles: dict[str, str] = {}
    for ordered in _groups_in_hash_order(speakers, group_of):
        n_eval = 0 if len(ordered) < 2 else max(1, len(ordered) // 3)
        n_dev = (len(ordered) - n_eval) // 2 if dev else 0
        for i, spk in enumerate(ordered):
            roles[spk] = "eval" if i < n_eval else DEV_ROLE if i >= len(ordered) - n_dev else "calib"
    return roles


def partition_extra(speakers: list[str], group_of: Callable[[str], str]) -> dict[str, str]:
    """Assign extra speakers to eval or ``DEV_ROLE``, never calib: per group, the first half in hash order (rounded
    up) to eval, the rest to dev. Deterministic, seed independent, and the same whether a dev set is built or not,
    so an evaluation set's speakers do not depend on it."""
    roles: dict[str, str] = {}
    for ordered in _groups_in_hash_order(speakers, group_of):
        n_eval = (len(ordered) + 1) // 2
        for i, spk in enumerate(ordered):
            roles[spk] = "eval" if i < n_eval else DEV_ROLE
    return roles


def redraw_held_out(
    roles: dict[str, str], movable: set[str], group_of: Callable[[str], str], draw: str | None
) -> dict[str, str]:
    """Draw ``draw`` of the evaluation and dev speakers: ``roles`` itself when ``draw`` is None; else, per group, the
    ``movable`` speakers (never calib ones) in the order of ``stable_hash(draw|speaker)``, the first as many as
    ``roles`` gave evaluation to eval and the rest to ``DEV_ROLE``. Speakers not in ``movable`` keep their roles,
    so the calibration speakers (and the counts per group and role) are the same in every draw."""
    if draw is None:
        return dict(roles)
    if any(roles[s] == "calib" for s in movable):
        raise ValueError("a calibration speaker cannot move between draws")
    out = dict(roles)
    for ordered in _groups_in_hash_order(sorted(movable), group_of):
        n_eval = sum(roles[s] == "eval" for s in ordered)
        for i, spk in enumerate(sorted(ordered, key=lambda s: stable_hash(f"{draw}|{s}"))):
            out[spk] = "eval" if i < n_eval else DEV_ROLE
    return out

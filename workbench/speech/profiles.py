"""Engine profiles that follow the data, and how a set's clips fit a profile.

A set made from real recordings takes its profile (min/opt/max seconds) from its own durations
(shortest, median, longest; ``robust_profile`` leaves out clips far from the median, which are listed
instead) unless the user fixes one. ``profile_fit`` counts the clips a fixed
profile leaves out and says what to pass to keep them; ``select_in_profile`` is what sign-off does with
evaluation clips outside the deployment profile: refuse (the default), score them and say so, or
leave them out and say so. Never silently.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from workbench.config import EngineProfile
from workbench.errors import WorkbenchError
from workbench.speech.records import Utterance


def derive_profile(durations: Sequence[float]) -> EngineProfile:
    """min = shortest, opt = median, max = longest (to 0.01 s, rounded outwards so all fit)."""
    values = sorted(float(d) for d in durations if d > 0)
    if not values:
        raise WorkbenchError("no clips with a positive duration to derive the engine profile from")
    lo = max(0.01, math.floor(values[0] * 100) / 100)
    hi = math.ceil(values[-1] * 100) / 100
    opt = min(max(round(statistics.median(values), 2), lo), hi)
    return EngineProfile(lo, opt, hi)


def robust_profile(durations: Sequence[float], factor: float) -> tuple[EngineProfile, list[int]]:
    """``derive_profile`` over the clips within ``factor`` of the median duration (either way), and the indices
    of the clips beyond it (outliers: listed, never allowed to stretch the profile)."""
    values = [float(d) for d in durations]
    positive = [d for d in values if d > 0]
    if not positive:
        raise WorkbenchError("no clips with a positive duration to derive the engine profile from")
    median = statistics.median(positive)
    lo, hi = median / factor, median * factor
    outliers = [i for i, d in enumerate(values) if not lo <= d <= hi]
    kept = [d for i, d in enumerate(values) if lo <= d <= hi]
    return derive_profile(kept), outliers


def fixed_profile(min_s: float | None, opt_s: float | None, max_s: float | None) -> EngineProfile | None:
    """The profile the user fixed with any of --min/--opt/--max-seconds (the others from the defaults,
    opt kept between min and max); None when none was given (derive it from the data)."""
    if min_s is None and opt_s is None and max_s is None:
        return None
    default = EngineProfile()
    lo = default.min_s if min_s is None else min_s
    hi = max(default.max_s, lo) if max_s is None else max_s
    opt = opt_s if opt_s is not None else min(max(default.opt_s, lo), hi)
    try:
        return EngineProfile(lo, opt, hi)
    except ValueError as exc:
        raise WorkbenchError(str(exc)) from exc


def profile_json(profile: EngineProfile, derived: bool) -> dict[str, Any]:
    """The card's record of a set's profile."""
    how = (
        "derived from the set's durations (shortest, median, longest)"
        if derived
        else "fixed (the default, or --min/--opt/--max-seconds)"
    )
    return {**asdict(profile), "how": how}


def card_profile(card: dict[str, Any]) -> EngineProfile | None:
    """The profile a set's card records; for sets built before cards recorded it, the build's configured
    profile; None when neither is there."""
    stored = card.get("profile")
    if not isinstance(stored, dict):
        stored = (card.get("made") or {}).get("config", {}).get("profile")
    if not isinstance(stored, dict):
        return None
    return EngineProfile(float(stored["min_s"]), float(stored["opt_s"]), float(stored["max_s"]))


def outside_reason(duration_s: float, profile: EngineProfile) -> str | None:
    """Why a clip of this duration does not fit ``profile`` (None when it fits)."""
    if profile.bucket_of(duration_s) is not None:
        return None
    if duration_s > profile.max_s:
        return f"{duration_s:.2f} s is longer than the engine profile's {profile.max_s} s"
    return f"{duration_s:.2f} s is shorter than the engine profile's {profile.min_s} s"


@dataclass(frozen=True)
class ProfileFit:
    """How many clips fall outside a profile, and the flags that would take them in."""

    profile: EngineProfile
    total: int
    shorter: int
    longer: int
    shortest_s: float | None
    longest_s: float | None

    @property
    def outside(self) -> int:
        return self.shorter + self.longer

    def flags(self) -> str:
        """``--min-seconds X --max-seconds Y``: the smallest change of the profile that fits every clip."""
        parts = []
        if self.shorter and self.shortest_s is not None:
            parts.append(f"--min-seconds {math.floor(self.shortest_s * 100) / 100:g}")
        if self.longer and self.longest_s is not None:
            parts.append(f"--max-seconds {math.ceil(self.longest_s * 100) / 100:g}")
        return " ".join(parts)

    def summary(self) -> str:
        """``12 of 2620 clips are outside the profile 1-8 s (3 shorter, 9 longer, up to 34.96 s)``."""
        p = self.profile
        return (
            f"{self.outside} of {self.total} clips are outside the profile {p.min_s:g}-{p.max_s:g} s "
            f"({self.shorter} shorter, {self.longer} longer; clips run "
            f"{self.shortest_s or 0:.2f}-{self.longest_s or 0:.2f} s)"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "profile": asdict(self.profile),
            "total": self.total,
            "outside": self.outside,
            "shorter": self.shorter,
            "longer": self.longer,
            "shortest_s": self.shortest_s,
            "longest_s": self.longest_s,
            "to_keep_them_pass": self.flags() or None,
        }


def profile_fit(durations: Sequence[float], profile: EngineProfile) -> ProfileFit:
    values = [float(d) for d in durations]
    shorter = sum(1 for d in values if d < profile.min_s)
    longer = sum(1 for d in values if d > profile.max_s)
    return ProfileFit(
        profile, len(values), shorter, longer, min(values, default=None), max(values, default=None)
    )


def deployment_profile(
    calib_card: dict[str, Any] | None,
    calib_durations: Sequence[float] | None,
    min_s: float | None = None,
    max_s: float | None = None,
) -> tuple[EngineProfile | None, str]:
    """The profile the deployed engine accepts, and where it comes from.

    Explicit seconds win; else the calibration set's recorded profile; else its durations (what
    ``build --calib-set`` gives the engine); None when there is nothing to go on.
    """
    base, origin = None, ""
    if calib_card is not None:
        base = card_profile(calib_card)
        origin = "the calibration set's profile"
        if base is None and calib_durations:
            base, origin = derive_profile(calib_durations), "the calibration set's durations"
    if min_s is None and max_s is None:
        return base, origin
    lo = min_s if min_s is not None else (base.min_s if base else 0.01)
    hi = max_s if max_s is not None else (base.max_s if base else math.inf)
    try:
        return EngineProfile(lo, min(max(base.opt_s if base else lo, lo), hi), hi), "--min/--max-seconds"
    except ValueError as exc:
        raise WorkbenchError(str(exc)) from exc


def select_in_profile(
    utts: Sequence[Utterance],
    profile: EngineProfile | None,
    policy: str,
    origin: str,
    what: str = "evaluation clips",
) -> tuple[list[Utterance], list[str]]:
    """Apply the outside-profile ``policy`` (refuse, score, skip) to evaluation utterances (``what`` names them).

    Returns the utterances to score and the notes the report must carry.
    """
    utts = list(utts)
    if profile is None:
        return utts, [
            "no deployment profile known (no calibration set, no --min/--max-seconds): every "
            f"one of the {what} was scored whatever its length"
        ]
    fit = profile_fit([u.duration_s for u in utts], profile)
    if not fit.outside:
        return utts, []
    where = f"the deployment profile {profile.min_s:g}-{profile.max_s:g} s (from {origin})"
    if policy == "refuse":
        raise WorkbenchError(
            f"{fit.outside} of {fit.total} {what} fall outside {where}: {fit.shorter} shorter, "
            f"{fit.longer} longer (clips run {fit.shortest_s:.2f}-{fit.longest_s:.2f} s); an engine built for "
            "that profile would not accept them. Pass --outside-profile score to score them anyway (the report "
            "says so), --outside-profile skip to leave them out, or widen the profile "
            f"({fit.flags()} when building the calibration set and the engine)."
        )
    if policy == "skip":
        kept = [u for u in utts if profile.bucket_of(u.duration_s) is not None]
        return kept, [
            f"{fit.outside} of {fit.total} {what} outside {where} were left out "
            f"({fit.shorter} shorter, {fit.longer} longer); {len(kept)} scored"
        ]
    if policy == "score":
        return utts, [
            f"{fit.outside} of {fit.total} {what} are outside {where} ({fit.shorter} "
            f"shorter, {fit.longer} longer) and were scored anyway: the deployed engine would not "
            "accept them as built"
        ]
    raise WorkbenchError(f"--outside-profile takes refuse, score or skip, not {policy!r}")

"""Convergence of a calibration run: had the ranges stopped moving before the set ran out?

Estimate (one point of a running estimate, no second pass): during the one pass the streaming
statistics are kept once, after the first ``n - n // 4`` clips (``StreamingStats.mark_checkpoint``:
the running maxima and the finished histograms, once per run, nothing per clip). After the pass
the chosen method's amax is computed from that snapshot and from the final statistics, and each tensor's
move over the last quarter of the clips is measured in what the quantized model sees: INT8 steps at the
final range (``steps = (final - checkpoint) / (final / 127)``).

The two directions move the quantized model differently. A range that *grew* by g steps means the last
clips reached values the earlier clips' range would clip by up to g steps: a set that stopped earlier
misses them, so more clips (or the condition driving them) would still change the model. A range that
*shrank* by s steps (a histogram method's threshold falls as more of the bulk arrives) only makes the steps
finer by s/127: the rounding SQNR changes by 20 log10(127 / (127 - s)) dB (0.42 dB for 6 steps). So a tensor
still moves when it grew by more than ``CONVERGENCE.grow_steps`` (2) or shrank by more than
``CONVERGENCE.shrink_steps`` (6). The two were chosen with the demo's data (docs/calibration.md gives the
readings and the command): the demo's 300 clips read converged (largest growth 1.0 step, largest shrink 4.6)
while balanced sets of 16 and 64 clips (growth 5.7 and 8.1 steps) and sets of one condition only (quiet:
growth 4.1; noisy: growth 3.5; accented: shrink 6.4) read not converged. Cost on top of the pass: one snapshot of the statistics and a second threshold search per tensor
(on the snapshot).

Which speech condition drives a moving tensor: the statistics also keep each clip's max |x| per tensor
(one float per clip and tensor, a by-product of the counting pass). For a range that grew, the driver
is the condition whose last-quarter clips reach furthest relative to the checkpoint's amax (largest
mean of clip max / checkpoint amax); for one that shrank, the condition with the smallest mean. The
verdict names the condition that drives most moving tensors: ``not converged: add <condition> clips``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from workbench.calibration.collectors import StreamingStats
from workbench.calibration.methods import MethodSpec
from workbench.calibration.runner import PhaseClock, ranges_from_statistics
from workbench.config import CONVERGENCE

#: INT8 levels on each side of zero (symmetric quantization): a range of amax has steps of amax / 127.
LEVELS = 127


@dataclass(frozen=True)
class TensorChange:
    """One tensor's amax at the checkpoint and at the end, and the condition that moved it (if it moved)."""

    tensor: str
    before: float
    after: float
    driver: str | None = None

    @property
    def change(self) -> float:
        """Signed relative change ``(after - before) / after`` (1.0 when the range appeared from zero)."""
        if self.after == self.before:
            return 0.0
        return (self.after - self.before) / self.after if self.after else -1.0

    @property
    def steps(self) -> float:
        """The signed change in INT8 steps of the final range (``after / 127``): + grew, - shrank."""
        return self.change * LEVELS


@dataclass(frozen=True)
class Rule:
    """When a tensor still moves: it grew by more than ``grow_steps`` or shrank by more than ``shrink_steps``."""

    grow_steps: float = CONVERGENCE.grow_steps
    shrink_steps: float = CONVERGENCE.shrink_steps

    def moving(self, change: TensorChange) -> bool:
        return change.steps > self.grow_steps or -change.steps > self.shrink_steps

    def describe(self) -> str:
        return f"grew more than {self.grow_steps:g} INT8 steps or shrank more than {self.shrink_steps:g}"


@dataclass(frozen=True)
class Convergence:
    """How far each tensor's range moved over the last ``last_clips`` of ``clips`` clips."""

    clips: int
    last_clips: int
    method: str
    rule: Rule
    changes: tuple[TensorChange, ...]  # largest |change| first

    @property
    def moving(self) -> list[TensorChange]:
        return [c for c in self.changes if self.rule.moving(c)]

    @property
    def max_change(self) -> float:
        return max((abs(c.change) for c in self.changes), default=0.0)

    @property
    def max_growth_steps(self) -> float:
        return max((c.steps for c in self.changes), default=0.0)

    @property
    def max_shrink_steps(self) -> float:
        return max((-c.steps for c in self.changes), default=0.0)

    @property
    def converged(self) -> bool:
        return not self.moving

    def driver(self) -> str | None:
        """The condition that drives most moving tensors (ties: the larger summed change)."""
        counts = Counter(c.driver for c in self.moving if c.driver)
        if not counts:
            return None
        weight: dict[str, float] = {}
        for c in self.moving:
            if c.driver:
                weight[c.driver] = weight.get(c.driver, 0.0) + abs(c.change)
        return max(counts, key=lambda d: (counts[d], weight[d]))

    def largest(self) -> str:
        return f"largest growth {max(self.max_growth_steps, 0.0):.1f}, shrink {max(self.max_shrink_steps, 0.0):.1f} steps"

    def verdict(self) -> str:
        """One line: ``converged: ... over the last 75 clips (largest growth 1.0, shrink 4.6 steps)`` /
        ``not converged: add noisy clips``."""
        if self.converged:
            return (
                f"converged: no range {self.rule.describe()} over the last {self.last_clips} clips "
                f"({self.largest()})"
            )
        driver = self.driver()
        return f"not converged: add {driver + ' ' if driver else 'more '}clips"

    def detail(self) -> str:
        moving = self.moving
        by = Counter(c.driver or "?" for c in moving)
        drivers = ", ".join(f"{d} {k}" for d, k in by.most_common())
        return (
            f"{len(moving)} of {len(self.changes)} tensors {self.rule.describe()} over the last "
            f"{self.last_clips} of {self.clips} clips ({self.largest()}; driven by: {drivers})"
        )

    def lines(self, shown: int = CONVERGENCE.shown) -> list[str]:
        out = [f"convergence: {self.verdict()}"]
        if not self.converged:
            out.append(f"  {self.detail()}")
            out += [
                f"  {c.tensor}: {c.before:.4g} -> {c.after:.4g} ({c.steps:+.1f} steps, {c.change * 100:+.1f} %), "
                f"driven by {c.driver or '?'}"
                for c in self.moving[:shown]
            ]
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "clips": self.clips,
            "last_clips": self.last_clips,
            "method": self.method,
            "grow_steps": self.rule.grow_steps,
            "shrink_steps": self.rule.shrink_steps,
            "verdict": self.verdict(),
            "tensors": [
                {
                    "tensor": c.tensor,
                    "before": c.before,
                    "after": c.after,
                    "change": c.change,
                    "steps": c.steps,
                    "driver": c.driver,
                }
                for c in self.changes
            ],
        }

    @classmethod
    def from_json(cls, obj: Any) -> Convergence:
        """From a sidecar's ``convergence`` object; anything malformed is a ``ValueError``. A record written
        before the rule was in INT8 steps (``tolerance``) is judged by today's rule (its amax pairs are kept)."""
        if not isinstance(obj, dict) or not isinstance(obj.get("tensors"), list):
            raise ValueError("convergence is not an object with a tensors list")
        try:
            changes = tuple(
                TensorChange(
                    str(t["tensor"]),
                    float(t["before"]),
                    float(t["after"]),
                    None if t.get("driver") is None else str(t["driver"]),
                )
                for t in obj["tensors"]
            )
            rule = Rule(
                float(obj.get("grow_steps", CONVERGENCE.grow_steps)),
                float(obj.get("shrink_steps", CONVERGENCE.shrink_steps)),
            )
            return cls(int(obj["clips"]), int(obj["last_clips"]), str(obj["method"]), rule, changes)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"convergence record is malformed ({exc!r})") from exc


def checkpoint_for(clips: int) -> int | None:
    """After how many clips the statistics are kept (``None``: too few clips to say)."""
    if clips < CONVERGENCE.min_clips:
        return None
    return clips - max(1, int(clips * CONVERGENCE.last_fraction))


def assess(
    before: dict[str, float],
    after: dict[str, float],
    tops: dict[str, list[float]],
    conditions: Sequence[str] | None,
    checkpoint: int,
    method: str,
    rule: Rule | None = None,
) -> Convergence:
    """Compare amax at the checkpoint (``before``) with the final amax (``after``); ``tops[name][k]`` is
    clip k's max |x| of that tensor, ``conditions[k]`` clip k's speech condition."""
    rule = rule or Rule()
    clips = max((len(t) for t in tops.values()), default=checkpoint)
    rows = []
    for name, final in after.items():
        start = before.get(name, 0.0)
        row = TensorChange(name, float(start), float(final))
        if rule.moving(row) and conditions is not None:
            row = TensorChange(
                name,
                row.before,
                row.after,
                _driver(tops.get(name, [])[checkpoint:], conditions[checkpoint:], start, row.change > 0),
            )
        rows.append(row)
    rows.sort(
        key=lambda c: (-abs(c.change), c.tensor)
    )  # ties (e.g. no change) by name: the same file every run
    return Convergence(clips, clips - checkpoint, method, rule, tuple(rows))


def measure(
    stats: StreamingStats,
    amax: dict[str, float],
    spec: MethodSpec,
    conditions: Sequence[str] | None,
    clock: PhaseClock | None = None,
) -> Convergence | None:
    """The run's convergence from statistics collected with ``checkpoint=checkpoint_for(clips)`` and the final
    ``amax``; None when no checkpoint was taken (too few clips). Thresholds on the snapshot go to the clock's
    ``convergence`` phase."""
    if stats.checkpoint is None:
        return None
    with (clock or PhaseClock()).phase("convergence"):
        before = ranges_from_statistics(stats.checkpoint, spec)
        return assess(before, amax, stats.tops, conditions, stats.checkpoint_updates, spec.name)


def _driver(tops: Sequence[float], conditions: Sequence[str], reference: float, grew: bool) -> str | None:
    """The condition whose clips reach furthest (grew) or least far (shrank) relative to ``reference``."""
    sums: dict[str, list[float]] = {}
    for top, condition in zip(tops, conditions):
        sums.setdefault(condition, []).append(top / reference if reference > 0 else top)
    if not sums:
        return None
    means = {c: sum(v) / len(v) for c, v in sums.items()}
    return (max if grew else min)(means, key=lambda c: means[c])


def from_sidecar(record: Any) -> tuple[Convergence | None, str]:
    """A cache sidecar's convergence, or None and why (older sidecars have none: "not recorded")."""
    if record is None:
        return None, (
            f"not recorded (a cache written before convergence was recorded, or from fewer than "
            f"{CONVERGENCE.min_clips} clips)"
        )
    try:
        return Convergence.from_json(record), ""
    except ValueError as exc:
        return None, f"not readable: {exc}"

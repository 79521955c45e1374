"""Parsers for values a person types (CLI options, dashboard fields); bad input is a user error naming the field.

Every numeric CLI option takes its ``type`` from ``Number`` (through the named domains below: ``whole_number``,
``finite_number``, ``positive_number``, ``number_in``, ``seconds``), so its domain is checked while the
arguments are parsed, before any work: NaN and infinities never pass, counts are whole numbers of at least
their minimum, shares lie in their interval. A refused value is argparse's one ``error:`` line naming the
option (``cli.UserArgumentParser``); ``tests/test_option_domains.py`` finds every numeric option of every verb
in the parsers themselves and feeds it its domain's edges.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

from workbench.config import OPTION_LIMITS
from workbench.errors import WorkbenchError


def parse_positive_ints(value: str, flag: str) -> tuple[int, ...]:
    """``"1,8,32"`` -> ``(1, 8, 32)``; anything else is a user error naming ``flag``."""
    try:
        sizes = tuple(int(v) for v in value.split(",") if v.strip())
    except ValueError as exc:
        raise WorkbenchError(f"{flag} takes integers like 1,8,32, got {value!r}") from exc
    if not sizes or min(sizes) < 1:
        raise WorkbenchError(f"{flag} needs positive integers, got {value!r}")
    return sizes


def _bound(value: float) -> str:
    return f"{value:g}"


@dataclass(frozen=True)
class Number:
    """An argparse ``type``: the text as a whole number (``whole``) or a finite float, within ``low``/``high``
    (``None``: unbounded on that side; ``low_open``/``high_open``: the bound itself is outside). ``unit`` is
    named in the error ("seconds")."""

    whole: bool = False
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    unit: str = ""

    @property
    def __name__(self) -> str:  # argparse names a type by it in its own messages
        return "whole number" if self.whole else "number"

    def describe(self) -> str:
        """``a whole number >= 1``, ``a finite number in (0, 1)``, ``a finite number > 0 (seconds)``."""
        what = "a whole number" if self.whole else "a finite number"
        if self.low is not None and self.high is not None:
            left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
            span = f" in {left}{_bound(self.low)}, {_bound(self.high)}{right}"
        elif self.low is not None:
            span = f" {'>' if self.low_open else '>='} {_bound(self.low)}"
        elif self.high is not None:
            span = f" {'<' if self.high_open else '<='} {_bound(self.high)}"
        else:
            span = ""
        return what + span + (f" ({self.unit})" if self.unit else "")

    def check(self, number: float, shown: object) -> None:
        """Raise ``argparse.ArgumentTypeError`` when ``number`` (typed as ``shown``) lies outside the domain."""
        inside = math.isfinite(number)
        if inside and self.low is not None:
            inside = number > self.low if self.low_open else number >= self.low
        if inside and self.high is not None:
            inside = number < self.high if self.high_open else number <= self.high
        if not inside:
            raise argparse.ArgumentTypeError(f"takes {self.describe()}, got {shown!r}")

    def __call__(self, text: str) -> int | float:
        try:
            number: int | float = int(text) if self.whole else float(text)
        except (TypeError, ValueError):
            raise argparse.ArgumentTypeError(f"takes {self.describe()}, got {text!r}") from None
        self.check(number, text)
        return number

    def accepts(self, text: str) -> bool:
        """Whether the text parses inside the domain."""
        try:
            self(text)
        except argparse.ArgumentTypeError:
            return False
        return True


def whole_number(minimum: int = 1, maximum: int | None = None) -> Number:
    """Counts, sizes, seeds: an integer of at least ``minimum`` (at most ``maximum``)."""
    return Number(whole=True, low=minimum, high=maximum)


def finite_number() -> Number:
    """Weights and penalties that may take either sign: any finite number."""
    return Number()


def positive_number(unit: str = "") -> Number:
    """A finite number > 0."""
    return Number(low=0, low_open=True, unit=unit)


def number_in(low: float, high: float, low_open: bool = False, high_open: bool = False) -> Number:
    """A finite number within the bounds: shares, probabilities, percentiles, tolerances."""
    return Number(low=low, high=high, low_open=low_open, high_open=high_open)


def seconds(minimum: float = 0.0) -> Number:
    """A length of audio: finite seconds above ``minimum`` (above 0 when it is 0, else at least it), at most
    ``OPTION_LIMITS.max_seconds``."""
    return Number(low=minimum, high=OPTION_LIMITS.max_seconds, low_open=minimum == 0, unit="seconds")


def chunk_seconds() -> Number:
    """``--chunk-seconds``: at least ``OPTION_LIMITS.min_chunk_seconds`` on every verb (leave the option out to
    feed whole clips)."""
    return seconds(OPTION_LIMITS.min_chunk_seconds)


@dataclass(frozen=True)
class SecondsPair(Number):
    """``--stride-seconds``: one value for both sides or ``left,right``, each a finite number of seconds >= 0."""

    def describe(self) -> str:
        return "seconds >= 0: one value, or left,right"

    def __call__(self, text: str) -> float | tuple[float, float]:  # type: ignore[override]
        parts = str(text).split(",")
        if len(parts) not in (1, 2):
            raise argparse.ArgumentTypeError(f"takes {self.describe()}, got {text!r}")
        values = []
        for part in parts:
            try:
                value = float(part)
            except ValueError:
                raise argparse.ArgumentTypeError(f"takes {self.describe()}, got {text!r}") from None
            self.check(value, text)
            values.append(value)
        return values[0] if len(values) == 1 else (values[0], values[1])


def stride_seconds() -> SecondsPair:
    return SecondsPair(low=0.0, high=OPTION_LIMITS.max_seconds, unit="seconds")


@dataclass(frozen=True)
class WholeNumbers(Number):
    """Comma-separated whole numbers (``1,8,32``), each within the domain: batch sizes."""

    whole: bool = True

    def describe(self) -> str:
        return f"{Number.describe(self).replace('a whole number', 'whole numbers', 1)}, comma separated like 1,8,32"

    def __call__(self, text: str) -> tuple[int, ...]:  # type: ignore[override]
        parts = [p.strip() for p in str(text).split(",") if p.strip()]
        if not parts:
            raise argparse.ArgumentTypeError(f"takes {self.describe()}, got {text!r}")
        values = []
        for part in parts:
            try:
                values.append(int(Number.__call__(self, part)))
            except argparse.ArgumentTypeError:
                raise argparse.ArgumentTypeError(f"takes {self.describe()}, got {text!r}") from None
        return tuple(values)


def batch_sizes() -> WholeNumbers:
    """``--batch-sizes`` / ``--batch``: whole numbers >= 1."""
    return WholeNumbers(low=1)

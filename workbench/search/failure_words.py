"""Why a search candidate fails, in words: the first failing check's delta estimate and judged upper end
against its limit, so a plan that reads better than FP32 but fails says that its interval is too wide."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def why_it_fails(checks: Iterable[Any], estimates: dict[str, float | None]) -> str:
    """``checks``: gate checks (``name``, ``value`` = judged upper end in points, ``limit``, ``passed``);
    ``estimates``: each check's delta estimate in points. Empty when every check passes."""
    for check in checks:
        if check.passed:
            continue
        estimate = estimates.get(check.name)
        upper, limit = check.value, check.limit
        if upper is None or upper != upper:
            return f"{check.name}: no interval to judge"
        if estimate is not None and estimate > limit:
            return f"{check.name}: the estimate {estimate:+.2f} itself exceeds the limit +{limit:.2f}"
        better = (
            " though the estimate reads better than FP32" if estimate is not None and estimate < 0 else ""
        )
        return f"{check.name}: interval too wide: the upper end {upper:+.2f} exceeds the limit +{limit:.2f}{better}"
    return ""

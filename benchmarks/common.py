"""Helpers the benchmark scripts share, one copy each: CPU seconds of this process and its children, the load
averages a result records beside its times, and the dev-set evaluator the calibration benchmarks judge plans
with (the FP32 transcripts computed once, then reused for every plan).

Scripts import it as ``from common import ...`` (their own folder is on ``sys.path``, as for ``childproc``).
"""

from __future__ import annotations

import os
import resource
from typing import Any


def cpu_seconds() -> float:
    """User + system CPU seconds of this process and its finished children."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def load_averages() -> list[float]:
    """The 1-, 5- and 15-minute load averages, rounded to 2 decimals, as the results record them."""
    return [round(x, 2) for x in os.getloadavg()]


def dev_evaluator(variants: Any, clips: list, gates: Any, resamples: int, model: Any) -> Any:
    """A ``DevEvaluator`` of the given clips (seed 0, no progress bar) that scores plans run by ``variants``."""
    from workbench.search.evaluator import DevEvaluator

    return DevEvaluator(variants, clips, gates, resamples=resamples, seed=0, progress=False, model=model)

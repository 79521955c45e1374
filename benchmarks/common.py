"""Helpers the benchmark scripts share, one copy each: CPU seconds of this process and its children, the load
averages a result records beside its times, the cores other processes used while a benchmark ran (the load
average counts the benchmark's own threads, so on a 2-core machine a 2-thread run never reads idle by it),
and the dev-set evaluator the calibration benchmarks judge plans
with (the FP32 transcripts computed once, then reused for every plan).

Scripts import it as ``from common import ...`` (their own folder is on ``sys.path``, as for ``childproc``).
"""

from __future__ import annotations

import os
import resource
import time
from pathlib import Path
from typing import Any

# /proc/stat columns that count busy time (user nice system idle iowait irq softirq steal ...): all but idle, iowait
_BUSY_COLUMNS = (0, 1, 2, 5, 6, 7)


def cpu_seconds() -> float:
    """User + system CPU seconds of this process and its finished children."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def load_averages() -> list[float]:
    """The 1-, 5- and 15-minute load averages, rounded to 2 decimals, as the results record them."""
    return [round(x, 2) for x in os.getloadavg()]


def busy_cpu_seconds(stat: Path = Path("/proc/stat")) -> float:
    """CPU seconds every process on this machine has been busy since boot (Linux ``/proc/stat``)."""
    fields = stat.read_text().splitlines()[0].split()[1:]
    ticks = os.sysconf("SC_CLK_TCK")
    return sum(int(fields[i]) for i in _BUSY_COLUMNS if i < len(fields)) / ticks


class OtherProcesses:
    """Cores that processes other than this one (and its finished children) kept busy between ``start`` and
    ``cores_used``: the machine's busy CPU time minus this process's, over the wall time. A benchmark is taken on
    an idle machine when this stays low, whatever its own threads do to the load average."""

    def __init__(self) -> None:
        self.start()

    def start(self) -> None:
        self._wall, self._busy, self._own = time.monotonic(), busy_cpu_seconds(), cpu_seconds()

    def cores_used(self) -> float:
        wall = time.monotonic() - self._wall
        if wall <= 0:
            return 0.0
        others = (busy_cpu_seconds() - self._busy) - (cpu_seconds() - self._own)
        return round(max(0.0, others) / wall, 3)


def dev_evaluator(variants: Any, clips: list, gates: Any, resamples: int, model: Any) -> Any:
    """A ``DevEvaluator`` of the given clips (seed 0, no progress bar) that scores plans run by ``variants``."""
    from workbench.search.evaluator import DevEvaluator

    return DevEvaluator(variants, clips, gates, resamples=resamples, seed=0, progress=False, model=model)

"""Run one benchmark job in its own process and read back its JSON line: the job's own peak RSS, the
1-minute load average before and after, an address-space cap so a runaway job fails instead of exhausting a
shared machine. Used by ``calibration.py`` and ``anchors.py``."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import time
from pathlib import Path


def peak_rss_mb() -> float:
    """VmHWM of this process (ru_maxrss would include the parent's peak, kept across exec on Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def load_average() -> float:
    """1-minute load average (the number of runnable tasks, to compare with the core count)."""
    return os.getloadavg()[0]


def run_json_child(
    cmd: list[str],
    job: str,
    timeout: float,
    cap_gb: float,
    env: dict[str, str] | None = None,
    load_before: float | None = None,
) -> dict:
    """Run ``cmd``; its last stdout line starting with ``{`` is its result. On a timeout, a non-zero exit or no
    result: ``{"job", "error"}`` with the reason (the last stderr line). Always adds ``process_wall_s`` and the
    load average before (``load_before`` when the caller took it, e.g. after waiting for an idle machine) and after."""

    def cap() -> None:
        if cap_gb > 0:
            limit = int(cap_gb * 2**30)
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    load = {"load_before": load_average() if load_before is None else load_before}
    start = time.perf_counter()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, preexec_fn=cap, env=env)
    except subprocess.TimeoutExpired:
        return {
            "job": job,
            "error": f"timed out after {timeout:.0f} s",
            **load,
            "load_after": load_average(),
            "process_wall_s": time.perf_counter() - start,
        }
    total = time.perf_counter() - start
    load["load_after"] = load_average()
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode != 0 or not lines:
        why = (
            "killed (out of memory?)"
            if done.returncode in (-9, 137)
            else done.stderr.strip().splitlines()[-1:]
        )
        return {
            "job": job,
            "error": f"exit {done.returncode} under a {cap_gb:g} GB address-space cap: {why}",
            "process_wall_s": total,
            **load,
        }
    return {**json.loads(lines[-1]), "process_wall_s": total, **load}

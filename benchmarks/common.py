"""Helpers the benchmark scripts share, one copy each: CPU seconds of this process and its children, the load
averages a result records beside its times, the cores other processes used while a benchmark ran
(``MachineCpu``), and the dev-set evaluator the calibration benchmarks judge plans
with (the FP32 transcripts computed once, then reused for every plan).

Scripts import it as ``from common import ...`` (their own folder is on ``sys.path``, as for ``childproc``).
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def cpu_seconds() -> float:
    """User + system CPU seconds of this process and its finished children."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def load_averages() -> list[float]:
    """The 1-, 5- and 15-minute load averages, rounded to 2 decimals, as the results record them."""
    return [round(x, 2) for x in os.getloadavg()]


def busy_cpu_seconds(stat: Path = Path("/proc/stat")) -> float:
    """CPU seconds every process on this machine has been busy since boot (Linux ``/proc/stat``: all columns but
    idle and iowait); NaN where it cannot be read."""
    try:
        fields = [int(v) for v in stat.read_text().split("\n", 1)[0].split()[1:]]
        return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return float("nan")


def children_cpu_seconds() -> float:
    """User + system CPU seconds of this process's finished children."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@dataclass(frozen=True)
class MachineCpu:
    """Busy CPU seconds of the whole machine (``/proc/stat``) and of what the benchmark measures: its finished
    children (a job run as a child process), or with ``include_self`` this process and its children (a job run
    in process).

    Their difference over a run is the CPU other processes used meanwhile: the measure of an idle machine that
    the load average cannot give, since the job's own threads raise the load too (a 2-thread job ends a long
    run at load 2 or more on an otherwise idle 2-core machine).
    """

    busy_s: float
    measured_s: float
    at_s: float  # time.monotonic() when read

    @classmethod
    def now(cls, include_self: bool = False) -> MachineCpu:
        measured = cpu_seconds() if include_self else children_cpu_seconds()
        return cls(busy_cpu_seconds(), measured, time.monotonic())

    def foreign_cores(self, before: MachineCpu, wall_s: float | None = None) -> float:
        """Cores' worth of CPU that processes other than the measured ones used since ``before``, over ``wall_s``
        (default: the time between the two readings)."""
        wall = self.at_s - before.at_s if wall_s is None else wall_s
        own = self.measured_s - before.measured_s
        return max(0.0, (self.busy_s - before.busy_s) - own) / wall if wall > 0 else float("nan")


def dev_evaluator(variants: Any, clips: list, gates: Any, resamples: int, model: Any) -> Any:
    """A ``DevEvaluator`` of the given clips (seed 0, no progress bar) that scores plans run by ``variants``."""
    from workbench.search.evaluator import DevEvaluator

    return DevEvaluator(variants, clips, gates, resamples=resamples, seed=0, progress=False, model=model)


@dataclass
class WayTimes:
    """One ONNX file transcribed several ways, interleaved: seconds per round, last texts and runner description."""

    seconds: dict[str, list[float]]
    texts: dict[str, list[str]]
    described: dict[str, dict]

    @property
    def median_seconds(self) -> dict[str, float]:
        import statistics

        return {way: statistics.median(values) for way, values in self.seconds.items()}


def time_transcription_ways(
    runners: dict[str, Any], clips: list, model: Any, name: str, batch_size: int, rounds: int
) -> WayTimes:
    """Transcribe ``clips`` with each of ``runners`` (way -> an inactive runner of the same file) through the
    workbench's own path, after one untimed warm-up batch each, the ways interleaved over ``rounds`` rounds."""
    from workbench.evaluate.transcribe import transcribe

    times = WayTimes({way: [] for way in runners}, {}, {})
    for runner in runners.values():
        runner.activate()
    try:
        for way, runner in runners.items():
            transcribe(runner, clips[:batch_size], model, name, batch_size=batch_size)
            times.described[way] = runner.describe()
        for _ in range(rounds):
            for way, runner in runners.items():
                began = time.perf_counter()
                result = transcribe(runner, clips, model, name, batch_size=batch_size)
                times.seconds[way].append(time.perf_counter() - began)
                times.texts[way] = result.texts
    finally:
        for runner in runners.values():
            runner.deactivate()
    return times


def unmeasured_as_none(value: Any) -> Any:
    """``value`` with every non-finite float (a ratio that a short run could not measure) as None, so a
    benchmark's record stays strict JSON and says "not measured" rather than NaN."""
    import math

    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: unmeasured_as_none(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [unmeasured_as_none(v) for v in value]
    return value


def run_per_file(args: Any, benchmark: str, measure: Any, argv: list[str] | None) -> dict:
    """The frame of a benchmark that measures each ``--onnx NAME=PATH`` on the first ``--limit`` utterances of
    ``--eval-set`` (the demo model's features): ``measure(args, name, path, clips, texts, model)`` gives each row;
    the load average before and after, the cores other processes used, the machine and packages are recorded, and
    the JSON is written to ``args.out``."""
    import sys

    from workbench.artifacts import strict_json, write_text_atomic
    from workbench.evaluate.machine import machine_info, package_versions
    from workbench.model.description import describe_model
    from workbench.resources import demo_model_dir
    from workbench.speech.store import load_set

    speech_set = load_set(args.eval_set, root=args.root)
    utterances = speech_set.utterances[: args.limit]
    clips = [speech_set.audio(u) for u in utterances]
    texts = [u.text for u in utterances]
    model = describe_model(demo_model_dir())
    load_before = list(os.getloadavg())
    before = MachineCpu.now(include_self=True)
    rows = [measure(args, name, path, clips, texts, model) for name, path in args.onnx]
    others = MachineCpu.now(include_self=True).foreign_cores(before)
    out = {
        "benchmark": benchmark,
        "command": f"python benchmarks/{benchmark}.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "eval_set": {
            "name": speech_set.name,
            "content_hash": speech_set.content_hash,
            "utterances": len(clips),
        },
        "audio_seconds": sum(len(c) for c in clips) / 16000,
        "batch_size": args.batch_size,
        "rounds": args.rounds,
        "load_average_before": load_before,
        "load_average_after": list(os.getloadavg()),
        "other_processes_cores": round(others, 3),
        "machine": machine_info(),
        "packages": package_versions(),
        "rows": rows,
    }
    write_text_atomic(args.out, strict_json(out, indent=2, default=str) + "\n")
    return out


def load_line(out: dict, path: Path) -> str:
    """The closing line of a ``run_per_file`` benchmark: the load average around it and where the JSON went."""
    return (
        f"load average before {out['load_average_before']}, after {out['load_average_after']}; other processes "
        f"used {out['other_processes_cores']:.2f} cores; wrote {path}"
    )

"""Background jobs for the Run page: a job's typed inputs are written to ``reports/_jobs/<id>/inputs.json``
(``workbench.jobs.codec``) and ``python -m workbench.jobs`` runs it as a subprocess (with the dashboard's
workspace as ``$WORKBENCH_WORKSPACE``, so anything the inputs leave to a default lands there too) whose
output goes to a log file beside it; progress is parsed from the log's tail (tqdm bars, demo and
``workbench run`` step lines), so the UI never waits on a job. A project run (``launch``) is
``python -m workbench run --config FILE`` started the same way (``dashboard.project_runs``).

``job.json`` holds the command, process id, start time and, once the process ends, its exit status
(written by a watcher thread). A job whose process is gone without a recorded status (the dashboard
restarted) is reported as such. Jobs run in the dashboard's process group, so stopping the server
stops them too.

``start`` is bounded: the inputs must pass the job's own input checks (``codec.check``: the same checks
the CLI verb runs first), and at most ``max_jobs`` jobs under the artifact root run at once; otherwise
it raises (``JobLimitReached`` for the limit) and starts nothing.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.artifacts import write_json_atomic
from workbench.dashboard.paths import ArtifactRoots, resolve
from workbench.errors import WorkbenchError
from workbench.jobs import codec
from workbench.workspace import ENV_VAR

JOBS_FOLDER = "_jobs"
LOG = "log.txt"
META = "job.json"
INPUTS = "inputs.json"
_PROCESSES: dict[str, subprocess.Popen] = {}
_LOCK = threading.Lock()
TQDM = re.compile(r"(?P<desc>[^\r\n|]*?):?\s*(?P<pct>\d{1,3})%\|[^|]*\|\s*(?P<n>\d+)/(?P<total>\d+)")
STEP = re.compile(r"^(?:=== )?\[(?P<n>\d+)/(?P<total>\d+)\] (?P<name>[\w-]+)", re.M)  # demo or run step


@dataclass(frozen=True)
class Progress:
    fraction: float | None
    label: str


@dataclass
class Job:
    id: str
    folder: Path
    argv: list[str]
    kind: str
    started: str
    pid: int
    returncode: int | None
    finished: str | None

    @property
    def log_path(self) -> Path:
        """The log, checked by the resolver (a log symlinked out of the artifact folders is not read)."""
        return resolve(self.folder / LOG, "reports", ArtifactRoots(self.folder.parent.parent.parent))

    @property
    def running(self) -> bool:
        if self.returncode is not None:
            return False
        proc = _PROCESSES.get(self.id)
        if proc is not None:
            return proc.poll() is None
        return _alive(self.pid)

    @property
    def state(self) -> str:
        if self.returncode is None:
            return "running" if self.running else "ended (exit status unknown: the dashboard restarted)"
        return "finished" if self.returncode == 0 else f"failed (exit status {self.returncode})"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def jobs_root(roots: ArtifactRoots) -> Path:
    return roots.reports / JOBS_FOLDER


class JobLimitReached(WorkbenchError):
    """As many jobs as the dashboard allows are running already."""


def running_jobs(roots: ArtifactRoots) -> list[Job]:
    """Jobs under the artifact root whose process is still running (also those of an earlier dashboard)."""
    return [job for job in list_jobs(roots) if job.running]


def start(inputs: Any, roots: ArtifactRoots, max_jobs: int) -> Job:
    """Start the job whose typed inputs are ``inputs`` in the background (``python -m workbench.jobs``) and
    return at once, if they pass the job's input checks and fewer than ``max_jobs`` jobs are running;
    else raise ``WorkbenchError`` and start nothing."""
    kind = codec.job_of(inputs)
    codec.check(inputs)

    def write(folder: Path) -> list[str]:
        codec.write_job(folder / INPUTS, inputs)
        return ["-m", "workbench.jobs", str(folder / INPUTS)]

    return launch(kind, write, roots, max_jobs)


def launch(kind: str, write: Callable[[Path], list[str]], roots: ArtifactRoots, max_jobs: int) -> Job:
    """Start ``python <what write returns>`` in the background in a new job folder (``write`` puts the job's
    ``inputs.json`` there first) and return at once, if fewer than ``max_jobs`` jobs are running; else raise
    ``JobLimitReached`` and start nothing. The inputs must have passed their checks already."""
    with _LOCK:  # the count and the start are one step for every session of this dashboard
        running = running_jobs(roots)
        if len(running) >= max_jobs:
            raise JobLimitReached(
                f"{len(running)} job{'s' * (len(running) != 1)} already running and this dashboard runs at most "
                f"{max_jobs} at once; wait for one to finish or stop one under Jobs below, then start again "
                "(the limit is `python -m workbench dashboard --max-jobs N`)"
            )
        stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S-%f")
        folder = jobs_root(roots) / f"{stamp}-{kind}"
        folder.mkdir(parents=True)
        argv = [sys.executable, *write(folder)]
        # a job needs none of the dashboard's access settings (its token least of all)
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("WORKBENCH_DASHBOARD_")},
            "PYTHONUNBUFFERED": "1",
            ENV_VAR: str(roots.root),
        }
        with open(folder / LOG, "wb") as log:
            log.write(f"$ {command_text(argv)}\n".encode())
            log.flush()
            proc = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
            )
        job = Job(
            folder.name,
            folder,
            argv,
            kind,
            _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            proc.pid,
            None,
            None,
        )
        _PROCESSES[job.id] = proc
        _save(job)
    threading.Thread(target=_watch, args=(job, proc), daemon=True, name=f"job-{job.id}").start()
    return job


def command_text(argv: list[str]) -> str:
    """A job's command as a person would type it (``python -m ...``)."""
    return " ".join(["python", *argv[1:]])


def _watch(job: Job, proc: subprocess.Popen) -> None:
    job.returncode = proc.wait()
    job.finished = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    _save(job)


def _save(job: Job) -> None:
    write_json_atomic(
        job.folder / META,
        {
            "argv": job.argv,
            "kind": job.kind,
            "started": job.started,
            "pid": job.pid,
            "returncode": job.returncode,
            "finished": job.finished,
        },
    )


def load(job_id: str, roots: ArtifactRoots) -> Job:
    folder = resolve(jobs_root(roots) / job_id, "reports", roots)
    meta = json.loads(resolve(folder / META, "reports", roots).read_text())
    return Job(
        folder.name,
        folder,
        meta["argv"],
        meta["kind"],
        meta["started"],
        meta["pid"],
        meta["returncode"],
        meta.get("finished"),
    )


def inputs_text(job: Job) -> str:
    """The job's inputs as written (JSON), read through the resolver; "" if unreadable."""
    try:
        data = json.loads(
            resolve(job.folder / INPUTS, "reports", ArtifactRoots(job.folder.parent.parent.parent)).read_text(
                encoding="utf-8"
            )
        )
    except (OSError, ValueError, WorkbenchError):
        return ""
    return json.dumps(data.get("inputs", data), indent=1) if isinstance(data, dict) else ""


def list_jobs(roots: ArtifactRoots) -> list[Job]:
    """Jobs started from the dashboard, newest first."""
    root = jobs_root(roots)
    if not root.is_dir():
        return []
    out = []
    for folder in sorted(root.iterdir(), reverse=True):
        if (folder / META).is_file():
            try:
                out.append(load(folder.name, roots))
            except (WorkbenchError, OSError, ValueError, KeyError):
                continue
    return out


def stop(job: Job) -> None:
    """Ask a running job to stop (SIGTERM); its artifacts are written atomically, so none is left half done."""
    proc = _PROCESSES.get(job.id)
    if proc is not None and proc.poll() is None:
        proc.terminate()


def wait(job: Job, roots: ArtifactRoots, timeout_s: float) -> Job:
    """Block until the job has ended and its status is recorded (tests and scripts; the UI never calls it)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        job = load(job.id, roots)
        if job.returncode is not None:
            return job
        time.sleep(0.2)
    raise TimeoutError(f"job {job.id} still running after {timeout_s} s")


def tail(job: Job, max_bytes: int = 32_768) -> str:
    """The end of the log, with tqdm's carriage-return redraws collapsed to their last state."""
    return "\n".join(line.rstrip("\r").rsplit("\r", 1)[-1] for line in raw_tail(job, max_bytes).split("\n"))


def raw_tail(job: Job, max_bytes: int = 32_768) -> str:
    """The last ``max_bytes`` of the log as written (tqdm redraws kept, for progress parsing); "" if unreadable."""
    try:
        with open(job.log_path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - max_bytes))
            return handle.read().decode("utf-8", errors="replace")
    except (OSError, WorkbenchError):
        return ""


def progress(text: str) -> Progress:
    """The latest progress in a log: the last tqdm bar (``desc: 40%|…| 4/10``), else the last demo or run step."""
    bars = list(TQDM.finditer(text))
    steps = list(STEP.finditer(text))
    step = steps[-1] if steps else None
    if bars:
        bar = bars[-1]
        n, total = int(bar["n"]), int(bar["total"])
        label = f"{bar['desc'].strip() or 'working'}: {n}/{total}"
        if step is not None:
            label = f"step {step['n']}/{step['total']} {step['name']} · {label}"
        return Progress(n / total if total else None, label)
    if step is not None:
        return Progress(
            (int(step["n"]) - 1) / int(step["total"]), f"step {step['n']}/{step['total']} {step['name']}"
        )
    return Progress(None, "starting")


def error_lines(text: str) -> list[str]:
    """``error: ...`` lines the CLI prints for user errors, or the last line of a traceback."""
    lines = [ln for ln in text.splitlines() if ln.startswith("error:")]
    if lines:
        return lines
    if "Traceback (most recent call last)" in text:
        return [ln for ln in text.strip().splitlines() if ln.strip()][-1:]
    return []

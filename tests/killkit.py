"""Kill injection for the integrity tests: run a verb in a process that SIGKILLs itself just before its N-th
rename, replace, unlink, rmdir or ``shutil.rmtree`` of a path under a given root.

Production code carries no kill hook. ``Zygote`` starts one helper process (``python -c ZYGOTE``) that imports
the CLI and the verbs' jobs once; for each run it forks a child that installs the hook (a wrapper around those
``os``/``shutil`` functions, in the child only), runs ``workbench.cli.main(argv)`` and exits with its status.
Only the forked child counts operations (worker processes it starts never kill themselves). The helper also imports
once what every run would otherwise import again in each child (torch, transformers, matplotlib): a forked child
starts with them loaded. ``ops`` runs a verb
without a kill and returns the operations it made (``N`` ranges over them); ``killed`` runs it with the kill at
``N`` and returns the operation it stopped before. ``kill_points`` picks which ``N`` a test kills at: the first and
last operation and the first of each (operation, artifact kind) pair, so every kind of write is killed once
without killing at each of the alike ones.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

ZYGOTE = r"""
import importlib, json, os, shutil, signal, sys, traceback

import workbench.cli
from workbench.quiet import quiet_console

quiet_console()  # as main() does first, so the imports below see the same switches
workbench.cli.build_parser()  # every verb's module
for name in sys.argv[1:]:  # what the runs would otherwise import again in every forked child
    importlib.import_module(name)
if "transformers" in sys.modules:  # the lazy modules the model-folder check resolves
    transformers = sys.modules["transformers"]
    transformers.AutoConfig, transformers.Wav2Vec2ForCTC
quiet_console()


def install(root, at, log):
    root = os.path.realpath(root) + os.sep
    me, count = os.getpid(), [0]

    def where(path, dir_fd):
        if isinstance(path, int):
            return None
        path = os.fsdecode(path)
        if dir_fd is not None and not os.path.isabs(path):
            path = os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), path)
        path = os.path.abspath(path)
        return os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))

    def hit(op, path, dir_fd):
        spot = where(path, dir_fd)
        if os.getpid() != me or spot is None or not spot.startswith(root):
            return
        count[0] += 1
        with open(log, "a") as handle:
            handle.write(f"{count[0]} {op} {spot[len(root):]}\n")
        if count[0] == at:
            os.kill(os.getpid(), signal.SIGKILL)

    def wrap(module, name):
        real = getattr(module, name)

        def hooked(path, *args, **kwargs):
            hit(name, path, kwargs.get("dir_fd", kwargs.get("src_dir_fd")))
            return real(path, *args, **kwargs)

        setattr(module, name, hooked)

    for name in ("replace", "rename", "unlink", "remove", "rmdir"):
        wrap(os, name)
    wrap(shutil, "rmtree")


for line in sys.stdin:
    job = json.loads(line)
    pid = os.fork()
    if pid == 0:
        out = os.open(job["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(out, 1)
        os.dup2(out, 2)
        code = 70
        os.environ.update(job["env"])
        try:
            if job["at"] >= 0:
                install(job["root"], job["at"], job["log"])
            code = workbench.cli.main(job["argv"])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    print(json.dumps({"status": code}), flush=True)
os._exit(0)  # nothing to flush or clean up: skip the interpreter's slow teardown of torch and the rest
"""


#: what the helper imports before it forks: the verbs' jobs, and what the model-folder check (transformers, torch),
#: the report's figures (matplotlib), the calibration kernels (numba) and the graph tools import, seconds each
PRELOAD = (
    "workbench.jobs.calibrate",
    "workbench.jobs.import_set",
    "workbench.jobs.sets",
    "workbench.jobs.signoff",
    "workbench.report.plots",
    "matplotlib.pyplot",
    "numba",
    "onnx_graphsurgeon",
    "onnxruntime",
    "torch",
    "transformers",
)


class Zygote:
    """One helper process that forks a child per run (see the module docstring); ``close`` ends it. ``preload``:
    the modules it imports first (runs that need fewer start the helper sooner)."""

    def __init__(self, scratch: Path, preload: tuple[str, ...] = PRELOAD) -> None:
        self.scratch = Path(scratch)
        self.scratch.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", ZYGOTE, *preload],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )

    def run(
        self, argv: list[str], root: Path, at: int = -1, env: dict[str, str] | None = None
    ) -> tuple[int, str, list[str]]:
        """``workbench argv`` in a forked child: (exit status or -signal, its output (stdout and stderr), the
        operations under ``root`` it made). ``at`` < 0: no hook; 0: count only; N > 0: SIGKILL before the N-th
        operation. ``env``: variables set in the child only."""
        log, out = self.scratch / "ops.log", self.scratch / "out.txt"
        log.unlink(missing_ok=True)
        job = {"argv": argv, "root": str(root), "at": at, "log": str(log), "out": str(out), "env": env or {}}
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        reply = self.proc.stdout.readline()
        assert reply, "the kill-test helper process died"
        ops = log.read_text().splitlines() if log.exists() else []
        return json.loads(reply)["status"], out.read_text(errors="replace"), ops

    def ops(self, argv: list[str], root: Path) -> list[str]:
        """The operations a run without a kill makes under ``root``; the run must succeed."""
        status, out, ops = self.run(argv, root, 0)
        assert status == 0, out[-3000:]
        return ops

    def killed(self, argv: list[str], root: Path, at: int) -> str:
        """Run with the kill before operation ``at``; asserts it was killed and returns that operation."""
        status, out, ops = self.run(argv, root, at)
        assert status == -9 and len(ops) == at, (at, status, out[-3000:])
        return ops[-1]

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


def hidden_entries(*roots: Path) -> list[str]:
    """Hidden names anywhere under ``roots`` (links not followed): what a killed write might have left."""
    found = []
    for root in roots:
        for folder, dirs, files in os.walk(root, followlinks=False):
            found += [os.path.join(folder, n) for n in dirs + files if n.startswith(".")]
    return sorted(found)


_TEMP = re.compile(r"^\.(?P<final>.+)\.[A-Za-z0-9_]{8}\.tmp$")


def artifact_kind(path: str) -> str:
    """What an operation's path is, without names and hashes: a temp file counts as its final file, and the kind
    is the final name's alphabetic suffixes (``.plan.json``, ``.onnx``, ``.flac``), else the name itself."""
    name = path.rstrip("/").rsplit("/", 1)[-1]
    temp = _TEMP.match(name)
    if temp:
        name = temp.group("final")
    name = name.lstrip(".")
    suffixes = [s for s in re.findall(r"\.[^.]+", name) if s[1:].isalpha()]
    return "".join(suffixes[-2:]) or name


def kill_points(ops: list[str], also: tuple[int, ...] = ()) -> list[int]:
    """1-based kill points for ``ops`` (lines ``N op path``): the first and the last, the first of each (operation,
    artifact kind) pair, and ``also``; sorted, each once. Deterministic: the same operations give the same points."""
    picked = {1, len(ops), *[a for a in also if 1 <= a <= len(ops)]}
    seen: set[tuple[str, str]] = set()
    for index, line in enumerate(ops, 1):
        _, op, path = line.split(" ", 2)
        key = (op, artifact_kind(path))
        if key not in seen:
            seen.add(key)
            picked.add(index)
    return sorted(p for p in picked if p >= 1)

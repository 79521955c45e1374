"""What a run leaves behind: no worker process outlives a killed ``data import``; artifacts written through the
atomic-write helpers get the mode the umask gives (a team sharing a workspace reads each other's reports)."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from layoutkit import write_librispeech

from workbench.artifacts import write_json_atomic, write_text_atomic
from workbench.journal import SUFFIX, one_folder
from workbench.speech.store import start_set


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_atomic_writes_and_set_folders_follow_the_umask(tmp_path, umask) -> None:
    old = os.umask(umask)
    try:
        write_json_atomic(tmp_path / "report.json", {"a": 1})
        write_text_atomic(tmp_path / "sub" / "report.md", "# report\n")
        (tmp_path / "plain.txt").write_text("x")  # what open() gives, the reference
        with one_folder(tmp_path / "set") as tmp:
            start_set(tmp)
            (tmp / "card.json").write_text("{}")
    finally:
        os.umask(old)
    mode = lambda p: stat.S_IMODE(p.stat().st_mode)  # noqa: E731
    assert mode(tmp_path / "report.json") == mode(tmp_path / "sub" / "report.md") == 0o666 & ~umask
    assert mode(tmp_path / "report.json") == mode(tmp_path / "plain.txt")
    assert mode(tmp_path / "set") == 0o777 & ~umask


@pytest.mark.slow
def test_a_killed_import_leaves_no_worker_running(tmp_path, speech_like) -> None:
    """SIGKILL the CLI process alone (not its process group): its pool workers end too."""
    split, _ = write_librispeech(
        tmp_path / "big", "test-clean", [str(s) for s in range(100, 116)], 1, 6, lambda i: 3.0, speech_like
    )
    root = tmp_path / "sets"
    repo = Path(__file__).resolve().parent.parent
    argv = ["data", "import", "--name", "big", "--source", "librispeech", "--path", str(split)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "workbench", *argv, "--workers", "2", "--no-progress", "--root", str(root)],
        cwd=repo,
        env={**os.environ, "PYTHONPATH": str(repo)},
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    parent = psutil.Process(proc.pid)
    workers: list[psutil.Process] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if len(list(root.glob(f".*{SUFFIX}/**/audio/*.flac"))) >= 6:  # the workers are writing clips
            workers = [c for c in parent.children(recursive=True) if c.is_running()]
            break
        time.sleep(0.02)
    assert proc.poll() is None and len(workers) >= 2, "the import ended before it could be killed"
    try:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        _, alive = psutil.wait_procs(workers, timeout=15)
        assert not alive, f"worker processes outlived the killed import: {[p.pid for p in alive]}"
    finally:
        os.killpg(proc.pid, signal.SIGKILL) if _group_alive(proc.pid) else None


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False

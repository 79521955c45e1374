"""Worker processes that end with the process that started them.

A process pool's workers outlive a parent killed with SIGKILL (no ``finally``, no ``atexit`` runs in it):
they keep decoding and writing into a temporary set folder nobody will finish. ``die_with_parent`` runs
first in each worker (the pool's initializer): on Linux the kernel sends the worker SIGKILL when its parent
ends (``prctl(PR_SET_PDEATHSIG)``); elsewhere a daemon thread polls the parent's id once a second. A parent
that ended before the worker got this far is caught by comparing the parent id with the one the pool gave.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
POLL_SECONDS = 1.0


def _kernel_kills_orphan() -> bool:
    """Ask Linux to SIGKILL this process when its parent ends; False where that cannot be asked."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        return int(libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _watch(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(POLL_SECONDS)
    os._exit(1)


def die_with_parent(parent_pid: int) -> None:
    """End this (worker) process when ``parent_pid``, the process that started it, ends."""
    if not _kernel_kills_orphan():
        threading.Thread(target=_watch, args=(parent_pid,), name="parent-watch", daemon=True).start()
    if os.getppid() != parent_pid:  # the parent ended before the request was in place
        os._exit(1)

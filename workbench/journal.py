"""Replace several sibling folders (a calibration/evaluation set pair) or files (a report's JSON, Markdown and
HTML) as one step, surviving a kill at any point.

``folders_together(root, names)`` yields one empty temporary folder per name, all inside one hidden
temporary parent ``root/.<label>.<random>.pending``; ``files_together`` yields the paths of temporary files
there instead. After the caller has written them:

1. a journal (``journal.json``, the commit point) is written into the parent, atomically;
2. each existing ``root/<name>`` is moved into the parent (``old/<name>``) and the new one is moved
   into its place, name by name;
3. the parent (with the old folders or files) is renamed to ``.<label>.<random>.discard`` in one step, then
   removed; a kill while it is removed leaves that hidden ``.discard`` folder, which the next ``recover``
   removes.

A run killed before the journal leaves only the hidden parent: the old folders are untouched and the
next ``recover(root)`` deletes it (roll back). A run killed after the journal is rolled forward by the
next ``recover(root)``: every new folder is moved into place, so the pair is always both old or both new.
``recover`` runs at the start of every write, before ``data list`` and before a set is read
(``workbench.speech.store``); a pending parent whose writer is still alive (it holds an ``flock`` on
``writer.lock``) is left alone, and so is any hidden folder that is not such a parent. Hidden names are
never listed as sets.

For the kill tests, ``WORKBENCH_KILL_AT_STEP=k`` makes the writing process SIGKILL itself at its k-th
``step`` (counted from 1 over the process); nothing else reads it.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from workbench.artifacts import write_json_atomic

SUFFIX = ".pending"
DISCARD = ".discard"
_MADE_NAME = re.compile(r"^\..+\.[a-z0-9_]{8}\.(pending|discard)$")  # mkdtemp's 8 random characters
_STARTING_S = 60.0  # a pending parent still without its writer.lock after this long was killed while starting
JOURNAL = "journal.json"
WRITER_LOCK = "writer.lock"
KILL_ENV = "WORKBENCH_KILL_AT_STEP"
_steps = 0


def step(label: str) -> None:
    """A point a kill test may stop the process at (``$WORKBENCH_KILL_AT_STEP``); a no-op otherwise."""
    global _steps
    _steps += 1
    if os.environ.get(KILL_ENV) == str(_steps):
        print(f"killed at step {_steps}: {label}", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)


@contextmanager
def _root_lock(root: Path) -> Iterator[None]:
    """Serialises commits and recoveries under one root: an ``flock`` on the folder itself (no file is left
    behind; the kernel releases it if the holder dies)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _writer_alive(parent: Path) -> bool:
    try:
        fd = os.open(parent / WRITER_LOCK, os.O_RDWR | os.O_NOFOLLOW)
    except FileNotFoundError:  # the writer finished (and removed its parent) meanwhile
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def _plain(name: object) -> bool:
    return (
        isinstance(name, str)
        and bool(name)
        and "/" not in name
        and "\x00" not in name
        and not name.startswith(".")
    )


def _roll_forward(root: Path, parent: Path, names: list[str]) -> None:
    (parent / "old").mkdir(exist_ok=True)
    for name in names:
        new = parent / "new" / name
        if not new.exists():  # already moved into place
            continue
        final = root / name
        if final.exists() or final.is_symlink():
            os.replace(final, parent / "old" / name)
            step(f"moved old {name} aside")
        os.replace(new, final)
        step(f"moved new {name} into place")


def _discard(parent: Path) -> None:
    """Remove a finished or abandoned parent: renamed to its ``.discard`` name first (one step), so a kill while
    its contents are removed leaves a folder ``recover`` recognises, never an unrecognisable half-removed one."""
    trash = parent.with_name(parent.name[: -len(SUFFIX)] + DISCARD)
    try:
        os.replace(parent, trash)
    except OSError:  # already moved or removed by a concurrent recover
        return
    step("renamed the temporary parent for removal")
    shutil.rmtree(trash, ignore_errors=True)


def _leftovers(root: Path) -> list[Path]:
    """Hidden folders this module made that nothing will finish: ``.discard`` folders (a kill while one was being
    removed) and ``.pending`` folders a writer was killed in before it had locked them (no ``writer.lock``, older
    than a minute). Only real folders named ``.<label>.<8 random characters>.pending|discard``."""
    found = []
    for p in sorted(root.iterdir()):
        if not _MADE_NAME.match(p.name) or p.is_symlink() or not p.is_dir():
            continue
        never_started = not (p / WRITER_LOCK).exists() and time.time() - p.stat().st_mtime > _STARTING_S
        if p.name.endswith(DISCARD) or never_started:
            found.append(p)
    return found


def pending(root: Path) -> list[Path]:
    """This module's temporary parents under ``root``: hidden ``*.pending`` folders holding a regular ``writer.lock``
    and a ``new/`` folder. Anything else (a user's own hidden folder, a symlink) is never touched."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = []
    for p in sorted(root.iterdir()):
        if not (p.name.startswith(".") and p.name.endswith(SUFFIX)) or p.is_symlink() or not p.is_dir():
            continue
        lock, new = p / WRITER_LOCK, p / "new"
        if lock.is_file() and not lock.is_symlink() and new.is_dir() and not new.is_symlink():
            found.append(p)
    return found


def recover(root: Path) -> list[str]:
    """Finish (journal written) or discard (no journal) every write under ``root`` whose writer is dead.

    Returns one line per write it finished or discarded, for the caller to report.
    """
    root = Path(root)
    done: list[str] = []
    if not root.is_dir():
        return done
    for leftover in _leftovers(root):
        shutil.rmtree(leftover, ignore_errors=True)
        if not leftover.exists():
            done.append(f"removed {leftover.name}, left by an interrupted clean-up")
    found = [p for p in pending(root) if not _writer_alive(p)]
    if not found:
        return done
    with _root_lock(root):
        for parent in found:
            if not parent.exists():  # another process recovered it meanwhile
                continue
            journal = parent / JOURNAL
            if journal.is_file():
                try:
                    names = json.loads(journal.read_text(encoding="utf-8"))["names"]
                except (OSError, ValueError, KeyError, TypeError):
                    names = None
                if not isinstance(names, list) or not all(_plain(n) for n in names):
                    done.append(f"left {parent.name} alone: its journal is damaged; remove it by hand")
                    continue
                _roll_forward(root, parent, names)
                done.append(f"completed the interrupted write of {', '.join(names)}")
            else:
                done.append(f"removed the unfinished write {parent.name}")
            _discard(parent)
    return done


@contextmanager
def _together(root: Path, names: list[str], label: str, folders: bool) -> Iterator[dict[str, Path]]:
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    recover(root)
    parent = Path(tempfile.mkdtemp(prefix=f".{label}.", suffix=SUFFIX, dir=root))
    lock = os.open(parent / WRITER_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        (parent / "new").mkdir()
        made = {name: parent / "new" / name for name in names}
        if folders:
            for folder in made.values():
                folder.mkdir()
        step("made the temporary folders")
        try:
            yield made
        except BaseException:
            _discard(parent)
            raise
        step("wrote every folder")
        with _root_lock(root):
            write_json_atomic(parent / JOURNAL, {"names": list(names)})
            step("wrote the journal")
            _roll_forward(root, parent, list(names))
            _discard(parent)
        step("removed the temporary parent")
    finally:
        os.close(lock)


@contextmanager
def folders_together(root: Path, names: list[str], label: str) -> Iterator[dict[str, Path]]:
    """Yield ``{name: empty temporary folder}``; when the block ends without an exception the folders replace
    ``root/<name>`` together (see the module docstring). An exception discards them and leaves ``root`` as it was."""
    with _together(root, names, label, folders=True) as made:
        yield made


@contextmanager
def files_together(root: Path, names: list[str], label: str) -> Iterator[dict[str, Path]]:
    """Yield ``{name: temporary file path}`` (not yet written); when the block ends without an exception the
    written files replace ``root/<name>`` together, like ``folders_together``. ``recover(root)`` before reading
    them finishes a write that was killed after its journal."""
    with _together(root, names, label, folders=False) as made:
        yield made


@contextmanager
def one_folder(final: Path) -> Iterator[Path]:
    """``folders_together`` for a single folder: yield its temporary folder; it replaces ``final`` on success."""
    final = Path(final)
    with folders_together(final.parent, [final.name], final.name) as folders:
        yield folders[final.name]

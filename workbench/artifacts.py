"""Artifact helpers: content hashes, atomic file writes (temp file, then rename; a killed writer's temp file is
removed by the next write into its folder; folders and file groups: ``workbench.journal``) and
the one reader of the workbench's JSON artifacts (format tag, version, a clear user error with a hint from the
caller), built on the validation layer's reader (``workbench.inputs.read``).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import math
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.inputs.problem import Where
from workbench.inputs.read import read_json


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


# A stored speech set's index (``workbench.speech.integrity``): stat fields and hashes of its files as last
# verified, rewritten whenever they move (a copied or restored set), so it is never part of the set's hash.
SET_INDEX = "index.json"


def sha256_tree(root: Path, skip: tuple[str, ...] = ()) -> str:
    """Hash of every regular file's relative path and content under ``root`` (order independent), leaving out
    the relative paths in ``skip``.

    Symlinks inside the tree are never followed: a linked file contributes its link text, not the content
    of whatever it points at (so a tree cannot make the workbench read files outside it)."""
    root = Path(root)
    entries: list[tuple[str, str]] = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
            path = Path(folder) / name
            rel = path.relative_to(root).as_posix()
            if rel in skip:
                continue
            if path.is_symlink():
                entries.append((rel, sha256_bytes(b"symlink:" + os.fsencode(os.readlink(path)))))
            elif path.is_file():  # regular files only: FIFOs and devices are never opened
                entries.append((rel, sha256_file(path)))
    digest = hashlib.sha256()
    for rel, file_hash in sorted(entries, key=lambda e: e[0].split("/")):  # the order Path sorting gave
        digest.update(rel.encode())
        digest.update(file_hash.encode())
    return digest.hexdigest()


# ``write_bytes_atomic``'s temporary files: ``.<final name>.<8 random characters>.tmp`` beside the final file
TEMP_NAME = re.compile(r"^\..+\.[a-z0-9_]{8}\.tmp$")
_FRESH_S = 5.0  # an empty temp file this young may belong to a writer that has not locked it yet


def current_umask() -> int:
    """The process's file-creation mask (read from /proc where it can be, so no other thread sees it changed)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def shared_mode(folder: bool = False) -> int:
    """The mode ``open()``/``mkdir()`` would give a new file (0666) or folder (0777) under the umask: what an
    artifact made through a private temporary (``mkstemp`` 0600, ``mkdtemp`` 0700) gets before it is renamed
    into place, so a team sharing a workspace reads each other's artifacts as their umask allows."""
    return (0o777 if folder else 0o666) & ~current_umask()


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder, then rename; the file gets the
    mode a plain ``open()`` would give it (``shared_mode``), not ``mkstemp``'s private 0600.

    The writer holds an ``flock`` on its temporary file until the rename, so a temp file nobody holds was left
    by a killed writer: every write first removes those in its folder (``remove_stale_temps``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(path.parent)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), shared_mode())
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
            os.replace(tmp, path)  # under the lock: a sweeper never takes a live writer's file
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def stale_temps(folder: Path, remove: bool = False) -> list[Path]:
    """The temporary files killed writers left in ``folder`` (not below it), removed when ``remove``.

    Only regular files named like ``write_bytes_atomic``'s temp files that no live process holds locked count
    (links and other names are never touched; an empty one younger than a few seconds is left, its writer may
    be about to lock it)."""
    found: list[Path] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return found
    for entry in entries:
        if not TEMP_NAME.match(entry.name) or not entry.is_file(follow_symlinks=False):
            continue
        try:
            fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held = os.fstat(fd)
            if held.st_size == 0 and time.time() - held.st_mtime < _FRESH_S:
                continue
            now = os.lstat(entry.path)
            if (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):  # still the file we locked
                if remove:
                    os.unlink(entry.path)
                found.append(Path(entry.path))
        except OSError:  # held by a live writer (BlockingIOError), or renamed/removed meanwhile
            continue
        finally:
            os.close(fd)
    return found


def remove_stale_temps(folder: Path) -> list[Path]:
    """Remove the temporary files killed writers left in ``folder`` (``stale_temps``); returns them."""
    return stale_temps(folder, remove=True)


def write_text_atomic(path: Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def non_finite_key(obj: Any, where: str = "") -> str | None:
    """The key path (``accuracy.candidates[0].wer``) of the first NaN or infinity in ``obj``; None when all finite."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return where or "(the value itself)"
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, (list, tuple)) else ()
    for key, value in items:
        found = non_finite_key(
            value, f"{where}[{key}]" if isinstance(key, int) else f"{where}.{key}".lstrip(".")
        )
        if found is not None:
            return found
    return None


def strict_json(obj: Any, **kwargs: Any) -> str:
    """``json.dumps`` that refuses NaN and infinities (strict JSON: no record holds one); the error names the key,
    so a bug that lets a non-finite number through fails loudly where it is written, not where it is read."""
    try:
        return json.dumps(obj, allow_nan=False, **kwargs)
    except ValueError as exc:
        key = non_finite_key(obj)
        if key is None:
            raise
        raise WorkbenchError(
            f"refusing to write a record with a non-finite number at {key} (strict JSON has no NaN or "
            "infinity): an input outside its domain got through; please report it with the command line"
        ) from exc


def json_text(obj: Any) -> str:
    """How the workbench writes a JSON artifact: indented, keys sorted, one final newline; strict (``strict_json``)."""
    return strict_json(obj, indent=2, sort_keys=True, default=str) + "\n"


def write_json_atomic(path: Path, obj: Any) -> None:
    write_text_atomic(path, json_text(obj))


def read_json_artifact(
    path: Path | str,
    tag: str,
    hint: str,
    *,
    what: str | None = None,
    key: str = "format",
    version: int | None = None,
) -> dict[str, Any]:
    """A JSON object written by the workbench whose ``key`` field is ``tag`` (and ``version``, when given).

    Anything else (missing, not a regular file, not UTF-8, not JSON — with the line —, another format or
    version) raises a WorkbenchError naming the file and ending with ``hint``, which says what to do.
    """
    path = Path(path)
    what = what or f"{tag} file"
    data = read_json(path, Where(f"{what} {path}", hint))
    found = data.get(key) if isinstance(data, dict) else None
    if found != tag:
        raise WorkbenchError(f"{path} is not a {what} ({key} {found!r}, expected {tag!r}); {hint}")
    if version is not None and data.get("version") != version:
        raise WorkbenchError(
            f"{path} is {what} version {data.get('version')!r}; this workbench reads version "
            f"{version}; {hint}"
        )
    return data

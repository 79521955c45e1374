"""Artifact helpers: content hashes, atomic writes (temp file or folder, then rename) and the one reader
of the workbench's JSON artifacts (format tag, version, a clear user error with a hint from the caller)."""

from __future__ import annotations

import ctypes
import errno
import hashlib
import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from workbench.errors import WorkbenchError


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def sha256_tree(root: Path) -> str:
    """Hash of every file's relative path and content under ``root`` (order independent)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(sha256_file(path).encode())
    return digest.hexdigest()


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder, then rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: Path, obj: Any) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def exchange_paths(a: Path, b: Path) -> bool:
    """Swap two existing paths atomically (Linux ``renameat2`` with ``RENAME_EXCHANGE``).

    Returns False where the C library or the file system cannot (the caller then falls back to two
    renames); other failures raise ``OSError``.
    """
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if renameat2(_AT_FDCWD, os.fsencode(str(a)), _AT_FDCWD, os.fsencode(str(b)), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))


@contextmanager
def atomic_directory(final: Path) -> Iterator[Path]:
    """Yield a temporary folder beside ``final``; on success it replaces ``final`` in one rename (an
    atomic swap where the system has one, so even a process killed at that moment leaves the old or the
    new folder at ``final``, never neither).

    On any exception the temporary folder is removed and an existing ``final`` is untouched.
    """
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent))
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if final.is_dir() and exchange_paths(tmp, final):  # one atomic swap: no moment without a set at ``final``
        shutil.rmtree(tmp, ignore_errors=True)  # ``tmp`` now holds the old contents
        return
    backup = None
    if final.exists():
        backup = final.with_name(f".{final.name}.old")
        shutil.rmtree(backup, ignore_errors=True)
        os.replace(final, backup)
    try:
        os.replace(tmp, final)
    except BaseException:
        if backup is not None:
            os.replace(backup, final)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if backup is not None:
        shutil.rmtree(backup, ignore_errors=True)


def read_json_artifact(path: Path | str, tag: str, hint: str, *, what: str | None = None, key: str = "format",
                       version: int | None = None) -> dict[str, Any]:
    """A JSON object written by the workbench whose ``key`` field is ``tag`` (and ``version``, when given).

    Anything else (missing file, unreadable, not JSON, not UTF-8, another format or version) raises a
    WorkbenchError naming the file and ending with ``hint``, which says what to do.
    """
    path = Path(path)
    what = what or f"{tag} file"
    if not path.is_file():
        raise WorkbenchError(f"{what} {path} does not exist; {hint}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # ValueError: bad JSON or bytes that are not UTF-8
        raise WorkbenchError(f"cannot read {what} {path}: not readable JSON ({exc}); {hint}") from exc
    found = data.get(key) if isinstance(data, dict) else None
    if found != tag:
        raise WorkbenchError(f"{path} is not a {what} ({key} {found!r}, expected {tag!r}); {hint}")
    if version is not None and data.get("version") != version:
        raise WorkbenchError(f"{path} is {what} version {data.get('version')!r}; this workbench reads version "
                             f"{version}; {hint}")
    return data

"""A stored set is trusted by its content, not by its card: links refused, files re-hashed, a fast index.

Every step that uses a stored set (``store.load_set``) checks that its folder, card, manifest, audio folder
and audio files are plain files and folders, not links (a link would be read from wherever it points while
the set's hash covers only the link), and recomputes the set's content hash from the manifest's bytes and
every listed audio file, then compares it with the card's. A set that differs is refused with one line
saying how to re-card it (``data recard``, when the change was meant) or rebuild it.

Re-hashing every clip on every use would cost a second per few hundred megabytes, so the set keeps an index
beside its files (``index.json``: each audio file's size, modification and change times, inode and
SHA-256, as last verified). A file whose stat fields all match the index takes its hash from there; a file
whose fields moved, or every file when the index is missing or unreadable, is hashed again, and the index is
brought up to date when the set verifies (best effort: a read-only set is still verified, only slower).
The change time (``ctime``) cannot be set by a user, so a file swapped in with its old modification time
restored (``cp -p``, ``touch -r``) is still hashed again.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path, PurePosixPath
from typing import Any

from workbench.artifacts import SET_INDEX, sha256_file, write_text_atomic
from workbench.errors import WorkbenchError

INDEX = SET_INDEX
INDEX_FORMAT = "workbench-set-index/1"
Stamp = list[int]  # size, mtime_ns, ctime_ns, inode


def recard_hint(name: str) -> str:
    """What to do with a set that changed after it was built."""
    return (
        f"if the change was meant, re-card it with 'python -m workbench data recard {name}'; "
        "otherwise rebuild it (data build / data import)"
    )


def content_hash(manifest_bytes: bytes, audio_hashes: list[str]) -> str:
    """The set's content hash: SHA-256 over the manifest's bytes, then each audio file's hash in manifest order."""
    digest = hashlib.sha256(manifest_bytes)
    for h in audio_hashes:
        digest.update(h.encode())
    return digest.hexdigest()


def refuse_link(path: Path, what: str) -> None:
    """A user error when ``path`` is a symbolic link (its target is never read)."""
    if path.is_symlink():
        raise WorkbenchError(
            f"{what} {path} is a link (to {os.readlink(path)}); a stored set holds its own files, so "
            "links are not followed: import the files (python -m workbench data import copies them in)"
        )


def _stamp(path: Path, set_name: str) -> Stamp:
    """``path``'s stat fields; refuses a link, a missing file or anything but a regular file."""
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        raise WorkbenchError(
            f"set {set_name}: audio file {path} listed in its manifest is missing; restore it, or remove its "
            f"line from the manifest and re-card the set ('python -m workbench data recard {set_name}'), "
            "or rebuild the set"
        ) from None
    if stat.S_ISLNK(st.st_mode):
        refuse_link(path, f"set {set_name}: audio file")
    if not stat.S_ISREG(st.st_mode):
        raise WorkbenchError(f"set {set_name}: audio {path} is not a regular file; rebuild the set")
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _check_folders(folder: Path, audio_paths: list[str]) -> None:
    """No folder between the set's folder and an audio file may be a link."""
    parents = {PurePosixPath(rel).parent for rel in audio_paths}
    checked: set[PurePosixPath] = set()
    for parent in parents:
        for part in [parent, *parent.parents]:
            if str(part) in ("", ".") or part in checked:
                continue
            checked.add(part)
            refuse_link(folder / part, f"set {folder.name}: folder")


def read_index(folder: Path) -> dict[str, list[Any]]:
    """The index's entries (relative audio path -> stamp + hash); empty when it is missing, a link or unreadable."""
    path = folder / INDEX
    try:
        if path.is_symlink():
            return {}
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if (
        not isinstance(data, dict)
        or data.get("format") != INDEX_FORMAT
        or not isinstance(data.get("audio"), dict)
    ):
        return {}
    return {k: v for k, v in data["audio"].items() if isinstance(v, list) and len(v) == 5}


def write_index(folder: Path, entries: dict[str, list[Any]]) -> bool:
    """Write the index (atomically); False when the folder cannot be written (the set is then hashed each time)."""
    text = json.dumps({"format": INDEX_FORMAT, "audio": entries}, sort_keys=True, separators=(",", ":"))
    try:
        write_text_atomic(folder / INDEX, text + "\n")
    except OSError:
        return False
    return True


def index_files(folder: Path, audio_hashes: dict[str, str]) -> None:
    """Record the stat fields of files just written with their known hashes (a set being made)."""
    write_index(folder, {rel: [*_stamp(folder / rel, folder.name), h] for rel, h in audio_hashes.items()})


def audio_hashes(folder: Path, audio_paths: list[str]) -> tuple[list[str], dict[str, list[Any]], bool]:
    """Each listed file's SHA-256 (from the index when its stat fields match), the refreshed index entries and
    whether the index needs writing (files hashed again, entries added or gone). Refuses links and missing
    files."""
    _check_folders(folder, audio_paths)
    index = read_index(folder)
    fresh: dict[str, list[Any]] = {}
    hashes: list[str] = []
    rehashed = 0
    for rel in audio_paths:
        if rel in fresh:  # a clip listed twice: its hash once
            hashes.append(fresh[rel][4])
            continue
        path = folder / rel
        now = _stamp(path, folder.name)
        known = index.get(rel)
        if known is not None and known[:4] == now and isinstance(known[4], str):
            digest = known[4]
        else:
            digest = sha256_file(path)
            rehashed += 1
            if _stamp(path, folder.name) != now:  # written while hashing: do not index it
                now = [-1, -1, -1, -1]
        fresh[rel] = [*now, digest]
        hashes.append(digest)
    return hashes, fresh, bool(rehashed) or set(fresh) != set(index)


def verify_content(folder: Path, manifest_bytes: bytes, audio_paths: list[str], card_hash: str) -> str:
    """The set's verified content hash; refuses (one line) when it is not the card's."""
    hashes, fresh, stale = audio_hashes(folder, audio_paths)
    actual = content_hash(manifest_bytes, hashes)
    if actual != card_hash:
        raise WorkbenchError(
            f"set {folder.name} changed after it was carded (its files hash to {actual[:12]}, its card says "
            f"{card_hash[:12]}: an edited manifest or transcript, swapped or added audio); {recard_hint(folder.name)}"
        )
    if stale:
        write_index(folder, fresh)
    return actual

"""Calibration caches under an engines folder: find, check and delete them without ever leaving that folder.

``caches`` lists regular ``*.cache`` files one folder below the root, never through a symlinked folder or
file and never in hidden (temporary) folders. A cache whose sidecar, histogram file or FP32 model is a
link out of the root is unusable and none of those files is read. ``delete_cache`` removes a cache and its
sidecars only when they are files (a link is removed, never its target) in a real folder inside the root.
``leftover_temps`` finds the temporary files killed writers left anywhere below the root (never through a
link). Used by ``python -m workbench cache list|prune``.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from workbench.artifact_paths import inside
from workbench.artifacts import sha256_file, stale_temps
from workbench.calibration import cache as cache_mod
from workbench.calibration.histograms import histogram_path
from workbench.errors import WorkbenchError


def caches(root: Path) -> list[Path]:
    """Regular ``*.cache`` files in the folders one level below ``root``. Symlinked folders and files are not
    followed, hidden (temporary) folders are skipped: nothing outside ``root`` is listed, read or deleted."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = []
    with os.scandir(root) as folders:
        for folder in folders:
            if folder.name.startswith(".") or not folder.is_dir(follow_symlinks=False):
                continue
            with os.scandir(folder.path) as files:
                found += [
                    Path(f.path)
                    for f in files
                    if f.name.endswith(".cache") and f.is_file(follow_symlinks=False)
                ]
    return sorted(found)


def recovery_files(path: Path) -> tuple[Path, Path, Path]:
    """The accuracy-recovery files beside a cache: its input means, its smoothed FP32 graph, its conv shifts."""
    from workbench.calibration.recovery import means_path, shifts_path, smoothed_path

    return means_path(path), smoothed_path(path), shifts_path(path)


def leads_outside(path: Path, root: Path) -> str | None:
    """A sidecar or the model beside a cache that is a link out of ``root`` (it is then never read)."""
    for item in (
        cache_mod.sidecar(path),
        histogram_path(path),
        *recovery_files(path),
        path.parent / "model.fp32.onnx",
    ):
        if item.exists() and inside(item, root) is None:
            return f"{item.name} beside it leads outside {root}; it is not read"
    return None


def load_inside(path: Path, root: Path) -> cache_mod.CalibrationCache:
    """The cache at ``path`` (``calibration.cache.load``) unless a file beside it leads out of ``root``."""
    reason = leads_outside(path, root)
    if reason:
        raise WorkbenchError(reason)
    return cache_mod.load(path)


def stale_reason(path: Path, root: Path) -> str | None:
    """Why a cache can no longer be used, or None when it still matches the ONNX model beside it."""
    try:
        cache = load_inside(path, root)
    except WorkbenchError as exc:
        return str(exc)
    onnx_path = path.parent / "model.fp32.onnx"
    if not onnx_path.is_file():
        return "its model.fp32.onnx is gone"
    if cache.keys.get("onnx") != sha256_file(onnx_path):
        return "model.fp32.onnx beside it has changed since calibration"
    return None


def delete_cache(path: Path, root: Path) -> None:
    """Delete a cache and its sidecars, each only when it is a file (or a link: the link goes, never its target)
    in a real folder inside ``root``."""
    real_root = Path(root).resolve()
    if path.parent.is_symlink() or not path.parent.resolve().is_relative_to(real_root):
        raise WorkbenchError(f"refusing to delete {path}: its folder is not inside {real_root}")
    for item in (path, cache_mod.sidecar(path), histogram_path(path), *recovery_files(path)):
        try:
            mode = item.lstat().st_mode
        except FileNotFoundError:
            continue
        if stat.S_ISREG(mode) or stat.S_ISLNK(mode):
            item.unlink()


def leftover_temps(root: Path, remove: bool = False) -> list[Path]:
    """Temporary files left by killed writes in ``root`` and every real, non-hidden folder below it (links are
    not followed), removed when ``remove`` (``workbench.artifacts.stale_temps``)."""
    root = Path(root)
    if not root.is_dir() or root.is_symlink():
        return []
    found: list[Path] = []
    for folder, dirs, _files in os.walk(root, followlinks=False):
        dirs[:] = sorted(
            d for d in dirs if not d.startswith(".") and not os.path.islink(os.path.join(folder, d))
        )
        found += stale_temps(Path(folder), remove=remove)
    return found

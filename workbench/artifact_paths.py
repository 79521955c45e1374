"""The one resolver every path named by a user or a record goes through: it must lie in the workspace's artifact folders.

The artifact root is the workspace, found like the CLI's (``workbench.workspace``): ``--workspace DIR``
(also ``streamlit run app.py -- --workspace DIR``), else ``$WORKBENCH_WORKSPACE`` (or the older
``$WORKBENCH_ARTIFACTS``), else the current directory; it holds ``calib_sets/``, ``engines/``,
``reports/`` and ``models/``. ``resolve`` turns a name or path from a query parameter, form field or record
(a report's provenance) into a real path and refuses anything that, after following every symlink, lies
outside the allowed artifact folder(s): ``..`` segments, absolute paths elsewhere, symlinks that lead out,
NUL bytes. Dashboard pages never open a path that did not come through it, and the library reads or hashes
a path a record names only through it (``workbench.report.record.verify_inputs``). ``inside`` is the same
check against one folder (``cache prune``, the search a sign-off may use).
"""

from __future__ import annotations

import os
from pathlib import Path

from workbench.errors import WorkbenchError
from workbench.workspace import AREAS, ENV_VAR, Workspace, resolve_workspace

ArtifactRoots = Workspace  # the dashboard's name for the workspace's folders
__all__ = [
    "AREAS",
    "ENV_VAR",
    "ArtifactRoots",
    "OutsideArtifacts",
    "artifact_roots",
    "display",
    "inside",
    "resolve",
]


def artifact_roots() -> ArtifactRoots:
    """The workspace, read now (not at import), so tests and servers can point it anywhere."""
    return resolve_workspace()


class OutsideArtifacts(WorkbenchError):
    """A path that is not inside the artifact folders the workbench may read."""


def resolve(
    value: str | os.PathLike[str],
    areas: tuple[str, ...] | str = AREAS,
    roots: ArtifactRoots | None = None,
    must_exist: bool = True,
) -> Path:
    """The real path of ``value`` if it lies inside one of ``areas``; raises ``OutsideArtifacts`` otherwise.

    A relative ``value`` is taken relative to the first area (so a set's name works as is). Symlinks
    are followed before the check, so a link inside an area that points elsewhere is refused too.
    """
    roots = roots or artifact_roots()
    areas = (areas,) if isinstance(areas, str) else tuple(areas)
    text = os.fspath(value)
    if not text or "\x00" in text:
        raise OutsideArtifacts(f"refused an empty or malformed path {text!r}")
    allowed = [roots.area(a).resolve() for a in areas]
    candidate = Path(text)
    if not candidate.is_absolute():
        candidate = roots.area(areas[0]) / candidate
    refusal = (
        f"refused {text!r}: only files under {', '.join(a + '/' for a in areas)} of {roots.root} are read "
        f"(--workspace or ${ENV_VAR} names the folder holding them)"
    )
    lexical = Path(os.path.normpath(candidate))  # '..' escapes are refused before touching the file system
    if not any(_inside(lexical, base) for base in allowed + [roots.area(a) for a in areas]):
        raise OutsideArtifacts(refusal)
    try:
        real = candidate.resolve(strict=must_exist)
    except (OSError, RuntimeError) as exc:  # missing, or a symlink loop
        raise OutsideArtifacts(f"{text!r} does not exist under {', '.join(areas)}/") from exc
    if not any(_inside(real, base) for base in allowed):  # after following every symlink
        raise OutsideArtifacts(refusal)
    return real


def _inside(path: Path, base: Path) -> bool:
    return path == base or path.is_relative_to(base)


def inside(path: str | os.PathLike[str], base: Path) -> Path | None:
    """The real path of ``path`` when it exists and lies inside ``base`` after following every symlink, else None."""
    text = os.fspath(path)
    if not text or "\x00" in text:
        return None
    try:
        real = Path(text).resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    return real if _inside(real, Path(base).resolve()) else None


def display(path: Path, roots: ArtifactRoots | None = None) -> str:
    """``path`` relative to the artifact root when inside it (shorter labels), else as is."""
    roots = roots or artifact_roots()
    try:
        return path.resolve().relative_to(roots.root.resolve()).as_posix()
    except ValueError:
        return str(path)

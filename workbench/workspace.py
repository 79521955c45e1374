"""The workspace: the folder where the user's artifacts live (``calib_sets/``, ``engines/``, ``reports/``,
and ``models/`` for their own model folders).

It is chosen, first match wins, by ``--workspace DIR`` (a global CLI option), by ``$WORKBENCH_WORKSPACE``
(``$WORKBENCH_ARTIFACTS``, the dashboard's older name, is still read), or else it is the current directory.
Run from the top-level folder of a clone, the clone's own ``calib_sets/`` ``engines/`` ``reports/`` are the
workspace. Nothing is ever written under the installed package.

CLI verbs declare artifact-folder options with ``area_default(area)``; ``fill_defaults`` replaces those
placeholders once the workspace is known, so explicit ``--root``/``--engines``/... flags still win.
``active`` makes the CLI's workspace the default of every library call made while a verb runs.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from workbench.errors import WorkbenchError

ENV_VAR = "WORKBENCH_WORKSPACE"
LEGACY_ENV_VAR = "WORKBENCH_ARTIFACTS"
AREAS: tuple[str, ...] = ("calib_sets", "engines", "reports", "models")

_ACTIVE: ContextVar[Workspace | None] = ContextVar("workbench_workspace", default=None)


@dataclass(frozen=True)
class Workspace:
    """The artifact folders under one root."""

    root: Path

    def area(self, name: str) -> Path:
        if name not in AREAS:
            raise ValueError(f"unknown artifact area {name!r}")
        return self.root / name

    @property
    def calib_sets(self) -> Path:
        return self.area("calib_sets")

    @property
    def engines(self) -> Path:
        return self.area("engines")

    @property
    def reports(self) -> Path:
        return self.area("reports")

    @property
    def models(self) -> Path:
        return self.area("models")


def resolve_workspace(
    explicit: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None
) -> Workspace:
    """``explicit`` > the workspace a running CLI verb made active > ``$WORKBENCH_WORKSPACE`` >
    ``$WORKBENCH_ARTIFACTS`` > the current directory. Read at call time, never at import."""
    if explicit is None or os.fspath(explicit) == "":
        active = _ACTIVE.get()
        if active is not None:
            return active
        env = os.environ if environ is None else environ
        explicit = env.get(ENV_VAR) or env.get(LEGACY_ENV_VAR) or None
    root = Path(explicit).expanduser() if explicit is not None else Path.cwd()
    root = root.resolve()
    if root.exists() and not root.is_dir():
        raise WorkbenchError(
            f"workspace {root} is a file, not a folder; give --workspace a folder (or set {ENV_VAR} to one)"
        )
    return Workspace(root)


def area_path(area: str, given: str | os.PathLike[str] | None = None) -> Path:
    """``given`` when set, else ``area`` of the current workspace (library functions' default roots)."""
    return Path(given) if given is not None else resolve_workspace().area(area)


def default_area(area: str) -> Callable[[], Path]:
    """A dataclass ``default_factory``: that folder of the current workspace when the inputs are made."""
    if area not in AREAS:
        raise ValueError(f"unknown artifact area {area!r}")
    return lambda: resolve_workspace().area(area)


@contextmanager
def active(workspace: Workspace) -> Iterator[Workspace]:
    """Make ``workspace`` the default of ``resolve_workspace`` while a verb runs (restored afterwards)."""
    token = _ACTIVE.set(workspace)
    try:
        yield workspace
    finally:
        _ACTIVE.reset(token)


@dataclass(frozen=True)
class AreaDefault:
    """An argparse default standing for a workspace folder; ``fill_defaults`` swaps in the real path."""

    area: str

    def __str__(self) -> str:
        return f"<workspace>/{self.area}"


def area_default(area: str) -> AreaDefault:
    """The default of an option naming an artifact folder (``--root``, ``--engines``, ...)."""
    if area not in AREAS:
        raise ValueError(f"unknown artifact area {area!r}")
    return AreaDefault(area)


def add_workspace_option(parser: argparse.ArgumentParser, top_level: bool) -> None:
    """``--workspace DIR``; on verbs the default is suppressed so a value given before the verb survives."""
    parser.add_argument(
        "--workspace",
        metavar="DIR",
        default=None if top_level else argparse.SUPPRESS,
        help=f"folder for calib_sets/, engines/ and reports/ (default: ${ENV_VAR}, "
        "else the current directory)"
        if top_level
        else argparse.SUPPRESS,
    )


def fill_defaults(args: argparse.Namespace, workspace: Workspace) -> argparse.Namespace:
    """Replace every ``AreaDefault`` left in ``args`` by that folder of ``workspace``; ``args.workspace``
    becomes the ``Workspace``."""
    for key, value in vars(args).items():
        if isinstance(value, AreaDefault):
            setattr(args, key, workspace.area(value.area))
    args.workspace = workspace
    return args

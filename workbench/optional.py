"""One helper for heavy optional imports, so that every module imports with them absent."""

from __future__ import annotations

import importlib
from types import ModuleType

from workbench.errors import WorkbenchError


def import_optional(module: str, install_hint: str) -> ModuleType:
    """Import ``module`` or raise a WorkbenchError that says what to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise WorkbenchError(
            f"this needs the Python module '{module}', which is not installed ({exc}). "
            f"Install it with: {install_hint}"
        ) from exc


def try_import(module: str) -> tuple[ModuleType | None, str | None]:
    """``(module, None)`` when it imports, else ``(None, why)``: not installed, or installed but broken
    (a missing shared library raises OSError, some native packages RuntimeError)."""
    try:
        return importlib.import_module(module), None
    except ImportError as exc:
        return None, f"not installed ({exc})" if exc.name != module else "not installed"
    except (OSError, RuntimeError) as exc:
        return None, f"installed but does not import: {exc}"


def has_module(module: str) -> bool:
    return try_import(module)[0] is not None

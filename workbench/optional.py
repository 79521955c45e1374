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


def has_module(module: str) -> bool:
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True

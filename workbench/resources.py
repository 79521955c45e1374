"""Files shipped inside the package, as real paths: the demo model (``workbench/demo_model/``).

They are read through ``importlib.resources``, so they are found wherever the package is installed
(wheel, editable install, clone). From an ordinary install ``as_file`` hands back the files in place;
from a zipped install they are extracted once into a temporary folder removed when the process exits.
"""

from __future__ import annotations

import atexit
import sys
import tempfile
from contextlib import ExitStack
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from workbench.config import DEMO_MODEL_RESOURCE

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

_STACK = ExitStack()
atexit.register(_STACK.close)


def _extract(folder: Traversable) -> Path:
    """Copy a resource folder that is not on the file system (zip import, Python < 3.12) to a temp folder."""
    target = Path(_STACK.enter_context(tempfile.TemporaryDirectory(prefix="workbench-res-")))
    for entry in folder.iterdir():
        if entry.is_file():
            (target / entry.name).write_bytes(entry.read_bytes())
    return target


@cache
def resource_dir(name: str) -> Path:
    """A folder of package data as a real path that stays valid for the life of the process."""
    folder = resources.files("workbench").joinpath(name)
    if isinstance(folder, Path) or sys.version_info >= (3, 12):
        return Path(_STACK.enter_context(resources.as_file(folder)))
    return _extract(folder)


def demo_model_dir() -> Path:
    """The shipped demo model's Hugging Face folder (config, vocab, safetensors weights, model card)."""
    return resource_dir(DEMO_MODEL_RESOURCE)

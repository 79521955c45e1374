"""A job and its typed inputs as a JSON file, so a job can run in another process (``python -m workbench.jobs``).

The dashboard's Run page writes ``{"format": "workbench-job/1", "job": <name>, "inputs": {...}}`` into the
job's folder and starts ``python -m workbench.jobs <that file>``. Inputs are encoded field by field
(paths as strings, nested dataclasses as objects) and decoded with the input dataclass's type hints,
so the file is readable and the job gets exactly the types it declares.
"""

from __future__ import annotations

import dataclasses
import importlib
import types
import typing
from pathlib import Path
from types import ModuleType
from typing import Any

from workbench.artifacts import read_json_artifact, write_json_atomic
from workbench.errors import WorkbenchError

FORMAT = "workbench-job/1"
# job name -> (module, input dataclass)
JOBS: dict[str, tuple[str, str]] = {
    "sets": ("workbench.jobs.sets", "SetsInputs"),
    "import_set": ("workbench.jobs.import_set", "ImportInputs"),
    "calibrate": ("workbench.jobs.calibrate", "CalibrateInputs"),
    "compare": ("workbench.jobs.compare", "CompareInputs"),
    "search": ("workbench.jobs.search", "SearchInputs"),
    "signoff": ("workbench.jobs.signoff", "SignoffInputs"),
    "build": ("workbench.jobs.build", "BuildInputs"),
}


def encode(value: Any) -> Any:
    """Plain JSON types: dataclasses field by field, paths as strings, tuples as lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    return value


def decode(hint: Any, value: Any) -> Any:
    """``value`` (plain JSON) as the type ``hint`` declares; unions prefer ``str`` (names or paths) as given."""
    if value is None:
        return None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        if isinstance(value, str) and str in options:
            return value
        return decode(
            next((o for o in options if not isinstance(o, type) or not issubclass(o, str)), options[0]), value
        )
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        hints = typing.get_type_hints(hint)
        return hint(
            **{
                f.name: decode(hints[f.name], value[f.name])
                for f in dataclasses.fields(hint)
                if f.init and f.name in value
            }
        )
    if hint is Path:
        return Path(value)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(decode(args[0], v) for v in value)
        return tuple(decode(a, v) for a, v in zip(args, value))
    if origin is list:
        return [decode(args[0], v) for v in value]
    if hint is float:
        return float(value)
    return value


def job_of(inputs: Any) -> str:
    """The job name whose input dataclass ``inputs`` is."""
    for name, (module, cls) in JOBS.items():
        if type(inputs).__module__ == module and type(inputs).__name__ == cls:
            return name
    raise TypeError(f"{type(inputs).__name__} is not a job's input dataclass")


def check(inputs: Any) -> None:
    """Run the job's own input checks (its ``check(inputs)``: what its ``run`` checks before any model
    work; the CLI verb runs them through ``run``) on ``inputs``; a user error raises ``WorkbenchError``."""
    module = importlib.import_module(JOBS[job_of(inputs)][0])
    job_check = getattr(module, "check", None)
    if job_check is not None:
        job_check(inputs)


def write_job(path: Path, inputs: Any) -> str:
    """Write the job file for ``inputs`` atomically; returns the job's name."""
    name = job_of(inputs)
    write_json_atomic(path, {"format": FORMAT, "job": name, "inputs": encode(inputs)})
    return name


def read_job(path: Path) -> tuple[ModuleType, Any]:
    """The job's module and its decoded inputs; a file that is not a job file is a user error."""
    hint = "start the job again from the dashboard's Run page"
    data = read_json_artifact(path, FORMAT, hint, what="job file")
    if data.get("job") not in JOBS or not isinstance(data.get("inputs"), dict):
        raise WorkbenchError(f"job file {path} names no known job ({data.get('job')!r}); {hint}")
    module_name, cls_name = JOBS[data["job"]]
    module = importlib.import_module(module_name)
    return module, decode(getattr(module, cls_name), data["inputs"])

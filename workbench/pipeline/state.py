"""What a run remembers between runs: per step, the hash of its inputs and its finished result.

``<reports>/<project>/run-state.json`` holds one entry per step: ``inputs`` (the sha256 of the step's inputs as
canonical JSON, upstream results' hashes included), ``result`` (plain JSON: paths and hashes) and ``files`` (the
sha256 of every file the result names). A step is reused only when its inputs' hash matches and every file is
still there with that hash; otherwise it runs and its entry is replaced. Written atomically after each step, so a
run killed midway keeps what finished.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.artifacts import sha256_file, write_json_atomic
from workbench.errors import WorkbenchError

STATE_NAME = "run-state.json"
STATE_FORMAT = "workbench-run-state/1"


def digest(value: Any) -> str:
    """sha256 of ``value`` as canonical JSON (sorted keys, no NaN; paths as text)."""
    text = json.dumps(value, sort_keys=True, default=str, allow_nan=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class StepEntry:
    inputs: str
    result: dict[str, Any]
    files: dict[str, str] = field(default_factory=dict)  # path -> sha256

    @property
    def hash(self) -> str:
        """The result's hash: what later steps' inputs name."""
        return digest({"result": self.result, "files": self.files})

    def intact(self) -> bool:
        return all(Path(p).is_file() and sha256_file(Path(p)) == h for p, h in self.files.items())


@dataclass
class RunState:
    path: Path
    steps: dict[str, StepEntry] = field(default_factory=dict)

    @classmethod
    def load(cls, folder: Path) -> RunState:
        path = Path(folder) / STATE_NAME
        if not path.is_file():
            return cls(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            return cls(path)  # a damaged state only costs a full run
        if not isinstance(data, dict) or data.get("format") != STATE_FORMAT:
            return cls(path)
        steps = {}
        for name, entry in (data.get("steps") or {}).items():
            try:
                steps[name] = StepEntry(
                    str(entry["inputs"]), dict(entry["result"]), dict(entry.get("files", {}))
                )
            except (KeyError, TypeError, ValueError):
                continue
        return cls(path, steps)

    def reusable(self, name: str, inputs: str) -> StepEntry | None:
        entry = self.steps.get(name)
        return entry if entry is not None and entry.inputs == inputs and entry.intact() else None

    def keep(self, name: str, inputs: str, result: dict[str, Any], files: list[Path]) -> StepEntry:
        missing = [str(p) for p in files if not Path(p).is_file()]
        if missing:
            raise WorkbenchError(f"step {name} finished without its files {missing}")
        entry = StepEntry(inputs, result, {str(Path(p)): sha256_file(Path(p)) for p in files})
        self.steps[name] = entry
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(
            self.path,
            {
                "format": STATE_FORMAT,
                "steps": {
                    n: {"inputs": e.inputs, "result": e.result, "files": e.files}
                    for n, e in self.steps.items()
                },
            },
        )
        return entry

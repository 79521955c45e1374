"""Project runs from the dashboard: the ``workbench.toml`` files of the workspace, and ``workbench run`` on one of
them started in the background (``background.launch``: ``python -m workbench run --config FILE``).

The project file is read and checked first (``project.file.load_project``, what the verb does first): a bad one is
one error and nothing starts. The job's ``inputs.json`` names the project file, the project and where the run's
``summary.md`` goes (``reports/<project>/summary.md``); the Run page shows that summary and what the exit status
means once the run has ended.
"""

from __future__ import annotations

import json
from pathlib import Path

from workbench.artifacts import write_json_atomic
from workbench.config import RUN_NOTHING_PASSES
from workbench.dashboard import background
from workbench.dashboard.paths import AREAS, ArtifactRoots, resolve
from workbench.errors import WorkbenchError
from workbench.project.file import load_project

KIND = "run"
FORMAT = "workbench-run/1"
PROJECT_FILE = "workbench.toml"


def project_files(roots: ArtifactRoots) -> list[Path]:
    """The project files of the workspace: ``workbench.toml`` at its root and in the folders one or two levels
    below it, outside the artifact folders."""
    root = roots.root
    found = [root / PROJECT_FILE, *root.glob(f"*/{PROJECT_FILE}"), *root.glob(f"*/*/{PROJECT_FILE}")]
    return sorted(
        p for p in found if p.is_file() and p.relative_to(root).parts[0] not in AREAS and not p.is_symlink()
    )


def start_run(config: Path, roots: ArtifactRoots, max_jobs: int) -> background.Job:
    """Check the project file ``config`` and start ``workbench run`` on it in the background (at most ``max_jobs``
    jobs at once); a bad project file or the job limit raises ``WorkbenchError`` and starts nothing."""
    project = load_project(Path(config))
    summary = roots.reports / project.name / "summary.md"

    def write(folder: Path) -> list[str]:
        inputs = {"config": str(project.path), "project": project.name, "summary": str(summary)}
        write_json_atomic(folder / background.INPUTS, {"format": FORMAT, "inputs": inputs})
        return ["-m", "workbench", "run", "--config", str(project.path)]

    return background.launch(KIND, write, roots, max_jobs)


def summary_of(job: background.Job, roots: ArtifactRoots) -> str | None:
    """The run's ``summary.md`` (read through the resolver), None when the run wrote none (yet)."""
    try:
        inputs = json.loads(
            resolve(job.folder / background.INPUTS, "reports", roots).read_text(encoding="utf-8")
        )
        path = resolve(Path(inputs["inputs"]["summary"]), "reports", roots)
        return path.read_text(encoding="utf-8") if path.is_file() else None
    except (OSError, ValueError, KeyError, TypeError, WorkbenchError):
        return None


def exit_words(returncode: int) -> str:
    """What ``workbench run``'s exit status means."""
    if returncode == 0:
        return "exit status 0: a candidate besides the FP32 baseline passes on every target"
    if returncode == RUN_NOTHING_PASSES:
        return f"exit status {returncode}: on a target no candidate besides the FP32 baseline passes"
    if returncode == 1:
        return "exit status 1: a user error (see the error line)"
    return f"exit status {returncode}: the run did not finish"

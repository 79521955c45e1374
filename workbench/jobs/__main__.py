"""``python -m workbench.jobs JOB.json``: run one job from a job file (``workbench.jobs.codec``) and print its result.

The dashboard's Run page starts jobs this way in the background; user errors are one ``error:`` line and
exit status 1, as on the CLI.
"""

from __future__ import annotations

import sys
from pathlib import Path

from workbench.console import show_progress
from workbench.errors import exit_status
from workbench.jobs import codec


def run_file(path: Path) -> int:
    module, inputs = codec.read_job(path)
    for line in module.run(inputs).lines():
        print(line, flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m workbench.jobs JOB.json", file=sys.stderr)
        return 2
    show_progress()  # the job's log messages go to the job's log, as on the CLI
    return exit_status(lambda: run_file(Path(args[0])))


if __name__ == "__main__":
    sys.exit(main())

"""The one exception type for user-facing errors, and how an entry point reports it.

Anything the user can fix (bad input, missing artifact, wrong option) raises ``WorkbenchError``
with a message that says what to do. ``exit_status`` (used by the CLI and by ``python -m
workbench.jobs``) prints it as one ``error:`` line and returns exit status 1, no traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Callable


class WorkbenchError(Exception):
    """An error the user can act on; its message says what went wrong and what to do."""


def exit_status(run: Callable[[], int | None]) -> int:
    """Run an entry point: its status (0 for None); a WorkbenchError is one ``error:`` line and status 1."""
    try:
        return int(run() or 0)
    except WorkbenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(
            "interrupted; artifacts written so far are complete, partial ones were discarded", file=sys.stderr
        )
        return 130

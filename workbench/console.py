"""Where a workbench process's progress lines go.

Library modules log through ``logging.getLogger(__name__)`` and take no ``log`` callback; an entry point (the
CLI, ``python -m workbench.jobs``, a benchmark script) calls ``show_progress`` once, and from then on every
message of level INFO or above is one line on standard output, as ``print`` would write it. A library user
who never calls it sees nothing unless their own logging configuration shows the ``workbench`` loggers.
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO

LOGGER = "workbench"


class ConsoleHandler(logging.Handler):
    """Each record's message as one line, ``prefix`` first, on ``stream`` (None: the standard output of the
    moment, so a test's captured output or a redirected stream gets it)."""

    def __init__(self, prefix: str = "", stream: TextIO | None = None) -> None:
        super().__init__(logging.INFO)
        self.prefix = prefix
        self.stream = stream

    def emit(self, record: logging.LogRecord) -> None:
        try:
            print(self.prefix + self.format(record), file=self.stream or sys.stdout, flush=True)
        except Exception:
            self.handleError(record)


def show_progress(prefix: str = "", stream: TextIO | None = None) -> None:
    """Show the workbench's messages (INFO and above) as lines; calling it again replaces the earlier handler."""
    logger = logging.getLogger(LOGGER)
    for handler in [h for h in logger.handlers if isinstance(h, ConsoleHandler)]:
        logger.removeHandler(handler)
    logger.addHandler(ConsoleHandler(prefix, stream))
    logger.setLevel(logging.INFO)

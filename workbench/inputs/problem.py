"""Where a problem is in a user's file, and the one exception that reports it.

``Where("gate file gates.toml", "fix the value")`` names the file and the fix; ``.key("max_latency_ms")``,
``.line(3)`` and ``.index(2)`` narrow it down; ``.fail("must be a number")`` makes the ``BadInput``
whose message reads ``gate file gates.toml, key 'max_latency_ms': must be a number; fix the value``.
"""

from __future__ import annotations

from dataclasses import dataclass

from workbench.errors import WorkbenchError


class BadInput(WorkbenchError):
    """A user-supplied file that cannot be used as it is; the message names the file, the place and the fix."""

    def __init__(self, where: Where, problem: str) -> None:
        self.where = where
        self.problem = problem
        super().__init__(f"{where.label()}: {problem}; {where.fix}")


@dataclass(frozen=True)
class Where:
    """A file (``what``, e.g. ``"manifest data.jsonl"``), a place inside it (``at``) and what to do about a problem."""

    what: str
    fix: str
    at: str = ""

    def label(self) -> str:
        return f"{self.what}, {self.at}" if self.at else self.what

    def key(self, name: object) -> Where:
        step = f"key {name!r}"
        return Where(self.what, self.fix, f"{self.at} {step}".strip() if self.at else step)

    def index(self, number: int) -> Where:
        step = f"item {number}"
        return Where(self.what, self.fix, f"{self.at} {step}".strip() if self.at else step)

    def line(self, number: int) -> Where:
        return Where(self.what, self.fix, f"line {number}")

    def fixing(self, fix: str) -> Where:
        return Where(self.what, fix, self.at)

    def fail(self, problem: str) -> BadInput:
        return BadInput(self, problem)

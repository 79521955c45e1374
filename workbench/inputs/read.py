"""Bytes -> text -> JSON for user files: regular files only, strict UTF-8, positions in every error.

A UTF-8 byte-order mark is accepted (editors on Windows write one). Errors name the line of the first
byte that is not UTF-8, or the line and column where JSON stops parsing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from workbench.inputs.problem import Where

UTF8_FIX = "save it as UTF-8 (e.g. iconv -f latin1 -t utf-8 OLD > NEW)"


def read_bytes(path: Path, where: Where) -> bytes:
    """The file's bytes; a missing path, a folder or a special file (FIFO, device) is a ``BadInput``."""
    path = Path(path)
    if not path.exists():
        raise where.fail("does not exist")
    if not path.is_file():  # folders, FIFOs, devices: never read (a FIFO would block)
        raise where.fail("is not a regular file")
    try:
        return path.read_bytes()
    except OSError as exc:
        raise where.fail(f"cannot be read ({exc.strerror or exc})") from exc


def decode_utf8(data: bytes, where: Where) -> str:
    """Strict UTF-8 (an optional byte-order mark is dropped); names the line of the first bad byte."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise where.line(line).fail(
            f"not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start}): {UTF8_FIX}"
        ) from exc


def read_text(path: Path, where: Where) -> str:
    return decode_utf8(read_bytes(path, where), where)


def parse_json(text: str, where: Where, name_line: bool = True) -> Any:
    """``text`` as JSON; an error names its line (unless ``name_line`` is False: ``where`` names it already)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        at = where.line(exc.lineno) if name_line else where
        raise at.fail(f"not valid JSON ({exc.msg} at column {exc.colno})") from exc
    except RecursionError as exc:
        raise where.fail("not usable JSON (nested too deeply)") from exc


def read_json(path: Path, where: Where) -> Any:
    """A JSON file's value (any type; check its shape with ``workbench.inputs.shape``)."""
    return parse_json(read_text(path, where), where)

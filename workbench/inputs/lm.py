"""Language model files for beam search: an ARPA text file or a KenLM binary, recognised by its first bytes.

Checked when the decoder settings are (before any model work): a path that is not a regular readable file, or
a file that is neither ARPA (``\\data\\`` after optional blank lines) nor a KenLM binary (KenLM's magic line),
is one error line saying which file and what to pass instead.
"""

from __future__ import annotations

from pathlib import Path

from workbench.errors import WorkbenchError

KENLM_MAGIC = b"mmap lm http://kheafield.com/code"  # the first bytes of every KenLM binary
ARPA_HEAD = b"\\data\\"
LM_FIX = (
    "pass an ARPA file (its first line \\data\\) or a KenLM binary (build_binary), e.g. the one the demo writes "
    "(engines/demo-lm.arpa; workbench.evaluate.ngram.build_arpa writes one from sentences)"
)


def check_lm_file(path: Path) -> None:
    """Refuse, in one line, an ``--lm`` that is missing, not a regular file, unreadable, or no language model."""
    if not path.exists():
        raise WorkbenchError(f"language model {path} does not exist; {LM_FIX}")
    if not path.is_file():
        raise WorkbenchError(f"language model {path} is not a regular file; {LM_FIX}")
    try:
        with path.open("rb") as handle:
            head = handle.read(4096)
    except OSError as exc:
        raise WorkbenchError(f"language model {path} cannot be read ({exc.strerror or exc})") from exc
    if head.startswith(KENLM_MAGIC) or head.lstrip(b"\xef\xbb\xbf").lstrip().startswith(ARPA_HEAD):
        return
    raise WorkbenchError(f"language model {path} is neither an ARPA file nor a KenLM binary; {LM_FIX}")

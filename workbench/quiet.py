"""Third-party chatter kept off the console, in one place.

The workbench prints its own lines and progress bars; the libraries it drives have their own habits: ONNX
Runtime's C++ logger warns about session options it merges (``Config with key ... already exists``), KenLM
prints ``Reading <file>`` and a bar of stars when it loads a language model, transformers shows a "Loading
weights" bar and warnings while it loads a model, and Python warnings from libraries (deprecations) land on
stderr. ``quiet_console()`` (called once at CLI start-up) sets each library's own switches;
``native_output_silenced()`` closes stdout/stderr at the file-descriptor level around a native call that prints
with no switch (KenLM). Anything that matters to the user is said in the workbench's words where it happens.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import warnings
from collections.abc import Iterator

# environment switches the libraries read when they are imported (set before any import of them)
QUIET_ENVIRONMENT: dict[str, str] = {
    "TRANSFORMERS_VERBOSITY": "error",  # transformers' logger: errors only
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",  # huggingface_hub's download/loading bars
    "TF_CPP_MIN_LOG_LEVEL": "3",
    "TOKENIZERS_PARALLELISM": "false",  # the tokenizers fork warning
}
QUIET_LOGGERS: tuple[str, ...] = (
    "transformers",
    "huggingface_hub",
    "datasets",
    "torch",
    "numba",
    "matplotlib",
)


def quiet_console() -> None:
    """Set every third-party switch that keeps its output off the console (idempotent)."""
    for key, value in QUIET_ENVIRONMENT.items():
        os.environ.setdefault(key, value)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=PendingDeprecationWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", module=r"(transformers|torch|onnx|onnxruntime|streamlit)(\..*)?")
    onnxruntime = sys.modules.get("onnxruntime")  # None also where an import of it was blocked
    if onnxruntime is not None:  # the sessions' own options say errors only (backends/onnxruntime.py)
        onnxruntime.set_default_logger_severity(3)
    if sys.modules.get("transformers") is not None:
        transformers_quiet()


_BARS = {"on": True}


def progress_bars(on: bool) -> None:
    """Progress bars on or off for this process (a verb's ``--no-progress``): the workbench's bars read
    ``bars_on()``, transformers' loading bar is switched off with them."""
    _BARS["on"] = on
    if not on:
        transformers_quiet()


def bars_on() -> bool:
    """Whether this process shows progress bars (``progress_bars``)."""
    return _BARS["on"]


def transformers_quiet() -> None:
    """transformers' own logger at errors only and its progress bars off ("Loading weights")."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        return
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


@contextlib.contextmanager
def native_output_silenced() -> Iterator[None]:
    """stdout and stderr (file descriptors 1 and 2) sent to /dev/null for the duration: for native libraries
    that print with no switch. Python's own buffers are flushed first, so nothing of the workbench's is lost."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, devnull):
            os.close(fd)

"""Command-line interface: one sub-command per verb.

``build_parser`` is separate from ``main`` so it can be tested. User errors raise WorkbenchError,
which ``main`` prints as one line and turns into exit status 1 (no traceback).
Verbs register themselves through ``COMMANDS``: each module exposes ``add_arguments`` and ``run``.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Callable, Sequence

from workbench import __version__
from workbench.errors import exit_status

# verb -> (module implementing it, one-line purpose). Modules import lazily, so --help is fast
# and optional back-ends (TensorRT, Streamlit) are never needed to start the CLI.
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("workbench.commands.demo", "run the whole job on the embedded defaults"),
    "data": ("workbench.commands.data", "build and inspect balanced calibration/evaluation speech sets"),
    "calibrate": ("workbench.commands.calibrate", "export ONNX, calibrate ranges, write cache + INT8 Q/DQ model"),
    "cache": ("workbench.commands.cache", "list, show or prune calibration caches"),
    "build": ("workbench.commands.build", "build a cached TensorRT engine from an ONNX model"),
    "signoff": ("workbench.commands.signoff", "judge candidates on WER and latency; write the sign-off report"),
    "report": ("workbench.commands.report", "re-render a sign-off report from its JSON record"),
    "compare": ("workbench.commands.compare", "per-layer FP32 vs INT8 table and per-group sensitivity ranking"),
    "search": ("workbench.commands.search", "find the mixed INT8/FP16 plan with most INT8 within a WER budget"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m workbench",
        description="Precision sign-off workbench for Wav2Vec2-style CTC speech models.",
    )
    parser.add_argument("--version", action="version", version=f"workbench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="<command>")
    for verb, (module_name, purpose) in COMMANDS.items():
        cmd = sub.add_parser(verb, help=purpose, description=purpose)
        module = importlib.import_module(module_name)
        module.add_arguments(cmd)
        cmd.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    run: Callable[[argparse.Namespace], int | None] | None = getattr(args, "_run", None)
    if run is None:
        parser.print_help()
        return 0
    return exit_status(lambda: run(args))

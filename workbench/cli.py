"""Command-line interface: one sub-command per verb.

``build_parser`` is separate from ``main`` so it can be tested. User errors raise WorkbenchError,
which ``main`` prints as one line and turns into exit status 1 (no traceback); so do usage errors
(``UserArgumentParser``).
Verbs register themselves through ``COMMANDS``: each module exposes ``add_arguments`` and ``run``.
The ``workbench`` console script and ``python -m workbench`` both call ``main``. ``--workspace DIR``
(before or after the verb) picks where artifacts go; see ``workbench.workspace``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from workbench.console import show_progress
from workbench.errors import WorkbenchError, exit_status
from workbench.quiet import quiet_console
from workbench.workspace import active, add_workspace_option, fill_defaults, resolve_workspace

# verb -> (module implementing it, one-line purpose). Modules import lazily, so --help is fast
# and optional back-ends (TensorRT, Streamlit) are never needed to start the CLI.
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("workbench.commands.demo", "run the whole job on the embedded defaults"),
    "init": ("workbench.commands.init", "write a commented starter workbench.toml for a model and data"),
    "run": ("workbench.commands.run", "run the project in workbench.toml, reusing every unchanged step"),
    "data": ("workbench.commands.data", "build and inspect balanced calibration/evaluation speech sets"),
    "calibrate": (
        "workbench.commands.calibrate",
        "export ONNX, calibrate ranges, write cache + INT8 Q/DQ model",
    ),
    "cache": ("workbench.commands.cache", "list, show or prune calibration caches"),
    "build": ("workbench.commands.build", "build a cached TensorRT engine from an ONNX model"),
    "signoff": (
        "workbench.commands.signoff",
        "judge candidates on WER and latency; write the sign-off report",
    ),
    "report": ("workbench.commands.report", "re-render a sign-off report from its JSON record"),
    "compare": (
        "workbench.commands.compare",
        "per-layer FP32 vs INT8 table and per-group sensitivity ranking",
    ),
    "search": (
        "workbench.commands.search",
        "find the mixed INT8/FP16 plan with most INT8 within a WER budget",
    ),
    "dashboard": (
        "workbench.commands.dashboard",
        "serve the Streamlit dashboard (this machine only unless told)",
    ),
}


class UserArgumentParser(argparse.ArgumentParser):
    """A parser whose usage errors (unknown verb, bad option value, missing argument) are WorkbenchErrors:
    one ``error:`` line and exit status 1 like every other user error, not argparse's usage text and status 2.
    Sub-parsers inherit the class (``add_subparsers`` makes them of the parent's type); ``--help`` still
    prints help and exits 0."""

    def error(self, message: str) -> NoReturn:
        raise WorkbenchError(f"{self.prog}: {message}; see '{self.prog} --help'")


class _VersionAction(argparse.Action):
    """``--version``: the version, where the package runs from, the workspace and the back-ends found."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(
            option_strings,
            dest,
            nargs=0,
            default=argparse.SUPPRESS,
            help="print the version and the TensorRT / ONNX Runtime flavours found, then exit",
        )

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        from workbench.about import version_text

        try:
            workspace = resolve_workspace(getattr(namespace, "workspace", None)).root
        except WorkbenchError as exc:
            parser.exit(1, f"error: {exc}\n")
        print(version_text(workspace))
        parser.exit()


def program_name(argv0: str | None = None) -> str:
    """``python -m workbench`` when run as a module, else ``workbench`` (the console script)."""
    name = Path(argv0 if argv0 is not None else (sys.argv[0] if sys.argv else "")).name
    return "python -m workbench" if name in ("__main__.py", "-m", "") else "workbench"


def _add_workspace_to_verbs(parser: argparse.ArgumentParser) -> None:
    """``--workspace`` on every verb and sub-action too, so it may also follow the verb."""
    for action in parser._actions:  # argparse keeps sub-parsers only here
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                add_workspace_option(sub, top_level=False)
                _add_workspace_to_verbs(sub)


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    parser = UserArgumentParser(
        prog=prog or program_name(),
        description="Precision sign-off workbench for Wav2Vec2-style CTC speech models. Artifacts "
        "(calib_sets/, engines/, reports/) go under the workspace: --workspace DIR, else "
        "$WORKBENCH_WORKSPACE, else the current directory.",
    )
    parser.add_argument("--version", action=_VersionAction)
    add_workspace_option(parser, top_level=True)
    sub = parser.add_subparsers(dest="command", metavar="<command>")
    for verb, (module_name, purpose) in COMMANDS.items():
        cmd = sub.add_parser(verb, help=purpose, description=purpose)
        module = importlib.import_module(module_name)
        module.add_arguments(cmd)
        cmd.set_defaults(_run=module.run)
    _add_workspace_to_verbs(parser)
    return parser


def parse_args(
    argv: Sequence[str] | None = None, parser: argparse.ArgumentParser | None = None
) -> argparse.Namespace:
    """Parse ``argv`` and fill the artifact-folder defaults from the workspace (``args.workspace``).
    A workspace that is not a folder is a WorkbenchError."""
    args = (parser or build_parser()).parse_args(argv)
    return fill_defaults(args, resolve_workspace(args.workspace))


def main(argv: Sequence[str] | None = None) -> int:
    quiet_console()  # third-party chatter off before any library loads (workbench/quiet.py)
    show_progress()  # the library's log messages are the lines a person reads while a verb runs
    parser = build_parser()

    def run_verb() -> int | None:
        args = parse_args(argv, parser)
        run: Callable[[argparse.Namespace], int | None] | None = getattr(args, "_run", None)
        if run is None:
            parser.print_help()
            return 0
        with active(args.workspace):  # library defaults inside the verb follow --workspace too
            return run(args)

    return exit_status(run_verb)

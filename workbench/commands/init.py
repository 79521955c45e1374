"""``python -m workbench init --model DIR --data PATH``: write a commented starter ``workbench.toml`` here.

The data's layout is read off the path (a JSONL manifest, an audio folder, LibriSpeech or Common Voice); every
other setting is written at its default (``workbench.project.starter``). An existing file is kept unless
``--replace``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from workbench.inputs.replace import add_replace_argument


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", type=Path, required=True, help="a Hugging Face CTC model folder")
    parser.add_argument(
        "--data", type=Path, required=True, help="a JSONL manifest, an audio folder or a corpus root"
    )
    parser.add_argument(
        "--dir", type=Path, default=Path("."), help="where workbench.toml goes (default: here)"
    )
    add_replace_argument(parser, "workbench.toml")


def run(args: argparse.Namespace) -> int:
    from workbench.project.file import load_project
    from workbench.project.starter import write_starter

    path = write_starter(args.model, args.data, args.dir, args.replace)
    project = load_project(path)  # what init writes, run reads
    print(
        f"wrote {path}: model {project.model}, data {project.data.source} ({project.data.layout}), split by speaker"
    )
    print("next: python -m workbench run")
    return 0

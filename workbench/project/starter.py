"""``workbench init``: a commented starter ``workbench.toml`` from a model folder and a data path.

The data's layout is read off the path (``detect_layout``): a ``.jsonl`` file is a manifest, a folder holding
``*.trans.txt`` files LibriSpeech, one holding ``validated.tsv`` or ``test.tsv`` Common Voice, one holding audio
files an audio folder (a folder holding one ``*.jsonl`` is that manifest). The starter splits that source by
speaker and writes every other setting at its default, commented, so the file says what ``run`` will do.
"""

from __future__ import annotations

import os
from pathlib import Path

from workbench.artifacts import write_text_atomic
from workbench.config import DEFAULT_METHOD, DEFAULT_RECOVERY
from workbench.errors import WorkbenchError
from workbench.evaluate.gates import GateConfig
from workbench.inputs.replace import refuse_replacing
from workbench.project.file import FILE_NAME, RECOVERY_NAMES

AUDIO_SUFFIXES = (".wav", ".flac", ".mp3", ".ogg", ".opus", ".m4a")


def detect_layout(data: Path) -> tuple[Path, str]:
    """The source path and its layout, or a user error naming what was looked for."""
    data = Path(data)
    if data.is_file():
        if data.suffix.lower() == ".jsonl":
            return data, "manifest"
        raise WorkbenchError(f"--data {data}: a file must be a JSONL manifest (.jsonl)")
    if not data.is_dir():
        raise WorkbenchError(f"--data {data} does not exist")
    manifests = sorted(data.glob("*.jsonl"))
    if len(manifests) == 1:
        return manifests[0], "manifest"
    if next(data.rglob("*.trans.txt"), None) is not None:
        return data, "librispeech"
    if (data / "validated.tsv").is_file() or (data / "test.tsv").is_file():
        return data, "commonvoice"
    if any(p.suffix.lower() in AUDIO_SUFFIXES for p in data.rglob("*") if p.is_file()):
        return data, "folder"
    raise WorkbenchError(
        f"--data {data}: found no JSONL manifest, LibriSpeech transcripts, Common Voice tsv or audio files"
    )


def _relative(path: Path, base: Path) -> str:
    try:
        return Path(os.path.relpath(path.resolve(), base.resolve())).as_posix()
    except ValueError:  # another drive
        return path.resolve().as_posix()


def starter_text(model: Path, data: Path, base: Path, name: str) -> str:
    """The commented ``workbench.toml`` for ``model`` and ``data`` (paths relative to ``base``)."""
    if not (Path(model) / "config.json").is_file():
        raise WorkbenchError(f"--model {model} is not a Hugging Face model folder (no config.json)")
    source, layout = detect_layout(data)
    gates = GateConfig()
    recovery = [k for k, v in RECOVERY_NAMES.items() if getattr(DEFAULT_RECOVERY, v)]
    quoted = ", ".join(f'"{r}"' for r in recovery)
    return f"""# workbench.toml: one speech model's INT8 sign-off, run by `python -m workbench run`.
# Paths are relative to this file. Every setting left out takes its default (shown commented).

[project]
name = "{name}"                       # names the sets (<name>-calib, -dev, -eval) and the run folder

[model]
path = "{_relative(Path(model), base)}"                    # a Hugging Face CTC model folder ("demo": the embedded model)

[data]
source = "{_relative(source, base)}"
layout = "{layout}"                   # found by init: {", ".join(("manifest", "folder", "librispeech", "commonvoice", "hf"))}
split = "speaker"                     # calibration, dev and evaluation sets by speaker, shared texts dropped
# split = "given"                     # or name stored sets (calib_sets/ names or folders) instead of source:
# calibration = "my-calib"
# dev = "my-dev"
# evaluation = "my-eval"
# unlabelled = []                     # unlabelled sets (data import --role unlabelled): the label-free check

[calibration]
method = "{DEFAULT_METHOD}"              # entropy, max, percentile, mse (percentile 99.99 is the best measured)
# percentile = 99.99
recovery = [{quoted}]   # bias-correction, clip-search, refine-ranges, shift-scale

[search]
# enabled = true                      # search the mixed INT8/FP16 plan on the dev set
# per_condition = 2                   # clips per condition of the sensitivity ranking
# refine = 0
# finer = 0
# resamples = 1000

[gates]
max_wer_delta_points = {gates.max_wer_delta_points}          # WER loss against FP32, upper end of the 95 % interval
max_condition_wer_delta_points = {gates.max_condition_wer_delta_points} # the same per speech condition

[[target]]
name = "tensorrt"                     # where the candidate will run: tensorrt, ort-cpu, ort-cuda
backend = "ort-cpu"                   # where it is measured here
latency = false                       # time the candidates (a winner by latency only when measured on the target)
# latency_batch_sizes = [1, 8, 32]     # timed batch sizes
# latency_repeats = 10
# latency_budget_s = 15.0             # a point that would take longer gets fewer rounds, never below
# latency_min_repeats = 3
# decoder = "greedy"                  # this target's decoders (default: [signoff] decoder)
# report = "my-report"                # report folder under reports/ (default: <project>-signoff-<target>)
# min_seconds = 1.0                   # deployment profile (default: the calibration set's)
# max_seconds = 20.0
# outside_profile = "refuse"          # refuse, score or skip evaluation clips outside it

[signoff]
# decoder = "greedy"                  # greedy, beam, beam+lm (comma separated: the first judges)
# resamples = 2000
# min_speakers = 10                   # the least evidence a PASS needs per judged group (overall, each condition)
# min_reference_words = 300
"""


def write_starter(model: Path, data: Path, folder: Path, replace: bool = False) -> Path:
    """Write ``folder/workbench.toml``; an existing file is kept unless ``replace``."""
    target = Path(folder) / FILE_NAME
    refuse_replacing([target], "project file", "run init in another folder (--dir)", replace)
    name = "".join(c if c.isalnum() or c in "-_" else "-" for c in Path(folder).resolve().name) or "project"
    text = starter_text(Path(model), Path(data), Path(folder), name)
    write_text_atomic(target, text)
    return target

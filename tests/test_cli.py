"""Command line: --help lists every verb the parser has, user errors exit 1 with one line and no traceback,
``data build/show/list`` and ``demo`` work end to end on small inputs."""

from __future__ import annotations

import argparse
import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.cli import COMMANDS, build_parser, main
from workbench.optional import has_module


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "workbench", *args], capture_output=True, text=True, timeout=120
    )


def _verbs() -> dict[str, argparse.ArgumentParser]:
    """The sub-commands the parser itself has (not a list kept beside it)."""
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_help_lists_every_verb_the_parser_has_with_its_purpose():
    verbs = _verbs()
    assert {"demo", "data", "calibrate", "compare", "search", "signoff", "report", "cache", "build"} <= set(
        verbs
    )
    proc = _run("--help")
    assert proc.returncode == 0, proc.stderr
    flat = " ".join(proc.stdout.split())  # argparse wraps long purposes over lines
    for verb, sub in verbs.items():
        assert verb in proc.stdout and sub.description and " ".join(sub.description.split()) in flat
        module_name, _ = COMMANDS[verb]
        assert sub.get_default("_run") is importlib.import_module(module_name).run


def test_readme_verb_table_names_exactly_the_parsers_verbs():
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("## CLI verbs") : readme.index("## Artifacts")]
    named = {m.split()[0] for m in re.findall(r"^\| `([^`]+)`", table, flags=re.M)}
    assert named == set(_verbs())


@pytest.mark.parametrize("verb", sorted(COMMANDS))
def test_every_verb_has_help(verb, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([verb, "--help"])
    assert exit_info.value.code == 0 and f"python -m workbench {verb}" in capsys.readouterr().out


@pytest.mark.parametrize("verb", ["calibrate", "build", "compare", "search", "signoff"])
def test_calib_set_is_the_one_name_and_set_its_alias(verb):
    """Every verb that reads a calibration set takes ``--calib-set``; ``--set`` means the same."""
    required = {"build": ["--onnx", "model.onnx"], "signoff": ["--eval-set", "my-eval"]}.get(verb, [])
    parser = _verbs()[verb]
    canonical = parser.parse_args([*required, "--calib-set", "my-calib"])
    alias = parser.parse_args([*required, "--set", "my-calib"])
    assert canonical.calib_set == alias.calib_set == "my-calib"
    assert "--calib-set" in parser.format_help()


def test_library_log_lines_reach_the_console_once_an_entry_point_shows_them(capsys):
    """Library modules log (no ``log=print`` callbacks); ``show_progress``, which the CLI calls, prints each
    message as one line on the standard output of the moment, once however often it is called."""
    import logging

    from workbench.console import LOGGER, ConsoleHandler, show_progress

    root = logging.getLogger(LOGGER)
    saved = root.handlers[:], root.level
    try:
        for handler in [h for h in root.handlers if isinstance(h, ConsoleHandler)]:
            root.removeHandler(handler)
        logging.getLogger("workbench.jobs.search").info("not shown: no entry point asked")
        assert capsys.readouterr().out == ""
        show_progress("   ")
        show_progress("   ")
        logging.getLogger("workbench.jobs.search").info("dev set demo-calib: 12 utterances")
        logging.getLogger("workbench.compare.layers").debug("debug lines stay quiet")
        assert capsys.readouterr().out == "   dev set demo-calib: 12 utterances\n"
    finally:
        root.handlers[:], root.level = saved


def test_data_show_missing_set_exits_1_without_traceback(tmp_path):
    proc = _run("data", "show", "no-such-set")
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: no speech set at ")
    assert "build one with 'python -m workbench data build'" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "argv,message",
    [
        (["data", "build", "--calib-per-condition", "0"], "--calib-per-condition: takes a whole number >= 1"),
        (["data", "build", "--source", "folder"], "needs --path"),
        (["data", "build", "--name", "bad name!"], "may hold only"),
        (["data", "build", "--min-seconds", "5", "--max-seconds", "2"], "min <= opt <= max"),
        (["data", "build", "--source", "folder", "--path", "/nonexistent/folder"], "does not exist"),
        (["demo", "--calib-per-condition", "0"], "--calib-per-condition: takes a whole number >= 1"),
        (["demo", "--dev-per-condition", "-1"], "--dev-per-condition: takes a whole number >= 0"),
        (["search", "--margin", "1"], "--margin: takes a finite number in [0, 1)"),
        (["search", "--confidence", "0.3"], "--confidence: takes a finite number in [0.5, 1)"),
    ],
)
def test_user_errors_exit_1(argv, message, capsys, tmp_path):
    assert main(argv + ["--root", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err
    assert not list(tmp_path.iterdir())  # nothing half-written


def test_data_show_and_list(tiny_sets, tiny_root, capsys):
    assert main(["data", "show", "tiny-calib", "--root", str(tiny_root)]) == 0
    out = capsys.readouterr().out
    assert "| condition | short | long | total |" in out
    assert "| quiet | 2 | 2 | 4 |" in out and "| total | 6 | 6 | 12 |" in out
    assert tiny_sets.calib.content_hash[:12] in out
    assert main(["data", "show", str(tiny_sets.eval.path)]) == 0
    assert "| total | 3 | 3 | 6 |" in capsys.readouterr().out
    assert main(["data", "list", "--root", str(tiny_root)]) == 0
    out = capsys.readouterr().out
    assert "tiny-calib" in out and "tiny-eval" in out


@pytest.mark.slow
def test_data_build_from_folder(tmp_path, write_wav, speech_like, capsys):
    folder = tmp_path / "audio"
    for i in range(12):
        speaker = f"spk{i % 4}"
        write_wav(folder / speaker / f"c{i}.wav", speech_like(1.5 if i % 2 else 5.0, seed=i))
        (folder / speaker / f"c{i}.txt").write_text(f"clip number {'one ' * (i + 1)}")
    root = tmp_path / "sets"
    argv = [
        "data",
        "build",
        "--source",
        "folder",
        "--path",
        str(folder),
        "--name",
        "fold",
        "--calib-per-condition",
        "2",
        "--eval-per-condition",
        "2",
        "--root",
        str(root),
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "fold-calib" in out and "fold-eval" in out and "disjoint by text: True, by speaker: True" in out
    assert sorted(p.name for p in root.iterdir()) == ["fold-calib", "fold-eval"]


@pytest.mark.slow
def test_demo_runs_its_steps(tmp_path, capsys):
    from workbench.commands.demo import STEPS
    from workbench.speech.tts import available_voices

    if not available_voices():
        pytest.skip("no TTS engine installed (run ./setup.sh)")
    engines = tmp_path.parent / f"{tmp_path.name}-engines"
    argv = [
        "demo",
        "--calib-per-condition",
        "2",
        "--eval-per-condition",
        "2",
        "--dev-per-condition",
        "2",
        "--root",
        str(tmp_path),
        "--engines-root",
        str(engines),
        "--reports-root",
        str(engines / "reports"),
        "--quick",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    for number, step in enumerate(STEPS, 1):
        assert f"[{number}/{len(STEPS)}] {step.name}" in out
    assert "demo-calib" in out and "demo-eval" in out and "| total | 3 | 3 | 6 |" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo-calib", "demo-dev", "demo-eval"]
    assert "dev set: demo-dev, held out from calibration and evaluation" in out
    assert list(engines.glob("*/model.int8-percentile-*.onnx")) and list(engines.glob("*/calib-*.cache"))
    assert (engines / "reports" / "demo-signoff" / "report.html").exists() and "verdict" in out
    cpu = json.loads((engines / "reports" / "demo-signoff-cpu" / "report.json").read_text())
    assert cpu["backend"]["target"] == "ort-cpu" and "int8-dynamic" in cpu["candidates"]
    assert "int8-percentile-cpu" in cpu["candidates"] and "fp16" not in cpu["candidates"]
    record = json.loads((engines / "reports" / "demo-signoff" / "report.json").read_text())
    assert record["inference"]["decoder"]["name"] == "greedy"
    if has_module("flashlight.lib.text.decoder.kenlm"):  # the demo's beam search with its language model
        assert set(record["decoders"]) == {"greedy", "beam+lm"} and (engines / "demo-lm.arpa").is_file()
    # each step's seconds at the end, and what the demo scaled down (demo --full runs it whole)
    assert "step times: " + ", ".join(f"{step.name} " for step in STEPS[:1]) in out and "\ntotal: " in out
    assert "tensorrt sign-off scaled down (demo --full runs it at full size)" in out
    assert "ort-cpu sign-off scaled down" in out


def test_demo_scales_down_latency_rounds_and_full_restores_them():
    """The demo's CPU sign-off times batch 1 only (its gate batch keeps its 10 rounds), its TensorRT sign-off (timed on
    this CPU, not the target) nothing; --full times batch 1 and 8 for both; the step-time lines add up."""
    from workbench.commands.demo import DemoContext, signoff_latency, timing_lines
    from workbench.config import SetBuildConfig

    scaled, full = signoff_latency("ort-cpu", full=False), signoff_latency("ort-cpu", full=True)
    assert scaled is not None and full is not None
    assert scaled.batch_sizes == (1,) and full.batch_sizes == (1, 8) and scaled.repeats == full.repeats == 10
    assert signoff_latency("tensorrt", full=False) is None
    assert getattr(signoff_latency("tensorrt", full=True), "batch_sizes", None) == (1, 8)
    ctx = DemoContext(SetBuildConfig(), Path("c"), Path("e"), Path("r"))
    ctx.seconds.update({"speech-sets": 40.25, "search": 95.0})
    assert timing_lines(ctx) == [
        "step times: speech-sets 40.2 s, search 95.0 s",
        "total: 135.2 s (2 min 15.2 s)",
    ]


def test_demo_steps_start_background_work_alongside_the_step_they_name():
    """A step's ``start`` runs just before the step named by ``start_with`` (its own name when None), once."""
    from workbench.commands.demo import DemoContext, Step, run_steps
    from workbench.config import SetBuildConfig

    order: list[str] = []

    def mark(label: str):
        return lambda ctx: order.append(label)

    steps = (
        Step("a", "first", mark("run a")),
        Step("b", "second", mark("run b")),
        Step("c", "third", mark("run c"), start=mark("start c"), start_with="b"),
        Step("d", "fourth", mark("run d"), start=mark("start d")),
    )
    run_steps(DemoContext(SetBuildConfig(), Path("c"), Path("e"), Path("r")), steps)
    assert order == ["run a", "start c", "run b", "run c", "start d", "run d"]

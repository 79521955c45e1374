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
def test_every_verb_has_help(verb, capsys, monkeypatch):
    # as `python -m workbench` starts it (a pytest-xdist worker's own argv[0] would name the console script)
    monkeypatch.setattr(sys, "argv", [str(Path("workbench") / "__main__.py")])
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
        (["data", "build", "--draw", "-1"], "--draw: takes a whole number >= 0"),
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


def test_data_build_draw_keeps_the_calibration_set_and_deals_a_new_evaluation_set(
    tiny_sets, tiny_config, tmp_path, capsys
):
    """``--draw N`` with the seed and sizes of ``tiny``: the calibration set's bytes are the seed's (same content
    hash), the evaluation set is another sample (another hash, speakers still apart from calibration)."""
    from workbench.speech.store import load_set

    root = tmp_path / "sets"
    sizes = ["--calib-per-condition", str(tiny_config.calib_per_condition),
             "--eval-per-condition", str(tiny_config.eval_per_condition)]  # fmt: skip
    argv = ["data", "build", "--name", "tiny", *sizes, "--seed", str(tiny_config.seed), "--draw", "1"]
    assert main([*argv, "--root", str(root)]) == 0
    assert "disjoint by text: True, by speaker: True" in capsys.readouterr().out
    calib, evaluation = load_set("tiny-calib", root=root), load_set("tiny-eval", root=root)
    assert calib.content_hash == tiny_sets.calib.content_hash
    assert evaluation.content_hash != tiny_sets.eval.content_hash
    assert len(evaluation.utterances) == len(tiny_sets.eval.utterances)
    assert [u.text for u in evaluation.utterances] != [u.text for u in tiny_sets.eval.utterances]


def test_data_build_draw_of_your_own_speech_is_refused(tmp_path, write_wav, speech_like, capsys):
    """A draw deals synthetic speakers again; a folder's sets are split by speaker without one: one line, no sets."""
    folder = tmp_path / "audio"
    for i in range(3):
        write_wav(folder / f"c{i}.wav", speech_like(2.0, seed=i))
        (folder / f"c{i}.txt").write_text("hello world")
    root = tmp_path / "sets"
    argv = ["data", "build", "--source", "folder", "--path", str(folder), "--draw", "2", "--root", str(root)]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(
        "error: a draw of the evaluation and dev sets (draw 2) is made from synthetic speech only"
    )
    assert len(err.strip().splitlines()) == 1 and not root.exists()


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


DEMO_STEPS = (
    "sets",
    "calibrate",
    "compare",
    "search",
    "language-model",
    "signoff-tensorrt",
    "signoff-ort-cpu",
)


@pytest.mark.slow
def test_demo_runs_its_steps(tmp_path, capsys):
    """The demo is the embedded preset run by workbench run's pipeline: its steps in order, its reports, and a
    second demo in the same workspace reuses every step by its inputs' hash and says so."""
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
    for number, name in enumerate(DEMO_STEPS, 1):
        assert f"[{number}/{len(DEMO_STEPS)}] {name}: ran" in out
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
    assert "step times: sets " in out and "\ntotal: " in out and "\nCPU time: " in out
    assert "demo --full runs every step at full size" in out
    assert "tensorrt sign-off scaled down: overflow check outputs on 64 of 6 calibration clips" in out
    assert "ort-cpu sign-off scaled down" in out and "ort-cpu latency: not timed" in out
    assert (engines / "reports" / "demo" / "summary.md").is_file()
    assert main(argv) == 0  # again: every step's inputs unchanged
    again = capsys.readouterr().out
    assert f"reused: {', '.join(DEMO_STEPS)}" in again and ": ran," not in again
    assert "NOTHING PASSES" in again or "PASS (" in again


def test_the_demo_preset_is_the_demos_settings():
    """The preset names its recipe (percentile 99.99, bias correction, clip search: the demo's verdicts do not move
    with the defaults), its search and its two targets; --quick and --full scale it as the demo's help says; the
    CPU sign-off times batch 1 only (its gate batch keeps its 10 rounds), the TensorRT one (timed on this CPU, not
    the target) nothing; --full times batch 1 and 8 for both."""
    from workbench.config import DEMO_DEV_PER_CONDITION, DEMO_EVAL_PER_CONDITION
    from workbench.pipeline.run import steps_of
    from workbench.project.demo import DemoOptions, demo_project

    project = demo_project()
    assert project.model == "demo" and project.name == "demo" and project.data.split == "synthetic"
    assert project.data.synthetic is not None
    assert project.data.synthetic.eval_per_condition == DEMO_EVAL_PER_CONDITION
    assert project.data.synthetic.dev_per_condition == DEMO_DEV_PER_CONDITION
    recipe = project.recipe
    assert (recipe.method, recipe.percentile) == ("percentile", 99.99)
    assert recipe.recovery.bias_correction and recipe.recovery.clip_search and not recipe.recovery.shift_scale
    assert (project.search.per_condition, project.search.refine, project.search.finer) == (2, 0, 1)
    assert project.search.resamples == 1000 and project.signoff.resamples == 2000
    trt, cpu = project.targets
    assert (trt.name, trt.report, trt.decoder, trt.latency) == (
        "tensorrt",
        "demo-signoff",
        "greedy,beam+lm",
        False,
    )
    assert (cpu.name, cpu.report, cpu.decoder, cpu.latency) == ("ort-cpu", "demo-signoff-cpu", "greedy", True)
    assert (cpu.latency_batch_sizes, cpu.latency_repeats, cpu.latency_budget_s) == ((1,), 10, 15.0)
    assert (project.signoff.also_limit, project.signoff.overflow_clips) == (120, 64)
    assert project.signoff.training_lm and steps_of(project) == 7
    full = demo_project(DemoOptions(full=True))
    assert full.signoff.also_limit is None and full.signoff.overflow_clips is None
    assert [t.latency_batch_sizes for t in full.targets] == [(1, 8), (1, 8)]
    assert [t.latency_repeats for t in full.targets] == [15, 10]
    quick = demo_project(DemoOptions(quick=True, shift_scale=True))
    assert not any(t.latency for t in quick.targets) and quick.recipe.recovery.shift_scale
    assert (quick.search.per_condition, quick.search.finer, quick.search.resamples) == (1, 0, 200)


def test_demo_timing_lines_add_up():
    from workbench.commands.demo import timing_lines
    from workbench.pipeline.run import StepOutcome

    steps = [StepOutcome("sets", False, 40.25, "a", 30.0), StepOutcome("search", True, 95.0, "b", 1.5)]
    assert timing_lines(steps) == [
        "step times: sets 40.2 s, search 95.0 s",
        "total: 135.2 s (2 min 15.2 s)",
        "CPU time: sets 30.0 s, search 1.5 s; total 31.5 s",
    ]

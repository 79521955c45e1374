"""``workbench init`` + ``workbench run`` on a tiny workspace: a random tiny model and a 36-clip manifest corpus.

The first run makes every step; the second, with nothing changed, reuses every one; a changed evaluation set
(given sets) re-runs the sign-off only; exit statuses 0 (a candidate passes), 3 (nothing passes) and 1 (a bad
project file, one error line).
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from xml.etree import ElementTree

import pytest
import soundfile as sf
from layoutkit import text_of

from workbench.cli import main
from workbench.config import RUN_NOTHING_PASSES

SPEAKERS = [(f"s{i:02d}", "us" if i % 2 else "gb") for i in range(12)]


def write_corpus(folder: Path, speech_like) -> Path:
    """A JSONL manifest of 12 speakers (two accents) x 3 clips, every text different."""
    (folder / "audio").mkdir(parents=True)
    lines = []
    for k, (speaker, accent) in enumerate(SPEAKERS):
        for j in range(3):
            n = 3 * k + j
            name = f"audio/{speaker}-{j}.wav"
            sf.write(str(folder / name), speech_like(1.2 + 0.1 * j, seed=n), 16_000)
            lines.append({"audio": name, "text": text_of(n), "speaker": speaker, "accent": accent})
    manifest = folder / "manifest.jsonl"
    manifest.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return manifest


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory):
    from conftest import _speech_like

    from workbench.model.synthetic import save_random_wav2vec2
    from workbench.project.starter import write_starter

    root = tmp_path_factory.mktemp("project")
    save_random_wav2vec2(root / "model", "tiny", seed=0)
    write_corpus(root / "corpus", _speech_like)
    loosen(write_starter(root / "model", root / "corpus", root))
    return root


def argv_of(root: Path, *more: str) -> list[str]:
    return ["--workspace", str(root / "ws"), *more]


def loosen(path: Path, **gates: float) -> None:
    """Loose gates (a random model's WER moves a lot between precisions), light search and sign-off."""
    text = path.read_text()
    text = text.replace("max_wer_delta_points = 0.3", f"max_wer_delta_points = {gates.get('wer', 100.0)}")
    text = text.replace("max_condition_wer_delta_points = 1.0", "max_condition_wer_delta_points = 100.0")
    text = text.replace('recovery = ["bias-correction", "clip-search"]', 'recovery = ["bias-correction"]')
    text = text.replace("# per_condition = 2", "per_condition = 1").replace(
        "# resamples = 1000", "resamples = 100"
    )
    text = text.replace("# resamples = 2000", "resamples = 100\noverflow_clips = 2")
    # 4 evaluation speakers of a few words each: the evidence a PASS needs, lowered to what the tiny set holds
    text = text.replace("# min_speakers = 10", "min_speakers = 1").replace(
        "# min_reference_words = 300", "min_reference_words = 1"
    )
    path.write_text(text)


def test_init_then_run_then_rerun_reuses_every_step(workspace, capsys, monkeypatch) -> None:
    root = workspace
    monkeypatch.chdir(root)
    assert main(["init", "--model", "model", "--data", "corpus"]) == 1  # the fixture's file is kept
    assert "--replace" in capsys.readouterr().err
    assert main(["init", "--model", "model", "--data", "corpus", "--replace"]) == 0
    config = root / "workbench.toml"
    text = config.read_text()
    assert 'layout = "manifest"' in text and 'source = "corpus/manifest.jsonl"' in text
    loosen(config)
    junit = root / "out" / "junit.xml"
    assert main(argv_of(root, "run", "--no-progress", "--junit", str(junit))) == 0
    first = capsys.readouterr().out
    for step in ("sets", "calibrate", "compare", "search", "signoff-tensorrt"):
        assert f"] {step}: ran" in first, step
    assert "target tensorrt: PASS" in first
    report = root / "ws" / "reports" / "project0-signoff-tensorrt" / "report.json"
    record = json.loads(report.read_text())
    assert any(n.startswith("workbench run ") for n in record["notes"])
    assert record["settings"]["resamples"] == 100 and record["gates"]["max_wer_delta_points"] == 100.0
    suite = ElementTree.parse(junit).getroot()
    assert suite.get("failures") == "0" and len(suite.findall("testcase")) == 6
    sets = {p.name for p in (root / "ws" / "calib_sets").iterdir()}
    assert {"project0-calib", "project0-dev", "project0-eval", "project0-all"} <= sets

    start = time.perf_counter()
    assert main(argv_of(root, "run", "--no-progress")) == 0
    seconds = time.perf_counter() - start
    second = capsys.readouterr().out
    assert "reused: sets, calibrate, compare, search, signoff-tensorrt" in second
    assert ": ran" not in second
    assert seconds < 30, seconds
    summary = (root / "ws" / "reports" / "project0" / "summary.md").read_text()
    assert "| signoff-tensorrt | reused |" in summary


def test_a_changed_evaluation_set_reruns_only_the_signoff(workspace, capsys, monkeypatch, tmp_path) -> None:
    """Given sets: the split's own sets named in a second project; one evaluation clip's text edited (recarded)."""
    root = workspace
    sets_root = root / "ws" / "calib_sets"
    if not (sets_root / "project0-eval").is_dir():
        pytest.skip("needs the first run's sets (test_init_then_run_then_rerun_reuses_every_step)")
    project = tmp_path / "given"
    project.mkdir()
    shutil.copytree(sets_root / "project0-eval", project / "eval")
    text = (root / "workbench.toml").read_text()
    text = text.replace('source = "corpus/manifest.jsonl"\n', "").replace('layout = "manifest"', "")
    text = text.replace(
        'split = "speaker"', 'split = "given"\ncalibration = "project0-calib"\ndev = "project0-dev"'
    )
    text = text.replace('split = "given"', 'split = "given"\nevaluation = "eval"', 1)
    text = text.replace('path = "model"', f'path = "{root / "model"}"').replace('"project0"', '"given"')
    (project / "workbench.toml").write_text(text)
    monkeypatch.chdir(project)
    assert main(argv_of(root, "run", "--no-progress")) == 0
    capsys.readouterr()
    assert main(argv_of(root, "run", "--no-progress")) == 0
    assert "reused: sets, calibrate, compare, search, signoff-tensorrt" in capsys.readouterr().out
    manifest = project / "eval" / "manifest.jsonl"
    lines = manifest.read_text().splitlines()
    first = json.loads(lines[0])
    first["text"] = first["text"] + " AGAIN"
    manifest.write_text("\n".join([json.dumps(first, sort_keys=True), *lines[1:]]) + "\n")
    assert main(["data", "recard", str(project / "eval")]) == 0
    capsys.readouterr()
    assert main(argv_of(root, "run", "--no-progress")) == 0
    out = capsys.readouterr().out
    assert "reused: calibrate, compare, search" in out
    assert "] sets: ran" in out and "] signoff-tensorrt: ran" in out


def test_nothing_passes_exits_3_and_a_bad_project_file_exits_1(
    workspace, capsys, monkeypatch, tmp_path
) -> None:
    root = workspace
    config = tmp_path / "workbench.toml"
    text = (root / "workbench.toml").read_text()
    text = text.replace('path = "model"', f'path = "{root / "model"}"')
    text = text.replace(
        'source = "corpus/manifest.jsonl"', f'source = "{root / "corpus" / "manifest.jsonl"}"'
    )
    # timed on the target itself (ONNX Runtime CPU): every candidate, the baseline too, over a latency gate no run meets
    text = text.replace("[gates]", "[gates]\nmax_latency_ms = 0.001").replace(
        "latency = false", "latency = true"
    )
    text = text.replace('name = "tensorrt"', 'name = "ort-cpu"')
    text = text.replace("# latency_batch_sizes = [1, 8, 32]", "latency_batch_sizes = [1]")
    text = text.replace("# latency_repeats = 10", "latency_repeats = 3").replace(
        'name = "project0"', 'name = "failing"'
    )
    config.write_text(text)
    junit = tmp_path / "junit.xml"
    assert main(argv_of(root, "run", "--config", str(config), "--no-progress", "--junit", str(junit))) == (
        RUN_NOTHING_PASSES
    )
    assert "target ort-cpu: NOTHING PASSES" in capsys.readouterr().out
    assert ElementTree.parse(junit).getroot().get("failures") == "1"
    for bad, words in (
        (text.replace("[search]", "[search]\nbudget = 3"), "unknown keys ['budget']"),
        (text.replace('method = "percentile"', "method = 3"), "key 'method'"),
        (text.replace(f'path = "{root / "model"}"', 'path = "no-such-model"'), "is not a model folder"),
        (text + "\n[[target]\n", "not valid TOML"),
    ):
        config.write_text(bad)
        assert main(argv_of(root, "run", "--config", str(config), "--no-progress")) == 1
        err = capsys.readouterr().err
        assert err.startswith("error: project file") and words in err and err.count("\n") == 1, err

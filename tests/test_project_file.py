"""``workbench.toml``: what is read (defaults, paths) and what is refused (one ``BadInput`` naming file and key);
``init``'s layout detection. No model work: a config.json is all a model folder needs here."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.config import DEFAULT_METHOD, DEFAULT_RECOVERY
from workbench.errors import WorkbenchError
from workbench.inputs.problem import BadInput
from workbench.project.file import load_project
from workbench.project.starter import detect_layout, starter_text


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "m.jsonl").write_text("")
    return tmp_path


def write(folder: Path, text: str) -> Path:
    path = folder / "workbench.toml"
    path.write_text(text)
    return path


BASE = '[model]\npath = "model"\n[data]\nsource = "corpus/m.jsonl"\nlayout = "manifest"\n'


def test_the_starter_reads_back_with_the_best_measured_recipe(folder: Path) -> None:
    project = load_project(write(folder, starter_text(folder / "model", folder / "corpus", folder, "p")))
    assert project.name == "p" and project.model == str((folder / "model").resolve())
    assert project.data.split == "speaker" and project.data.layout == "manifest"
    assert project.data.source == (folder / "corpus" / "m.jsonl").resolve()
    assert project.recipe.method == DEFAULT_METHOD == "percentile"
    assert project.recipe.recovery == DEFAULT_RECOVERY
    assert [t.name for t in project.targets] == ["tensorrt"] and project.gates.max_wer_delta_points == 0.3


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (BASE + "[extra]\n", "unknown keys ['extra']"),
        (BASE + "[search]\nrefine = 'two'\n", "key 'search' key 'refine'"),
        (BASE + "[search]\nenabled = 1\n", "must be true or false"),
        (BASE + "[calibration]\nrecovery = ['smooth']\n", "key 'calibration' key 'recovery' item 0"),
        (BASE + "[gates]\nmax_wer_delta_points = -1\n", "key 'gates'"),
        (BASE + "[[target]]\nname = 'gpu'\n", "key 'target' item 0 key 'name'"),
        (
            BASE + "[[target]]\nname = 'ort-cpu'\n[[target]]\nname = 'ort-cpu'\n",
            "names a deployment target twice",
        ),
        (BASE.replace("corpus/m.jsonl", "corpus/none.jsonl"), "does not exist"),
        (BASE.replace('path = "model"', 'path = "nothing"'), "is not a model folder"),
        (
            '[model]\npath = "model"\n[data]\nsplit = "given"\ncalibration = "a"\nevaluation = "b"\n',
            "dev set",
        ),
        (BASE + "[signoff]\nlm = 'none.arpa'\n", "key 'signoff' key 'lm'"),
        # the demo preset's own fields have no key in a project file
        (BASE + "[signoff]\ntraining_lm = true\n", "unknown keys ['training_lm']"),
        (
            BASE.replace('layout = "manifest"', 'layout = "manifest"\nsynthetic = 1'),
            "unknown keys ['synthetic']",
        ),
        (BASE + "[[target]]\nreport = '../x'\n", "key 'target' item 0 key 'report'"),
        (
            BASE
            + "[[target]]\nname = 'tensorrt'\nreport = 'r'\n[[target]]\nname = 'ort-cpu'\nreport = 'r'\n",
            "names a report folder twice",
        ),
        (BASE + "[[target]]\nlatency_budget_s = 0\n", "key 'target' item 0 key 'latency_budget_s'"),
        ("[model\n", "not valid TOML"),
    ],
)
def test_a_bad_project_file_is_one_error_naming_the_key(folder: Path, text: str, words: str) -> None:
    with pytest.raises(BadInput) as caught:
        load_project(write(folder, text))
    message = str(caught.value)
    assert message.startswith(f"project file {folder / 'workbench.toml'}") and words in message
    assert "\n" not in message


def test_given_sets_without_search_need_no_dev_set(folder: Path) -> None:
    text = '[model]\npath = "model"\n[data]\nsplit = "given"\ncalibration = "a"\nevaluation = "b"\n'
    project = load_project(write(folder, text + "[search]\nenabled = false\n"))
    assert (project.data.calibration, project.data.dev, project.data.evaluation) == ("a", None, "b")


def test_init_reads_the_layout_off_the_data_path(tmp_path: Path) -> None:
    libri = tmp_path / "libri" / "19" / "198"
    libri.mkdir(parents=True)
    (libri / "19-198.trans.txt").write_text("")
    assert detect_layout(tmp_path / "libri") == (tmp_path / "libri", "librispeech")
    (tmp_path / "cv").mkdir()
    (tmp_path / "cv" / "test.tsv").write_text("")
    assert detect_layout(tmp_path / "cv")[1] == "commonvoice"
    (tmp_path / "wavs").mkdir()
    (tmp_path / "wavs" / "a.wav").write_bytes(b"")
    assert detect_layout(tmp_path / "wavs")[1] == "folder"
    (tmp_path / "empty").mkdir()
    with pytest.raises(WorkbenchError, match="found no JSONL manifest"):
        detect_layout(tmp_path / "empty")


def test_a_target_takes_its_decoder_report_folder_and_latency_rounds(folder: Path) -> None:
    text = (
        BASE
        + "[signoff]\nalso_limit = 50\n[[target]]\nname = 'ort-cpu'\ndecoder = 'greedy'\nreport = 'cpu-report'\n"
        + "latency = true\nlatency_batch_sizes = [1]\nlatency_warmup = 1\nlatency_budget_s = 15.0\n"
        + "latency_min_repeats = 5\n"
    )
    project = load_project(write(folder, text))
    (target,) = project.targets
    assert (target.decoder, target.report, target.latency_batch_sizes) == ("greedy", "cpu-report", (1,))
    assert (target.latency_warmup, target.latency_budget_s, target.latency_min_repeats) == (1, 15.0, 5)
    assert project.signoff.also_limit == 50 and not project.signoff.training_lm

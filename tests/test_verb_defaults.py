"""calibrate, compare and search without ``--model``: the embedded demo model, said on one line and in the record,
or refused (naming the other model and ``--model``, nothing written) when the workspace holds other models' artifacts.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workbench.cli import main


def files_under(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def other_model(tmp_path_factory: pytest.TempPathFactory, tiny_sets) -> Path:
    """An engines folder holding a tiny random model's calibration (another model than the demo's)."""
    from workbench.model.synthetic import save_random_wav2vec2

    base = tmp_path_factory.mktemp("verb-defaults")
    model = save_random_wav2vec2(base / "model", "tiny", seed=0)
    engines = base / "engines"
    argv = ["calibrate", "--model", str(model), "--set", str(tiny_sets.calib.path), "--engines", str(engines)]
    assert main([*argv, "--no-recovery"]) == 0  # only its presence counts here, not its recipe
    return engines


@pytest.fixture(scope="module")
def demo_engines(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("demo-engines")


VERBS = {
    "calibrate": ["--set"],
    "compare": ["--no-sensitivity", "--per-condition", "1", "--no-progress", "--calib-set"],
    "search": ["--per-condition", "1", "--no-progress", "--resamples", "100", "--calib-set"],
}


@pytest.mark.parametrize("verb", list(VERBS))
def test_a_verb_without_model_refuses_the_demo_model_when_other_models_are_there(
    verb, other_model, tiny_sets, capsys
) -> None:
    before = files_under(other_model)
    argv = [verb, *VERBS[verb], str(tiny_sets.calib.path), "--engines", str(other_model)]
    assert main(argv) == 1
    captured = capsys.readouterr()
    done = {"calibrate": "calibrated", "compare": "compared", "search": "searched"}[verb]
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"error: no --model: the embedded demo model would be {done}"
    )
    assert "give --model FOLDER" in lines[0] and str(other_model.parent / "model") in lines[0]
    assert "Traceback" not in captured.err and "note:" not in captured.out
    assert files_under(other_model) == before


def test_calibrate_without_model_says_so_and_the_cache_records_it(demo_engines, tiny_sets, capsys) -> None:
    argv = ["calibrate", "--set", str(tiny_sets.calib.path), "--engines", str(demo_engines)]
    assert main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    notes = [ln for ln in out if ln.startswith("note: no --model")]
    assert (
        len(notes) == 1 and "the embedded demo model (" in notes[0] and notes[0].endswith(") is calibrated")
    )
    # no recovery option: the default recipe's (bias correction, clipping search), said and recorded
    (recipe,) = [ln for ln in out if ln.startswith("note: no recovery option")]
    assert "--clip-search --bias-correction" in recipe and "--no-recovery for none" in recipe
    (sidecar,) = demo_engines.glob("*/calib-*-cs-bc.cache.json")
    said = [line.removeprefix("note: ") for line in (notes[0], recipe)]
    assert json.loads(sidecar.read_text())["assumed"] == said


def test_compare_without_model_says_so_and_the_layer_table_records_it(
    demo_engines, tiny_sets, capsys
) -> None:
    argv = ["compare", *VERBS["compare"], str(tiny_sets.calib.path), "--engines", str(demo_engines)]
    assert main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    notes = [
        ln for ln in out if ln.startswith("note: no --model") or ln.startswith("note: no recovery option")
    ]
    assert len(notes) == 2 and notes[0].endswith(") is compared")
    (layers,) = demo_engines.glob("*/compare/layers-*.json")
    record = json.loads(layers.read_text())
    assert record["assumed"] == [line.removeprefix("note: ") for line in notes]
    assert record["model"]["model_hash"][:12] in notes[0]

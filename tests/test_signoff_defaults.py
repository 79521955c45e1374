"""No silent fallbacks in search and sign-off: what a left-out option would have done is refused or said.

One tiny random model, the tiny sets and one real search (method max, no --dev-set) made once for the module; each
test then asks the sign-off what the issue's user asked it: no recipe flags, two searches, no --model, a search
given by name, and a profile option that must reach the record.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workbench.cli import main


@pytest.fixture(scope="module")
def searched(tmp_path_factory: pytest.TempPathFactory, tiny_sets):
    """(model folder, engines, search record) of a search made with --method max and no --dev-set."""
    from workbench.model.synthetic import save_random_wav2vec2

    base = tmp_path_factory.mktemp("defaults")
    model = save_random_wav2vec2(base / "model", "tiny", seed=0)
    engines = base / "engines"
    gates = base / "gates.json"
    gates.write_text(json.dumps({"max_wer_delta_points": 100.0, "max_condition_wer_delta_points": 100.0}))
    argv = ["search", "--model", str(model), "--calib-set", str(tiny_sets.calib.path), "--method", "max"]
    argv += ["--engines", str(engines), "--per-condition", "1", "--no-progress", "--gates", str(gates)]
    argv += ["--resamples", "100", "--refine", "0", "--signoff-set", str(tiny_sets.eval.path)]
    assert main(argv) == 0
    (record,) = sorted(engines.glob("*/compare/search-*.json"))
    return model, engines, record


def signoff_argv(tiny_sets, engines: Path, out: Path, *more: str) -> list[str]:
    argv = ["signoff", "--calib-set", str(tiny_sets.calib.path), "--eval-set", str(tiny_sets.eval.path)]
    argv += ["--engines", str(engines), "--no-latency", "--resamples", "100", "--out", str(out)]
    return argv + ["--overflow-clips", "2", *more]


def test_a_search_without_dev_set_says_it_selected_on_the_calibration_set(searched, tiny_sets) -> None:
    record = json.loads(searched[2].read_text())
    assert record["dev_set"]["content_hash"] == tiny_sets.calib.content_hash
    assert record["dev_set"]["is_calibration_set"] is True
    assert record["dev_set"]["warning"].startswith("no --dev-set: the search selects on the calibration set")


def test_signoff_without_recipe_refuses_a_default_that_would_calibrate_anew(
    searched, tiny_sets, tmp_path, capsys
) -> None:
    model, engines, record = searched
    assert main(signoff_argv(tiny_sets, engines, tmp_path / "r", "--model", str(model))) == 1
    err = capsys.readouterr().err
    assert (
        err.startswith("error: no --method or recovery option: the default recipe") and err.count("\n") == 1
    )
    assert f"search {record.name}: --method max" in err and "--search RECORD" in err
    assert not (tmp_path / "r").exists()


def test_signoff_given_the_search_takes_its_recipe_and_records_it(searched, tiny_sets, tmp_path) -> None:
    model, engines, record = searched
    out = tmp_path / "r"
    argv = signoff_argv(tiny_sets, engines, out, "--model", str(model), "--search", str(record))
    assert main(argv + ["--min-seconds", "0.2", "--outside-profile", "score"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["candidates"] == ["fp32", "fp16", "int8-max", "mixed"]
    settings = report["settings"]
    assert settings["method"] == "max" and settings["search"] == str(record)
    assert settings["profile_min_s"] == 0.2 and settings["outside_profile"] == "score"
    assert any(n.startswith("calibration recipe of the search") for n in report["notes"])
    assert any(
        n.startswith(f"mixed plan from the search {record}") and "dev set" in n for n in report["notes"]
    )


def test_two_matching_searches_are_refused_naming_both(searched, tiny_sets, tmp_path, capsys) -> None:
    model, engines, record = searched
    twin = record.with_name("search-max-twin.json")
    data = json.loads(record.read_text())
    data["created"] = "9999-01-01T00:00:00+00:00"
    twin.write_text(json.dumps(data))
    try:
        argv = signoff_argv(tiny_sets, engines, tmp_path / "r", "--model", str(model), "--method", "max")
        assert main(argv) == 1
        err = capsys.readouterr().err.splitlines()[-1]  # after the model loader's progress bar
        assert err.startswith("error: 2 searches match") and str(record) in err and str(twin) in err
        assert "--search RECORD" in err and not (tmp_path / "r").exists()
    finally:
        twin.unlink()


def test_signoff_without_model_refuses_the_demo_model_when_other_models_are_there(
    searched, tiny_sets, tmp_path, capsys
) -> None:
    _, engines, _ = searched
    assert main(signoff_argv(tiny_sets, engines, tmp_path / "r")) == 1
    err = capsys.readouterr().err
    assert (
        err.startswith("error: no --model: the embedded demo model would be signed off") and "--model" in err
    )
    empty = tmp_path / "engines"
    empty.mkdir()
    from workbench.jobs.signoff_defaults import check_default_model

    line = check_default_model(empty, "a" * 64)
    assert line.startswith("no --model: the embedded demo model (aaaaaaaaaaaa) is signed off")

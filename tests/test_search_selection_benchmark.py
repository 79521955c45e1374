"""``benchmarks/search_selection.py`` on a real search record and the sign-off report of the same run (the tiny
random Wav2Vec2 of ``tiny_sets``): the dev deltas come from the search's first candidate and its found plan, the
sign-off deltas from the report's INT8 and mixed candidates, in WER points."""

from __future__ import annotations

import json

import pytest

from tests.benchkit import load_benchmark


@pytest.mark.slow
def test_the_dev_and_sign_off_deltas_of_one_run_side_by_side(tiny_sets, tmp_path) -> None:
    from workbench.evaluate.gates import GateConfig
    from workbench.jobs.search import SearchInputs
    from workbench.jobs.search import run as search
    from workbench.jobs.signoff import SignoffInputs
    from workbench.jobs.signoff import run as signoff
    from workbench.model.synthetic import save_random_wav2vec2

    model = save_random_wav2vec2(tmp_path / "tiny", "tiny", seed=0)
    # a random model transcribes noise: wide gates, so the search finds a plan and the sign-off judges it
    gates = GateConfig(max_wer_delta_points=100.0, max_condition_wer_delta_points=100.0)
    common = {
        "model": model,
        "calib_set": str(tiny_sets.calib.path),
        "method": "max",
        "engines": tmp_path / "engines",
        "calib_root": tiny_sets.calib.path.parent,
        "gates": gates,
        "resamples": 200,
        "threads": 1,
    }
    found = search(
        SearchInputs(
            **common, per_condition=1, refine=0, progress=False, signoff_set=str(tiny_sets.eval.path)
        )
    )
    # no latency: the benchmark reads the WER deltas only
    record = signoff(
        SignoffInputs(**common, eval_set=str(tiny_sets.eval.path), out_dir=tmp_path / "signoff", latency=None)
    )
    assert "mixed" in record.record["candidates"]
    search_json = found.files["search_json"]
    report_json = tmp_path / "signoff" / "report.json"
    bench = load_benchmark("search_selection.py", "search_selection_benchmark")
    out = tmp_path / "selection.json"
    assert bench.main(["--pair", f"tiny={search_json},{report_json}", "--out", str(out)]) == 0
    row = json.loads(out.read_text())["rows"][0]
    data = json.loads(search_json.read_text())
    first, plan = data["candidates"][0], data["found"]
    assert row["run"] == "tiny" and row["dev"]["found"]["int8_macs_share"] == plan["int8_macs_share"]
    assert row["dev"]["int8_everywhere"]["delta"] == pytest.approx(
        first["delta"]["overall"]["estimate"] * 100, abs=1e-3
    )
    accuracy = record.record["accuracy"]["candidates"]
    int8 = next(n for n in accuracy if n.startswith("int8"))
    assert row["signoff"]["int8_everywhere"]["delta"] == pytest.approx(
        accuracy[int8]["overall"]["delta"]["estimate"] * 100, abs=1e-3
    )
    assert row["signoff"]["found"]["delta"] == pytest.approx(
        accuracy["mixed"]["overall"]["delta"]["estimate"] * 100, abs=1e-3
    )
    with pytest.raises(SystemExit):  # a pair without both files is refused
        bench.main(["--pair", f"tiny={search_json}", "--out", str(out)])

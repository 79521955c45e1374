"""``benchmarks/search_replication.py``: the per-rule summary (pass rate, mean INT8 MAC share with a draw without
a plan counted as 0, predicted against observed) and the refusal of unknown rules. The run itself synthesises two
sets per draw and searches each with every rule; a smoke run of it is in the benchmark's docstring."""

from __future__ import annotations

import pytest

from tests.benchkit import load_benchmark


def _row(found: bool, passed: bool, share: float, chance: float | None) -> dict:
    return {
        "found": "plan" if found else None,
        "int8_macs_share": share if found else 0.0,
        "forecast": {"pass_chance": chance} if found else None,
        "signoff": {"passed": passed, "insufficient_evidence": False},
    }


def test_the_summary_counts_passes_shares_and_the_forecast_per_rule() -> None:
    rep = load_benchmark("search_replication.py", "search_replication_bench")
    draws = [
        {"draw": 0, "rules": {"as-read": _row(True, True, 0.8, 0.9), "shrink": _row(True, True, 0.6, 0.95)}},
        {
            "draw": 1,
            "rules": {"as-read": _row(True, False, 0.8, 0.7), "shrink": _row(False, False, 0.0, None)},
        },
        {"draw": 2, "error": "RuntimeError: synthesis failed"},
    ]
    summary = rep.summarise(draws, ("as-read", "shrink"))
    read, shrink = summary["as-read"], summary["shrink"]
    assert read["draws"] == 2 and read["passes"] == 1 and read["pass_rate"] == 0.5
    assert read["mean_int8_macs_share"] == pytest.approx(0.8) and read["mean_predicted_pass_chance"] == 0.8
    assert read["brier"] == pytest.approx(((0.9 - 1) ** 2 + 0.7**2) / 2, abs=1e-4)
    assert shrink["plans_found"] == 1 and shrink["mean_int8_macs_share"] == pytest.approx(0.3)
    assert shrink["mean_predicted_pass_chance"] == pytest.approx(
        0.475
    )  # no plan: predicted 0, observed no pass
    assert not read["meets_target"]


def test_unknown_rules_are_refused(tmp_path, capsys) -> None:
    rep = load_benchmark("search_replication.py", "search_replication_bench")
    with pytest.raises(SystemExit):
        rep.main(["--rules", "best", "--workspace", str(tmp_path)])
    assert "--rules from as-read, shrink, confirm" in capsys.readouterr().err

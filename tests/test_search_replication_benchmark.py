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
        "dev_utterances_transcribed": 100 if passed else 200,
        "dev_clips": {"transcribed": 40 if passed else 0, "reused": 60 if passed else 200},
    }


def test_the_summary_counts_passes_shares_and_the_forecast_per_rule() -> None:
    rep = load_benchmark("search_replication.py", "search_replication_bench")
    draws = [
        {
            "draw": 0,
            "rules": {"as-read": _row(True, True, 0.8, 0.9), "shrink": _row(True, True, 0.6, 0.95)},
            "seconds": {"search as-read": 10.0, "search shrink": 4.0},
        },
        {
            "draw": 1,
            "rules": {"as-read": _row(True, False, 0.8, 0.7), "shrink": _row(False, False, 0.0, None)},
            "seconds": {"search as-read": 20.0, "search shrink": 6.0},
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
    assert read["pass_rate_interval"][0] < 0.5 < read["pass_rate_interval"][1]
    assert read["mean_dev_utterances_transcribed"] == 150.0 and read["mean_search_seconds"] == 15.0
    assert read["mean_dev_clips_transcribed"] == 20.0  # run by that search, not taken from an earlier rule's


def test_unknown_rules_are_refused(tmp_path, capsys) -> None:
    rep = load_benchmark("search_replication.py", "search_replication_bench")
    with pytest.raises(SystemExit):
        rep.main(["--rules", "best", "--workspace", str(tmp_path)])
    assert "--rules from as-read, shrink, confirm" in capsys.readouterr().err


def _rule(passes: int, draws: int, share: float) -> dict:
    return {
        "draws": draws,
        "passes": passes,
        "pass_rate": round(passes / draws, 3),
        "mean_int8_macs_share": share,
        "mean_predicted_pass_chance": 0.9,
    }


def test_the_winner_passes_in_80_percent_of_draws_with_65_percent_int8_and_the_most_int8() -> None:
    pick = load_benchmark("replication/pick_rule.py", "pick_rule_bench")
    summary = {
        "as-read": _rule(5, 8, 0.80),  # most INT8, fails too often
        "shrink": _rule(7, 8, 0.68),
        "confirm": _rule(8, 8, 0.66),
    }
    assert pick.pick(summary) == "shrink"
    assert pick.pick({**summary, "shrink": _rule(7, 8, 0.64)}) == "confirm"  # below the share
    assert pick.pick({"as-read": _rule(5, 8, 0.8), "shrink": _rule(6, 8, 0.9)}) is None  # 75 % < 80 %
    low, high = pick.wilson(7, 8)
    assert low < 0.875 < high and 0.4 < low < 0.55 and high > 0.95


def test_the_pick_table_names_every_rule_the_winner_and_failed_draws(tmp_path, capsys) -> None:
    import json

    pick = load_benchmark("replication/pick_rule.py", "pick_rule_bench")
    result = {
        "complete": False,
        "summary": {"as-read": _rule(5, 8, 0.80), "shrink": _rule(7, 8, 0.68)},
        "draws": [{"draw": 3, "error": "RuntimeError: synthesis failed"}],
    }
    path = tmp_path / "rep.json"
    path.write_text(json.dumps(result))
    assert pick.main([str(path)]) == 0
    out = capsys.readouterr().out
    assert "winner: shrink" in out and "62.5 %" in out and "87.5 %" in out
    assert "not complete" in out and "draw 3: RuntimeError: synthesis failed" in out
    (tmp_path / "bad.json").write_text("{")
    assert pick.main([str(tmp_path / "bad.json")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1


def test_speaker_overlap_counts_what_two_draws_share() -> None:
    rep = load_benchmark("search_replication.py", "search_replication_bench")
    draws = [
        {"draw": 0, "eval_speaker_names": ["a", "b", "c", "d"], "dev_speaker_names": ["x", "y"]},
        {"draw": 1, "eval_speaker_names": ["a", "b", "e", "f"], "dev_speaker_names": ["z", "w"]},
        {"draw": 2, "error": "failed"},
    ]
    assert rep.speaker_overlap(draws) == {"pairs": 1, "eval_mean_shared": 0.5, "dev_mean_shared": 0.0}


def _part(first: int, calib: str = "c0ffee", rules=("as-read",)) -> dict:
    return {
        "benchmark": "search_replication",
        "complete": True,
        "wall_seconds": 100.0,
        "settings": {
            "calib_per_condition": 100,
            "dev_per_condition": 450,
            "eval_per_condition": 300,
            "quick": False,
            "rules": list(rules),
            "first_draw": first,
        },
        "base": {"calib_hash": calib},
        "draws": [
            {
                "draw": i,
                "sets": {"seed": 0, "draw": first + i},
                "eval_speaker_names": [f"s{first + i}", "shared"],
                "dev_speaker_names": ["d"],
                "rules": {"as-read": _row(True, (first + i) % 2 == 0, 0.7, 0.8)},
            }
            for i in range(2)
        ],
    }


def test_runs_of_other_draws_merge_into_one_result_and_mismatches_are_refused(tmp_path, capsys) -> None:
    import json

    rep = load_benchmark("search_replication.py", "search_replication_bench")
    merged = rep.merge([_part(3), _part(1)], ["b.json", "a.json"])
    assert [(d["draw"], d["sets"]["draw"]) for d in merged["draws"]] == [(0, 1), (1, 2), (2, 3), (3, 4)]
    assert merged["summary"]["as-read"]["draws"] == 4 and merged["summary"]["as-read"]["passes"] == 2
    assert merged["wall_seconds"] == 200.0 and [p["file"] for p in merged["parts"]] == ["b.json", "a.json"]
    assert merged["speaker_overlap"]["eval_mean_shared"] == 0.5 and merged["winner"] is None
    stopped_early = {
        **_part(3),
        "complete": False,
    }  # its two recorded draws finished: they fill draws 3 and 4
    assert rep.merge([_part(1), stopped_early], ["a.json", "b.json"])["complete"] is True
    assert rep.merge([_part(1), _part(5)], ["a.json", "b.json"])["complete"] is False  # draws 3 and 4 missing
    for bad, why in (
        ([_part(1), _part(2)], "same set draw"),
        ([_part(1), _part(3, calib="beef")], "another calibration set"),
        ([_part(1), _part(3, rules=("shrink",))], "rules"),
    ):
        with pytest.raises(ValueError, match=why):
            rep.merge(bad, ["a.json", "b.json"])
    paths = []
    for name, part in (("a.json", _part(1)), ("b.json", _part(2))):
        paths.append(tmp_path / name)
        paths[-1].write_text(json.dumps(part))
    out = tmp_path / "merged.json"
    assert rep.main(["--merge", *map(str, paths), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: cannot merge") and len(err.strip().splitlines()) == 1 and not out.exists()
    paths[1].write_text(json.dumps(_part(3)))
    assert rep.main(["--merge", *map(str, paths), "--out", str(out)]) == 0
    assert len(json.loads(out.read_text())["draws"]) == 4


def test_the_disagreement_rule_is_recorded_and_its_settings_must_agree_to_merge() -> None:
    rep = load_benchmark("search_replication.py", "search_replication_bench")
    assert rep._criterion({"dev_criterion": {"criterion": "wer"}}) == {"criterion": "wer"}
    assert rep._criterion({}) == {"criterion": "wer"}  # a record made before the criterion was recorded
    budget = {"max_disagreement_points": 1.5, "source": "given", "calibration": None}
    record = {
        "dev_criterion": {
            "criterion": "disagreement",
            "budget": budget,
            "unlabelled_dev_set": {"utterances": 9},
        }
    }
    assert rep._criterion(record) == {
        "criterion": "disagreement",
        "budget": budget,
        "unlabelled_utterances": 9,
    }
    base = _part(1, rules=("as-read", "disagreement"))
    base["settings"]["unlabelled_factor"] = 4
    other = _part(3, rules=("as-read", "disagreement"))
    other["settings"]["unlabelled_factor"] = 2
    with pytest.raises(ValueError, match="unlabelled_factor 2 differs from 4"):
        rep.merge([base, other], ["a.json", "b.json"])
    other["settings"]["unlabelled_factor"] = 4
    assert rep.merge([base, other], ["a.json", "b.json"])["complete"] is True


def test_the_labelled_dev_set_is_every_factor_th_utterance_of_each_condition_and_bucket(
    tmp_path, speech_like
):
    from tests.evalkit import write_small_set
    from workbench.speech.store import load_set

    rep = load_benchmark("search_replication.py", "search_replication_bench")
    texts = [f"TEXT NUMBER {i}" for i in range(24)]
    dev = write_small_set(tmp_path / "calib_sets", texts, speech_like, name="d-dev")
    labelled = rep.labelled_dev(dev, 2, tmp_path)
    groups: dict[tuple, list[str]] = {}
    for utt in dev.utterances:
        groups.setdefault((utt.condition, utt.bucket), []).append(utt.id)
    expected = {i for ids in groups.values() for i in ids[::2]}
    assert {u.id for u in labelled.utterances} == expected and len(expected) == 12
    assert all(u.text for u in labelled.utterances)  # the transcripts are kept
    again = load_set(tmp_path / "calib_sets" / "d-dev-labelled")
    assert again.content_hash == labelled.content_hash and again.card["made"]["role"] == "dev"

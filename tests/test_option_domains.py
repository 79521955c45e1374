"""Every numeric option of every verb, found in the argparse parsers themselves (a new option is covered the day it
is added), refuses the edges of its domain while the arguments are parsed: one ``error:`` line naming the option,
exit status 1, no traceback, nothing written. Also: no numeric option is a bare ``int``/``float`` (each takes its
domain from ``workbench.values.Number``), and no JSON under ``benchmarks/results/`` holds NaN or infinity."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest

from workbench.artifacts import json_text
from workbench.cli import build_parser, main
from workbench.errors import WorkbenchError
from workbench.values import Number

ROOT = Path(__file__).resolve().parent.parent
EDGES = ("0", "-1", "nan", "inf", "-inf", "1e30", "1.5", "x", "")


def _options(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.Action]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _options(sub, (*path, name))
        elif action.option_strings and action.nargs != 0:
            yield path, action


OPTIONS = list(_options(build_parser()))
NUMERIC = [(path, action) for path, action in OPTIONS if isinstance(action.type, Number)]


def _edges(domain: Number) -> list[str]:
    """The texts around the domain's bounds besides the fixed ones: each bound and just past it."""
    near = []
    for bound in (domain.low, domain.high):
        if bound is not None:
            step = 1 if domain.whole else max(1e-6, abs(bound) * 1e-9)
            near += [repr(bound), repr(bound - step), repr(bound + step)]
            if domain.whole:
                near += [str(int(bound)), str(int(bound) - 1), str(int(bound) + 1)]
    return list(dict.fromkeys([*EDGES, *near]))


def test_the_parsers_have_numeric_options_and_none_is_a_bare_int_or_float() -> None:
    assert len(NUMERIC) > 60  # every verb's counts, seconds, shares and weights
    bare = [f"{' '.join(p)} {a.option_strings[-1]}" for p, a in OPTIONS if a.type in (int, float)]
    defaults = [
        f"{' '.join(p)} {a.option_strings[-1]}"
        for p, a in OPTIONS
        if isinstance(a.default, (int, float))
        and not isinstance(a.default, bool)
        and not isinstance(a.type, Number)
    ]
    assert bare == [] and defaults == []


@pytest.mark.parametrize(
    "path,action", NUMERIC, ids=[f"{'-'.join(p)}{a.option_strings[-1]}" for p, a in NUMERIC]
)
def test_every_numeric_option_refuses_its_domains_edges(path, action, tmp_path, capsys, monkeypatch) -> None:
    domain: Number = action.type
    flag = action.option_strings[-1]
    monkeypatch.chdir(tmp_path)
    refused = [text for text in _edges(domain) if not domain.accepts(text)]
    # never inside any domain, whatever the option: NaN, infinities, text; a count takes no fraction or 1e30
    assert {"nan", "inf", "-inf", "x", ""} <= set(refused)
    if domain.whole:
        assert {"1.5", "1e30"} <= set(refused)
    if domain.low is not None and domain.low >= 0:
        assert "-1" in refused
    for text in refused:
        capsys.readouterr()
        status = main(["--workspace", str(tmp_path), *path, f"{flag}={text}"])
        out, err = capsys.readouterr()
        lines = err.strip().splitlines()
        assert status == 1 and len(lines) == 1 and lines[0].startswith("error: "), (text, out, err)
        assert f"argument {flag}" in lines[0] or flag in lines[0], lines[0]
        assert "Traceback" not in out + err
    assert list(tmp_path.iterdir()) == []  # refused before anything was written


def test_the_domains_accept_their_closed_bounds_and_refuse_the_open_ones() -> None:
    for _, action in NUMERIC:
        domain: Number = action.type
        for bound, is_open in ((domain.low, domain.low_open), (domain.high, domain.high_open)):
            if bound is not None:
                text = str(int(bound)) if domain.whole else repr(float(bound))
                assert domain.accepts(text) != is_open, (action.option_strings, text)


def test_a_record_never_holds_a_non_finite_number() -> None:
    with pytest.raises(WorkbenchError, match=r"non-finite number at accuracy\.candidates\[1\]\.wer"):
        json_text({"accuracy": {"candidates": [{"wer": 0.1}, {"wer": math.nan}]}})
    assert json.loads(json_text({"a": 1.5})) == {"a": 1.5}


def test_every_results_file_is_strict_json() -> None:
    def refuse(constant: str) -> None:
        raise ValueError(f"holds {constant}")

    files = sorted((ROOT / "benchmarks" / "results").rglob("*.json"))
    assert files
    for path in files:
        json.loads(path.read_text(encoding="utf-8"), parse_constant=refuse)

"""A kill at any rename, replace, unlink, rmdir or rmtree of ``data import``, ``calibrate`` and ``signoff`` leaves the
old state or the new one, and the next run removes whatever the kill left (``tests/killkit.py`` injects the kill;
``workbench.journal`` and ``workbench.artifacts`` do the work). For each verb the run is made once without a kill
to count its operations, then with a SIGKILL just before each of the operations ``killkit.kill_points`` picks (the
first, the last and the first of each kind of operation on each kind of artifact), each time from the same old
state."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import soundfile as sf
from dashkit import copy_artifacts
from killkit import Zygote, hidden_entries, kill_points

from workbench.artifacts import sha256_file
from workbench.calibration import histograms
from workbench.cli import main
from workbench.report.record import load_record
from workbench.speech.store import load_set, verify_set

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def zygote(tmp_path_factory):
    helper = Zygote(tmp_path_factory.mktemp("zygote"))
    yield helper
    helper.close()


@pytest.fixture
def ws(dash_artifacts, tmp_path) -> Path:
    return copy_artifacts(dash_artifacts.root, tmp_path / "ws")


def _files(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): sha256_file(p) for p in sorted(folder.rglob("*")) if p.is_file()
    }


def _restore(saved: Path, folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(saved, folder)


# ------------------------------------------------------------------------------------------------ data import


def _tiny_source(folder: Path, speech_like) -> Path:
    folder.mkdir()
    rows = []
    for i, text in enumerate(["alpha bravo", "charlie delta echo"]):
        sf.write(str(folder / f"c{i}.wav"), speech_like(1.5 + i, seed=i), 16_000, subtype="PCM_16")
        rows.append(json.dumps({"audio": f"c{i}.wav", "text": text, "speaker": f"s{i}"}))
    (folder / "data.jsonl").write_text("\n".join(rows) + "\n")
    return folder / "data.jsonl"


def test_data_import_killed_anywhere_leaves_the_old_set_or_the_new_one(
    zygote, ws, tmp_path, speech_like, capsys
):
    sets = ws / "calib_sets"
    argv = [
        "data",
        "import",
        "--name",
        "unit-eval",
        "--source",
        "manifest",
        "--no-progress",
        "--workers",
        "1",
        "--replace",
    ]
    argv += ["--path", str(_tiny_source(tmp_path / "src", speech_like)), "--root", str(sets)]
    saved = tmp_path / "saved"
    shutil.copytree(sets, saved)
    old = verify_set(load_set(sets / "unit-eval"))
    ops = zygote.ops(argv, ws)
    new = verify_set(load_set(sets / "unit-eval"))
    assert old != new and any(" rmtree " in op for op in ops) and any(" unlink " in op for op in ops)
    for i, at in enumerate(kill_points(ops)):
        _restore(saved, sets)
        op = zygote.killed(argv, ws, at)
        assert main(["data", "list", "--root", str(sets)]) == 0, (
            op
        )  # a reader: finishes or discards the write
        listed = capsys.readouterr().out
        assert verify_set(load_set(sets / "unit-eval")) in (old, new), op
        assert hidden_entries(sets) == [], (op, listed)
        assert sorted(p.name for p in sets.iterdir()) == ["unit-calib", "unit-eval"], op
        if i % 2 == 0 or at == len(ops):  # the next import runs clean (every other kill: the rest are alike)
            status, out, _ = zygote.run(argv, ws)
            assert status == 0 and verify_set(load_set(sets / "unit-eval")) == new, out[-2000:]
            assert hidden_entries(sets) == []


# ------------------------------------------------------------------------------------------------ calibrate


def _damage_cache(cache: Path) -> None:
    lines = cache.read_text().splitlines()
    name, _, _ = lines[1].rpartition(": ")
    lines[1] = f"{name}: zz00zz00"
    cache.write_text("\n".join(lines) + "\n")


def _without_histograms(files: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in files.items() if not k.endswith(histograms.SUFFIX)}


def test_calibrate_killed_at_any_write_leaves_each_file_old_or_new_and_no_temp_file(zygote, ws, tmp_path):
    """A damaged cache makes calibrate rewrite the cache, its sidecars and the variants. After a kill before any
    rename every artifact holds its old bytes or its new ones; the temp file the kill left is removed by the next
    run (or ``cache prune --yes``)."""
    engines = ws / "engines"
    run = next(p for p in engines.iterdir() if p.is_dir())
    cache = next(run.glob("calib-*-entropy.cache"))
    load_set(ws / "calib_sets" / "unit-calib")  # its stat index refreshed now, not by the counted run only
    pristine = _files(run)
    _damage_cache(cache)
    saved = tmp_path / "saved"
    shutil.copytree(run, saved)
    planted = _files(run)
    argv = [
        "calibrate",
        "--model",
        str(ws / "models" / "tiny"),
        "--set",
        str(ws / "calib_sets" / "unit-calib"),
        "--method",
        "entropy",
        "--no-recovery",  # the recipe of the pristine workspace's cache
    ]
    argv += ["--engines", str(engines)]
    ops = zygote.ops(argv, ws)
    new = _files(run)
    assert _without_histograms(new) == _without_histograms(pristine) and len(ops) >= 5
    for i, at in enumerate(kill_points(ops)):
        _restore(saved, run)
        op = zygote.killed(argv, ws, at)
        now = _files(run)
        temps = [k for k in now if k.startswith(".")]
        assert temps, op  # the kill came before a rename: its temp file is there
        for name, digest in now.items():
            if name not in temps and not name.endswith(histograms.SUFFIX):
                assert digest in (planted.get(name), new.get(name)), (op, name)
        if i % 2 == 0:  # the next calibrate removes the temp files and finishes the job
            status, out, _ = zygote.run(argv, ws)
            assert status == 0, out[-2000:]
            assert _without_histograms(_files(run)) == _without_histograms(new), op
        else:  # cache prune removes them too
            assert main(["cache", "--root", str(engines), "prune", "--yes"]) == 0
        assert hidden_entries(run) == [], op


# ------------------------------------------------------------------------------------------------ signoff


TRIO = ["report.html", "report.json", "report.md"]


def _trio_state(folder: Path, old: dict[str, str]) -> str:
    """'old' or 'new' when the folder holds exactly a whole report (the new one consistent with itself)."""
    assert sorted(p.name for p in folder.iterdir()) == TRIO
    if _files(folder) == old:
        return "old"
    record = load_record(folder / "report.json")
    digest = record["record_sha256"]
    assert all(digest in (folder / name).read_text() for name in ("report.md", "report.html"))
    assert all(v != old[k] for k, v in _files(folder).items())
    return "new"


def test_signoff_killed_anywhere_leaves_the_old_report_or_the_new_one(zygote, ws, tmp_path, dash_artifacts):
    folder = ws / "reports" / "unit-signoff"
    run = next(p for p in (ws / "engines").iterdir() if p.is_dir())
    argv = ["signoff", "--eval-set", str(ws / "calib_sets" / "unit-eval"), "--candidate"]
    argv += [f"fp32={run / 'model.fp32.onnx'}", "--no-latency", "--threads", "1", "--resamples", "100"]
    argv += ["--root", str(ws / "calib_sets"), "--out", str(folder), "--model", str(ws / "models" / "tiny")]
    argv += ["--replace"]
    argv += [
        "--target",
        "ort-cpu",
        "--as-given",
    ]  # the report trio alone: no target files made on the first run
    load_set(ws / "calib_sets" / "unit-eval")  # its stat index refreshed now, not by the counted run only
    saved = tmp_path / "saved"
    shutil.copytree(folder, saved)
    old = _files(folder)
    ops = zygote.ops(argv, ws)
    assert _trio_state(folder, old) == "new" and len(ops) >= 10
    seen = []
    for at in kill_points(ops, also=(len(ops) - 3,)):
        _restore(saved, folder)
        zygote.killed(argv, ws, at)
        load_record(folder / "report.json")  # any reader of the record completes or discards the write first
        seen.append(_trio_state(folder, old))
        if at == len(ops) - 3:  # killed while the old report was being removed: the next sign-off runs clean
            status, out, _ = zygote.run(argv, ws)
            assert status == 0 and _trio_state(folder, old) == "new", out[-2000:]
    assert seen[0] == "old" and seen[-1] == "new" and sorted(set(seen)) == ["new", "old"]
    assert seen == sorted(seen, key=["old", "new"].index)  # old until the journal, new after

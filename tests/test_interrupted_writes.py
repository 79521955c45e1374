"""What a killed write leaves is recognised and removed by the next run, and nothing else is: temp files of
``write_bytes_atomic`` (swept by the next write into their folder and by ``cache prune``), ``.discard`` folders of a
journal whose clean-up was killed, and journal parents a writer was killed in before it locked them."""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from workbench import journal
from workbench.artifacts import remove_stale_temps, stale_temps, write_text_atomic
from workbench.cli import main


def _temp(folder: Path, name: str, body: bytes = b"half a model") -> Path:
    path = folder / name
    path.write_bytes(body)
    return path


def test_next_write_removes_dead_temp_files_but_not_a_live_writers_or_the_users(tmp_path):
    dead = _temp(tmp_path, ".model.int8.onnx.k2j4x9_a.tmp")
    live = _temp(tmp_path, ".cache.json.abcdefgh.tmp")
    users = [_temp(tmp_path, ".notes.tmp"), _temp(tmp_path, "draft.abcdefgh.tmp")]  # not the writer's names
    target = tmp_path / "elsewhere.txt"
    target.write_text("kept")
    link = tmp_path / ".link.abcdefgh.tmp"
    link.symlink_to(target)
    fd = os.open(live, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)  # a writer still writing it
    try:
        write_text_atomic(tmp_path / "report.md", "new\n")
        assert not dead.exists() and live.exists() and all(p.exists() for p in users) and link.is_symlink()
    finally:
        os.close(fd)
    assert stale_temps(tmp_path) == [live]  # its writer is gone now
    assert remove_stale_temps(tmp_path) == [live] and not live.exists() and target.read_text() == "kept"


def test_an_empty_temp_file_of_a_writer_that_has_not_locked_it_yet_is_left(tmp_path):
    fresh = _temp(tmp_path, ".x.json.abcdefgh.tmp", b"")
    assert stale_temps(tmp_path) == []
    old = time.time() - 60
    os.utime(fresh, (old, old))
    assert stale_temps(tmp_path) == [fresh]


def test_cache_prune_lists_then_removes_temp_files_left_below_engines(tmp_path, capsys):
    engines = tmp_path / "engines"
    (engines / "abc123def456" / "compare").mkdir(parents=True)
    left = [
        _temp(engines / "abc123def456", ".calib-x-entropy.cache.hist.npz.a1b2c3d4.tmp"),
        _temp(engines / "abc123def456" / "compare", ".search-x.json.zz99yy88.tmp"),
    ]
    assert main(["cache", "--root", str(engines), "prune"]) == 0
    out = capsys.readouterr().out
    assert all(f"would delete {p} (left by an interrupted write)" in out for p in left) and all(
        p.exists() for p in left
    )
    assert main(["cache", "--root", str(engines), "prune", "--yes"]) == 0
    assert not any(p.exists() for p in left) and "deleted" in capsys.readouterr().out
    assert main(["cache", "--root", str(engines), "prune"]) == 0
    assert "nothing to prune" in capsys.readouterr().out


def test_recover_removes_a_half_removed_discard_folder_and_a_parent_killed_while_starting(tmp_path):
    half = tmp_path / ".unit-eval.k2j4x9_a.discard"  # killed while its old set was being removed
    (half / "old" / "unit-eval" / "audio").mkdir(parents=True)
    (half / "old" / "unit-eval" / "audio" / "a.flac").write_bytes(b"x" * 100)
    starting = tmp_path / ".report.q1w2e3r4.pending"  # killed between making the parent and locking it
    starting.mkdir()
    young = tmp_path / ".report.z9x8c7v6.pending"  # a writer that is starting right now
    young.mkdir()
    old = time.time() - 120
    os.utime(starting, (old, old))
    users = [tmp_path / ".trash.discard", tmp_path / ".mine.pending"]  # not names the journal makes
    for p in users:
        p.mkdir()
    done = journal.recover(tmp_path)
    assert not half.exists() and not starting.exists() and young.is_dir() and all(p.is_dir() for p in users)
    assert sorted(done) == sorted(
        f"removed {p.name}, left by an interrupted clean-up" for p in (half, starting)
    )


def test_files_together_replaces_a_report_trio_and_an_exception_leaves_the_old_one(tmp_path):
    for name in ("report.json", "report.md"):
        (tmp_path / name).write_text("old " + name)
    (tmp_path / "notes.txt").write_text("the user's")
    try:
        with journal.files_together(tmp_path, ["report.json", "report.md"], "report") as temps:
            temps["report.json"].write_text("new report.json")
            raise RuntimeError("rendering failed")
    except RuntimeError:
        pass
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == {
        "report.json": "old report.json",
        "report.md": "old report.md",
        "notes.txt": "the user's",
    }
    with journal.files_together(tmp_path, ["report.json", "report.md"], "report") as temps:
        for name, path in temps.items():
            path.write_text("new " + name)
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == {
        "report.json": "new report.json",
        "report.md": "new report.md",
        "notes.txt": "the user's",
    }

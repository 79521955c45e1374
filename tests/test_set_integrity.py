"""A stored set is trusted by its content: every change to its files is caught, links are refused, the index
stays a cache (a missing or stale index costs a re-hash, never a wrong answer), and ``data recard`` accepts a
meant change. Real sets on disk, written by ``store.write_set``, changed the way a person would change them."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from workbench.cli import main
from workbench.errors import WorkbenchError
from workbench.speech.integrity import INDEX, audio_hashes, read_index
from workbench.speech.recard import recard_set
from workbench.speech.records import Clip, Utterance
from workbench.speech.store import load_set, write_set


@pytest.fixture
def stored(tmp_path, speech_like) -> Path:
    """A six-clip set ``s`` under ``tmp_path/sets``."""
    clips = [
        Clip(
            Utterance(
                f"u{i}",
                f"WORDS OF CLIP {'X' * (i + 1)}",
                f"spk{i}",
                f"spk{i}",
                "us",
                "quiet",
                1.0 + i / 4,
                "t",
            ),
            speech_like(1.0 + i / 4, seed=i),
        )
        for i in range(6)
    ]
    return write_set(tmp_path / "sets" / "s", clips, {"role": "calib"}, [], {}).path


def _refused(path: Path, *expect: str) -> str:
    with pytest.raises(WorkbenchError) as info:
        load_set(path)
    message = str(info.value)
    assert "\n" not in message
    for text in expect:
        assert text in message, message
    return message


def _manifest(path: Path) -> list[dict]:
    return [json.loads(line) for line in (path / "manifest.jsonl").read_text().splitlines()]


def _write_manifest(path: Path, rows: list[dict]) -> None:
    (path / "manifest.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))


def test_a_fresh_set_verifies_from_its_index_without_hashing(stored) -> None:
    speech_set = load_set(stored)
    assert (stored / INDEX).is_file() and len(read_index(stored)) == 6
    _, _, stale = audio_hashes(stored, [u.audio for u in speech_set.utterances])
    assert not stale  # the build's index matched every file: nothing was hashed again


def test_an_edited_transcript_is_refused_until_recarded(stored) -> None:
    old = load_set(stored).content_hash
    rows = _manifest(stored)
    rows[2]["text"] = "A DIFFERENT TRANSCRIPT"
    _write_manifest(stored, rows)
    _refused(stored, "set s changed after it was carded", "data recard s", old[:12])
    done = recard_set(stored)
    assert done.old_hash == old and done.speech_set.content_hash != old
    assert "re-carded" in done.lines()[0]
    again = load_set(stored)
    assert again.content_hash == done.speech_set.content_hash
    assert again.utterances[2].text == "A DIFFERENT TRANSCRIPT"
    assert again.card["made"]["recarded"]["from_hash"] == old
    assert recard_set(stored).lines()[0].endswith("nothing to re-card")


def test_swapped_audio_is_refused_even_with_its_old_times_restored(stored) -> None:
    load_set(stored)
    target, other = stored / "audio" / "u1.flac", stored / "audio" / "u4.flac"
    before = os.stat(target)
    data, rate = sf.read(str(target))
    sf.write(str(target), np.flip(data), rate, subtype="PCM_16", format="FLAC")  # same length, other samples
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))  # touch -r: the old modification time
    _refused(stored, "changed after it was carded")
    shutil.copy2(other, target)  # another clip copied over it (cp -p)
    _refused(stored, "changed after it was carded")
    with pytest.raises(WorkbenchError, match=r"runs .* s but its manifest line says"):
        recard_set(stored)  # a clip of another length cannot be re-carded under the old duration


def test_a_deleted_clip_and_a_repeated_row_are_refused(stored) -> None:
    rows = _manifest(stored)
    _write_manifest(stored, rows + [rows[0]])
    _refused(stored, "utterance u0 is listed twice", "lines 1 and 7")
    _write_manifest(stored, rows)
    (stored / "audio" / "u3.flac").unlink()
    _refused(stored, "audio file", "u3.flac", "is missing")


def test_a_missing_or_damaged_index_costs_a_rehash_not_a_wrong_answer(stored) -> None:
    first = load_set(stored).content_hash
    (stored / INDEX).unlink()
    assert load_set(stored).content_hash == first and len(read_index(stored)) == 6  # re-hashed, re-indexed
    (stored / INDEX).write_text("{not json")
    assert load_set(stored).content_hash == first
    # an index that vouches for a file it never saw (forged hashes) is not consulted once the file's stat moved
    index = json.loads((stored / INDEX).read_text())
    index["audio"]["audio/u0.flac"][4] = "0" * 64
    index["audio"]["audio/u0.flac"][2] -= 1  # ctime
    (stored / INDEX).write_text(json.dumps(index))
    assert load_set(stored).content_hash == first


def test_a_read_only_set_is_verified_without_its_index(stored) -> None:
    (stored / INDEX).unlink()
    stored.chmod(0o555)
    try:
        if os.access(stored, os.W_OK):
            pytest.skip("running as a user who can write a read-only folder")
        assert load_set(stored).content_hash
        assert not (stored / INDEX).exists()
    finally:
        stored.chmod(0o755)


@pytest.mark.parametrize("what", ["audio file", "audio folder", "manifest", "set folder"])
def test_links_in_a_stored_set_are_refused(stored, tmp_path, what) -> None:
    outside = tmp_path / "outside"
    if what == "audio file":
        (outside).mkdir()
        shutil.move(stored / "audio" / "u2.flac", outside / "u2.flac")
        (stored / "audio" / "u2.flac").symlink_to(outside / "u2.flac")
        _refused(stored, "audio file", "is a link", "not followed")
    elif what == "audio folder":
        shutil.move(stored / "audio", outside)
        (stored / "audio").symlink_to(outside)
        _refused(stored, "folder", "is a link")
    elif what == "manifest":
        outside.mkdir()
        shutil.move(stored / "manifest.jsonl", outside / "manifest.jsonl")
        (stored / "manifest.jsonl").symlink_to(outside / "manifest.jsonl")
        _refused(stored, "manifest.jsonl", "is a link")
    else:
        shutil.move(stored, outside)
        stored.symlink_to(outside)
        _refused(stored, "speech set folder", "is a link")
        with pytest.raises(WorkbenchError, match="is a link"):
            load_set("s", root=stored.parent)  # by name as well as by path


def test_cli_list_names_a_changed_set_and_recard_accepts_it(stored, capsys) -> None:
    root = stored.parent
    shutil.copytree(stored, root / "t")
    rows = _manifest(root / "t")
    _write_manifest(root / "t", rows[:-1])  # a clip dropped from the manifest (its file left behind)
    assert main(["data", "list", "--root", str(root)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("s ") and "CHANGED" not in out[0]
    assert out[1].startswith("t ") and "CHANGED: set t changed after it was carded" in out[1]
    assert main(["data", "show", "t", "--root", str(root)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: set t changed") and "data recard t" in err[0]
    assert main(["data", "recard", "t", "--root", str(root)]) == 0
    assert "re-carded" in capsys.readouterr().out
    assert load_set("t", root=root).card["utterances"] == 5

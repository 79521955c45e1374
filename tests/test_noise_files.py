"""Recorded noise (a MUSAN-like folder) and room impulse responses made in the test: the files are split
between calibration and evaluation by content hash, each set uses only its own share, and the SNR
measured again on the stored 16-bit files is within 0.5 dB of the request."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import soundfile as sf
from layoutkit import make_rir, write_librispeech, write_musan, write_rirs

from workbench.config import EngineProfile, SetBuildConfig
from workbench.errors import WorkbenchError
from workbench.speech.builder import build_external_sets
from workbench.speech.conditions import measure_snr
from workbench.speech.importer import ImportConfig, import_set
from workbench.speech.layouts import open_source
from workbench.speech.noise_files import files_for_role, load_rir, reverberate, scan_folder, split_files
from workbench.speech.sources import collect
from workbench.speech.store import load_set, verify_set


@pytest.fixture
def musan(tmp_path):
    write_musan(tmp_path)
    return tmp_path / "musan"


@pytest.fixture
def rirs(tmp_path):
    write_rirs(tmp_path)
    return tmp_path / "rirs"


def test_noise_files_are_split_by_content_hash(musan, tmp_path):
    files = scan_folder(musan)
    assert {f.kind for f in files} == {"noise", "music"}  # the first sub-folder level is the kind
    split = split_files(files)
    calib, evaluation = ({f.sha256 for f in split[r]} for r in ("calib", "eval"))
    assert not calib & evaluation and calib | evaluation == {f.sha256 for f in files}
    for kind, count in (("noise", 7), ("music", 3)):
        assert sum(f.kind == kind for f in split["eval"]) == count // 3  # a third of each kind
    # the split follows the content, not names or places: rename and move every file
    moved = tmp_path / "elsewhere" / "musan"
    for f in files:
        target = moved / f.kind / "renamed" / f"x-{f.sha256[:8]}.wav"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(f.path, target)
    again = split_files(scan_folder(moved))
    assert {f.sha256 for f in again["eval"]} == evaluation
    # a kind with a single recording cannot be shared out: it stays in calibration
    lonely = tmp_path / "lonely"
    lonely.mkdir()
    shutil.copy(files[0].path, lonely / "only.wav")
    assert files_for_role(lonely, "calib")
    with pytest.raises(WorkbenchError, match="none for the evaluation set.*at least two files"):
        files_for_role(lonely, "eval")
    with pytest.raises(WorkbenchError, match="does not exist"):
        scan_folder(tmp_path / "nope")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "broken.wav").write_bytes(b"RIFF not audio")
    with pytest.raises(WorkbenchError, match="broken.wav cannot be read"):
        scan_folder(tmp_path / "bad")


def test_reverberation_is_a_convolution_aligned_on_the_direct_path(tmp_path):
    rir = make_rir(0.3, 0.25, 8_000, seed=1, predelay_s=0.01)
    sf.write(str(tmp_path / "r.wav"), rir, 8_000, subtype="FLOAT")
    loaded = load_rir(tmp_path / "r.wav")
    assert loaded[0] == pytest.approx(1.0) and len(loaded) == pytest.approx((0.3 - 0.01) * 16_000, abs=4)
    impulse = np.zeros(4000)
    impulse[100] = 0.5
    out = reverberate(impulse, loaded)
    assert len(out) == len(impulse) and np.allclose(out[:100], 0) and out[100] == pytest.approx(0.5)
    assert np.allclose(out[100:4000], 0.5 * loaded[:3900])


def _remeasure(noisy: np.ndarray, clean: np.ndarray) -> float:
    """SNR of a stored mix against the stored clean clip: the speech part is the least-squares scaled clean."""
    clean = clean.astype(np.float64)
    gain = float(np.dot(noisy, clean) / np.dot(clean, clean))
    return measure_snr(gain * clean, noisy.astype(np.float64))


@pytest.fixture
def corpus(tmp_path, speech_like):
    split, _ = write_librispeech(
        tmp_path / "corpus",
        "test-clean",
        ("19", "26", "32", "40"),
        1,
        3,
        lambda i: 2.0 + 0.5 * (i % 4),
        speech_like,
    )
    return split


def test_import_uses_its_own_noise_and_rirs_and_measures_snr(corpus, musan, rirs, tmp_path):
    root = tmp_path / "sets"
    sets = {}
    for role in ("eval", "calib"):
        cfg = ImportConfig(
            name=f"n-{role}", role=role, workers=2, noisy_share=1.0, noise_dir=musan, rir_dir=rirs
        )
        sets[role] = import_set(
            open_source("librispeech", corpus), cfg, "test", root=root, progress=False
        ).speech_set
    noise_split, rir_split = (
        split_files(scan_folder(musan)),
        split_files(scan_folder(rirs, "impulse response")),
    )
    used = {}
    for role, sset in sets.items():
        stored = load_set(sset.path)
        verify_set(stored)
        assert stored.card["conditions"] == {"quiet": 12, "noisy": 12, "noisy-reverberant": 12}
        clean = {u.id: stored.audio(u) for u in stored.utterances if u.condition == "quiet"}
        noise_names = {f.name for f in noise_split[role]}
        rir_names = {f.name for f in rir_split[role]}
        used[role] = set()
        for utt in stored.utterances:
            if utt.condition == "quiet":
                continue
            base = utt.id.rsplit("-", 1)[0]
            assert utt.extra["noise_file"] in noise_names and utt.noise_kind in ("noise", "music")
            used[role].add(utt.extra["noise_file"])
            assert abs(utt.snr_db - utt.requested_snr_db) <= 0.5
            assert 0.0 - 0.5 <= utt.snr_db <= 20.0 + 0.5
            if utt.condition == "noisy":
                assert abs(_remeasure(stored.audio(utt), clean[base]) - utt.requested_snr_db) <= 0.5
            else:
                assert utt.extra["impulse_response"] in rir_names
                rir = next(f for f in rir_split[role] if f.name == utt.extra["impulse_response"])
                wet = reverberate(clean[base], load_rir(rir.path))
                assert abs(_remeasure(stored.audio(utt), wet) - utt.requested_snr_db) <= 0.5
        assert stored.card["made"]["noise"]["noise_files"].keys() == noise_names
    assert (
        used["eval"] and used["calib"] and not used["eval"] & used["calib"]
    )  # neither hears the other's noise


def test_build_pair_uses_each_roles_noise(corpus, musan, tmp_path):
    clips, skipped = collect(open_source("librispeech", corpus))
    cfg = SetBuildConfig(
        name="nb",
        calib_per_condition=2,
        eval_per_condition=2,
        workers=1,
        noise_dir=musan,
        profile=EngineProfile(1.0, 3.0, 8.0),
    )
    built = build_external_sets(cfg, clips, skipped, "test", root=tmp_path / "sets")
    split = split_files(scan_folder(musan))
    for role, sset in (("calib", built.calib), ("eval", built.eval)):
        noisy = [u for u in sset.utterances if u.condition == "noisy"]
        assert noisy and all(u.extra["noise_file"] in {f.name for f in split[role]} for u in noisy)
        assert all(abs(u.snr_db - u.requested_snr_db) <= 0.5 for u in noisy)

"""The kill matrix's sampling (``tests/killkit.py``): every kind of operation on every kind of artifact is killed
at least once, the first and last operations always, and the same operations always give the same points."""

from __future__ import annotations

from killkit import artifact_kind, kill_points

OPS = [
    "1 replace engines/m/.calib-3cbb00a8f419-entropy.cache.ab12cd34.tmp",
    "2 replace engines/m/.calib-3cbb00a8f419-entropy.cache.json.zz99zz99.tmp",
    "3 replace engines/m/.model.int8-entropy-3cbb00a8f419.onnx.q1w2e3r4.tmp",
    "4 replace engines/m/.model.fp16-3cbb00a8f419.onnx.a1s2d3f4.tmp",
    "5 replace engines/m/.model.int8-entropy-3cbb00a8f419.plan.json.z1x2c3v4.tmp",
    "6 unlink engines/m/.model.fp16-3cbb00a8f419.onnx.a1s2d3f4.tmp",
    "7 unlink engines/m/.model.int8-entropy-3cbb00a8f419.onnx.q1w2e3r4.tmp",
    "8 rmtree engines/m/.signoff.k3j4h5g6.journal",
]


def test_temp_files_count_as_their_final_file() -> None:
    assert artifact_kind(OPS[0].split()[-1]) == ".cache"
    assert artifact_kind(OPS[1].split()[-1]) == ".cache.json"
    assert artifact_kind(OPS[2].split()[-1]) == artifact_kind("engines/m/model.fp32.onnx") == ".onnx"
    assert artifact_kind(OPS[4].split()[-1]) == ".plan.json"
    assert artifact_kind("reports/unit-signoff") == "unit-signoff"


def test_every_operation_and_artifact_kind_is_killed_once_with_the_first_and_last() -> None:
    points = kill_points(OPS)
    # 4 repeats a replace of an .onnx (3), 7 an unlink of an .onnx (6): the rest are each a first
    assert points == [1, 2, 3, 5, 6, 8]
    assert kill_points(OPS, also=(7,)) == [1, 2, 3, 5, 6, 7, 8]
    assert kill_points(list(OPS)) == points
    assert kill_points(OPS[:1]) == [1]

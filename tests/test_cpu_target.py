"""Signing off for a CPU deployment with ONNX Runtime (``--target ort-cpu``).

The candidate set per target (``workbench.quantize.targets``) on a tiny random Wav2Vec2 with the workbench's
own TensorRT-bound variants (INT8, FP16, a mixed plan; each with its plan file): TensorRT keeps them as
given; ONNX Runtime CPU judges FP32, the CPU flavour of every INT8 and mixed candidate (same plan and scales,
FP32 outside INT8, fused by ORT's integer kernels) and ONNX Runtime's dynamic INT8 quantization, and leaves
FP16 out with the reason. The sign-off job then judges the CPU flavour instead of the TensorRT-bound graph
and picks its winner from latency measured on the target itself.
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from workbench.artifacts import sha256_file
from workbench.backends.cpu_int8 import int8_weight_type
from workbench.config import EvidenceConfig
from workbench.errors import WorkbenchError
from workbench.quantize.metadata import made_of
from workbench.quantize.plan import (
    FP16,
    INT8,
    PrecisionPlan,
    precision_counts,
    precisions_of_onnx,
    quantizable_nodes,
)
from workbench.quantize.qdq import build_variant
from workbench.quantize.targets import FP16_LEFT_OUT, candidates_for_target, check_target_inputs, has_fp16


@pytest.fixture(scope="module")
def tiny_candidates(tmp_path_factory: pytest.TempPathFactory):
    """FP32 export of a tiny random Wav2Vec2 (with its description), its ranges, and the TensorRT-bound
    INT8, FP16 and mixed variants (the first two MatMuls kept in FP16), each with its plan file."""
    from tests.conftest import _speech_like
    from workbench.calibration.methods import MethodSpec
    from workbench.calibration.runner import calibrate_ranges
    from workbench.model.description import describe_model
    from workbench.model.export import export_onnx
    from workbench.model.loading import load_model
    from workbench.model.synthetic import save_random_wav2vec2

    work = tmp_path_factory.mktemp("cpu-target")
    description = describe_model(save_random_wav2vec2(work / "tiny", "tiny", seed=0))
    fp32 = export_onnx(load_model(description), work / "model.fp32.onnx", description)
    amax = calibrate_ranges(fp32, iter([_speech_like(2.0, seed=s) for s in range(3)]), 3, MethodSpec("max"))
    matmuls = [n for n in quantizable_nodes(onnx.load(str(fp32))) if "MatMul" in n][:2]
    mixed_plan = PrecisionPlan("mixed", "int8", {n: "fp16" for n in matmuls})
    built = {
        "int8": build_variant(fp32, amax, INT8, work / "model.int8.onnx", with_plan=True),
        "fp16": build_variant(fp32, {}, FP16, work / "model.fp16.onnx", with_plan=True),
        "mixed": build_variant(fp32, amax, mixed_plan, work / "model.mixed.onnx", with_plan=True),
    }
    candidates = [("fp32", fp32), ("fp16", built["fp16"]), ("int8", built["int8"]), ("mixed", built["mixed"])]
    return work, candidates, amax, matmuls


# the sign-off's latency verdict on tiny sets, where no candidate could meet the evidence rule
TINY_SET_EVIDENCE = EvidenceConfig(min_speakers=0, min_reference_words=0)


def test_tensorrt_judges_the_candidates_as_given(tiny_candidates) -> None:
    _, candidates, amax, _ = tiny_candidates
    made = candidates_for_target("tensorrt", candidates, amax)
    assert made.pairs() == candidates and not made.left_out and made.notes() == []


def test_cpu_target_judges_fp32_the_cpu_flavours_and_dynamic_int8(tiny_candidates) -> None:
    work, candidates, amax, kept = tiny_candidates
    before = {name: sha256_file(path) for name, path in candidates}
    made = candidates_for_target("ort-cpu", candidates, amax)
    assert [c.name for c in made.candidates] == ["fp32", "int8-cpu", "mixed-cpu", "int8-dynamic"]
    assert made.left_out == {"fp16": FP16_LEFT_OUT}
    assert made.candidates[0].path == candidates[0][1]
    assert {name: sha256_file(path) for name, path in candidates} == before  # the given files are untouched
    weights, why = int8_weight_type("auto")
    sources = dict(candidates)
    for cand in made.candidates[1:3]:
        model = onnx.load(str(cand.path))
        assert not has_fp16(model)  # FP32 between the islands: nothing in FP16 on the CPU
        made_from, how = made_of(cand.path)
        assert made_from == sha256_file(sources[cand.made_from])
        assert cand.path.parent == work and cand.path.name.endswith(
            f".ort-cpu-{weights}-{made_from[:12]}.onnx"
        )
        assert how["weights"] == weights and how["weights_reason"] == why and how["plan"]["rest"] == "fp32"
        ops = Counter(n.op_type for n in model.graph.node)
        assert ops["DequantizeLinear"] > 0
        assert {p.key for p in model.metadata_props} >= {"workbench.model", "workbench.ort_cpu.weights"}
    # the mixed plan's FP16 groups run in FP32 on the CPU; everything else it puts in INT8 is INT8
    precisions = {n: p for n, _, p in precisions_of_onnx(made.candidates[2].path)}
    assert all(precisions[n] == "fp32" for n in kept)
    int8_precisions = {n: p for n, _, p in precisions_of_onnx(made.candidates[1].path)}
    assert all(int8_precisions[n] == "int8" for n in kept)
    dynamic = made.candidates[3]
    ops = Counter(n.op_type for n in onnx.load(str(dynamic.path)).graph.node)
    assert ops["DynamicQuantizeLinear"] > 0 and ops["MatMulInteger"] > 0
    # its integer MatMuls count as INT8 compute layers (the tie rule and the dashboard's plan view read this)
    assert precision_counts(dynamic.path)["int8"] == ops["MatMulInteger"]
    made_from, how = made_of(dynamic.path)
    assert made_from == sha256_file(candidates[0][1]) and how["tool"].endswith("quantize_dynamic")
    assert how["weight_type"] == ("QUInt8" if weights == "u8" else "QInt8")
    assert any("dynamic INT8" in n for n in made.notes()) and any("fp16 left out" in n for n in made.notes())
    # made again from the same files: reused as they are, not rewritten
    stamps = {c.name: c.path.stat().st_mtime_ns for c in made.candidates}
    again = candidates_for_target("ort-cpu", candidates, amax)
    assert again == made and {c.name: c.path.stat().st_mtime_ns for c in again.candidates} == stamps
    # other ranges (another cache): the flavour is made again, the dynamic quantization (no ranges) is not
    other = candidates_for_target("ort-cpu", candidates, {k: v * 2 for k, v in amax.items()})
    assert other.candidates[1].path.stat().st_mtime_ns != stamps["int8-cpu"]
    assert other.candidates[3].path.stat().st_mtime_ns == stamps["int8-dynamic"]
    candidates_for_target("ort-cpu", candidates, amax)  # the module's other tests read the first ranges'


def test_cpu_flavour_computes_what_the_tensorrt_bound_graph_computes(tiny_candidates) -> None:
    """Same plan, same scales: the CPU flavour's logits sit on the Q/DQ graph's own (run unoptimised, float
    arithmetic as the graph means it), far closer than either is to FP32."""
    from tests.conftest import _speech_like
    from workbench.model.features import normalise_audio

    _, candidates, amax, _ = tiny_candidates
    made = candidates_for_target("ort-cpu", candidates, amax)
    x = {"input_values": normalise_audio(_speech_like(3.0, seed=20))[None]}
    plain = ort.SessionOptions()
    plain.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL

    def run(path: Path, opts=None) -> np.ndarray:
        return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"]).run(None, x)[0]

    # the INT8 plan's TensorRT-bound graph with FP32 between the islands is what the flavour must match
    reference = build_variant(
        candidates[0][1],
        amax,
        PrecisionPlan("int8", "int8", rest="fp32"),
        made.candidates[1].path.with_suffix(".ref.onnx"),
    )
    ref, fp32, cpu = run(reference, plain), run(candidates[0][1]), run(made.candidates[1].path)
    assert np.abs(cpu - ref).mean() <= 0.05 * np.abs(ref - fp32).mean()


def test_cpu_target_refuses_what_it_cannot_make_without_writing(tiny_candidates, tmp_path) -> None:
    _, candidates, _, _ = tiny_candidates
    with pytest.raises(WorkbenchError, match="give that cache as --cache"):
        candidates_for_target("ort-cpu", candidates[:1] + candidates[2:3], None)
    with pytest.raises(WorkbenchError, match="give that cache as --cache"):  # before any model work
        check_target_inputs("ort-cpu", candidates, has_ranges=False)
    check_target_inputs("ort-cpu", candidates, has_ranges=False, as_given=True)
    check_target_inputs("tensorrt", candidates, has_ranges=False)
    # a Q/DQ file with FP16 in it and no plan beside it: which nodes are FP16 on purpose is unknown
    lone = tmp_path / "lone.int8.onnx"
    lone.write_bytes(candidates[2][1].read_bytes())
    with pytest.raises(WorkbenchError, match="mixes INT8 with FP16 and has no plan file"):
        candidates_for_target("ort-cpu", [candidates[0], ("lone", lone)], None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lone.int8.onnx"]


def test_signoff_for_the_cpu_target_judges_the_cpu_flavours_and_ships_on_its_latency(
    tiny_sets, tmp_path, monkeypatch, caplog
) -> None:
    from workbench.evaluate.gates import GateConfig
    from workbench.evaluate.latency import LatencyConfig
    from workbench.jobs.signoff import SignoffInputs, run

    caplog.set_level(logging.INFO, logger="workbench")
    from workbench.model.synthetic import save_random_wav2vec2

    model = save_random_wav2vec2(tmp_path / "tiny", "tiny", seed=0)
    result = run(
        SignoffInputs(
            eval_set=str(tiny_sets.eval.path),
            out_dir=tmp_path / "reports" / "cpu",
            model=model,
            calib_set=str(tiny_sets.calib.path),
            method="max",
            engines=tmp_path / "engines",
            calib_root=tiny_sets.calib.path.parent,
            # a random model transcribes noise: wide gates, so the verdict is decided by latency
            gates=GateConfig(max_wer_delta_points=100.0, max_condition_wer_delta_points=100.0),
            evidence=TINY_SET_EVIDENCE,  # a tiny set: the evidence rule would call every candidate insufficient
            latency=LatencyConfig((1,), warmup=1, repeats=5),
            threads=1,
            resamples=200,
            target="ort-cpu",
            outside_profile="score",
        ),
    )
    record = result.record
    names = ["fp32", "int8-max-cpu", "int8-dynamic"]
    assert record["candidates"] == names and record["baseline"] == "fp32"
    assert [v["candidate"] for v in record["verdicts"]] == names
    assert set(record["latency"]) == set(names)  # WER and latency on the same candidates
    judged = {a["role"]: a["path"] for a in record["provenance"]["artifacts"]}
    assert ".ort-cpu-" + int8_weight_type("auto")[0] + "-" in judged["candidate int8-max-cpu"]
    assert "candidate int8-max" not in judged and "candidate fp16" not in judged  # the TensorRT-bound graphs
    backend = record["backend"]
    assert backend["target"] == backend["backend"] == "ort-cpu"
    assert [c["name"] for c in backend["candidates"]["candidates"]] == names
    assert backend["candidates"]["left_out"] == {"fp16": FP16_LEFT_OUT}
    decision = record["decision"]
    assert decision["measured_on"] == decision["target"] == "ort-cpu"
    assert decision["mode"] == "ship" and result.recommendation in names
    assert set(decision["ratios"]) == set(names)  # the winner comes from the target's own latency ratios
    leader = min(names, key=lambda n: (decision["ratios"][n]["high"], names.index(n)))
    assert result.recommendation in decision["equally_fast"] and leader in decision["equally_fast"]
    assert any(line.startswith("ort-cpu: int8-max-cpu: ONNX Runtime CPU flavour") for line in caplog.messages)
    md = result.paths["markdown"].read_text()
    assert "Candidates for the target (ort-cpu)" in md and "int8-dynamic" in md and "left out" in md
    # the dashboard's Trade-off page shows this target's candidates and where they were timed
    pytest.importorskip("streamlit")
    from streamlit.testing.v1 import AppTest

    from workbench.dashboard.paths import ENV_VAR

    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    at = AppTest.from_string(
        "from workbench.dashboard.pages import tradeoff\ntradeoff.render()", default_timeout=60
    )
    at.query_params["report"] = "cpu"
    at.run()
    assert not at.exception
    shown = "\n".join(str(m.value) for m in at.markdown)
    assert "Deployment target: **ort-cpu**; measured on ort-cpu" in shown and "picks the winner" in shown
    assert list(at.dataframe[0].value["candidate"]) == names
    made = at.dataframe[1].value
    assert list(made["candidate"]) == [*names, "fp16"] and list(made["made from"])[:3] == [
        "-",
        "int8-max",
        "fp32",
    ]


def test_signoff_judges_the_cpu_flavour_with_the_weights_asked_for(tiny_sets, tmp_path) -> None:
    """``ort_cpu_weights="u8"``: the CPU flavour the sign-off judges has uint8 weights (the U8U8 path of a
    CPU without VNNI), whatever this CPU's own choice."""
    from workbench.evaluate.gates import GateConfig
    from workbench.jobs.signoff import SignoffInputs, run
    from workbench.model.synthetic import save_random_wav2vec2

    model = save_random_wav2vec2(tmp_path / "tiny", "tiny", seed=0)
    record = run(
        SignoffInputs(
            eval_set=str(tiny_sets.eval.path),
            out_dir=tmp_path / "reports" / "cpu-u8",
            model=model,
            calib_set=str(tiny_sets.calib.path),
            method="max",
            engines=tmp_path / "engines",
            calib_root=tiny_sets.calib.path.parent,
            gates=GateConfig(max_wer_delta_points=100.0, max_condition_wer_delta_points=100.0),
            latency=None,
            threads=1,
            resamples=200,
            target="ort-cpu",
            outside_profile="score",
            ort_cpu_weights="u8",
        ),
    ).record
    judged = {a["role"]: a["path"] for a in record["provenance"]["artifacts"]}
    assert ".ort-cpu-u8-" in judged["candidate int8-max-cpu"]
    flavour = onnx.load(judged["candidate int8-max-cpu"])
    weight_types = {i.data_type for i in flavour.graph.initializer if i.data_type in (2, 3)}  # UINT8, INT8
    assert weight_types == {2}


# ---------------------------------------------------------------- the search's latency objective
def test_latency_objective_keeps_the_fastest_passing_plan_and_most_int8_among_equals() -> None:
    from workbench.evaluate.verdict import Ratio
    from workbench.search.latency_objective import choose

    def ratio(name: str, low: float, high: float) -> Ratio:
        return Ratio(name, (low + high) / 2, low, high, 1, 1, 10)

    order = ["k2", "k4", "k8"]
    int8 = {"k2": 30, "k4": 20, "k8": 10}
    # k4 is faster than every other beyond the intervals: it wins though k2 has more INT8
    apart = {"k2": ratio("k2", 0.90, 0.95), "k4": ratio("k4", 0.60, 0.65), "k8": ratio("k8", 0.80, 0.85)}
    assert choose(order, apart, int8) == ("k4", ["k4"])
    # k2 and k4 overlap the leader (k4): equally fast, the one with more INT8 wins
    close = {"k2": ratio("k2", 0.62, 0.70), "k4": ratio("k4", 0.60, 0.66), "k8": ratio("k8", 0.80, 0.85)}
    assert choose(order, close, int8) == ("k2", ["k2", "k4"])


def test_latency_objective_is_refused_where_the_target_does_not_run_here(tmp_path) -> None:
    from workbench.jobs.search import SearchInputs, check

    with pytest.raises(WorkbenchError, match="latency can be measured here only on ort-cpu"):
        check(SearchInputs(calib_set=str(tmp_path / "nothing"), latency_target="tensorrt"))


def test_search_with_the_latency_objective_times_passing_plans_on_the_cpu(
    tiny_sets, tmp_path, caplog
) -> None:
    caplog.set_level(logging.INFO, logger="workbench")
    from workbench.evaluate.gates import GateConfig
    from workbench.jobs.search import SearchInputs, run
    from workbench.model.synthetic import save_random_wav2vec2

    model = save_random_wav2vec2(tmp_path / "tiny", "tiny", seed=0)
    result = run(
        SearchInputs(
            model=model,
            calib_set=str(tiny_sets.calib.path),
            method="max",
            per_condition=1,
            engines=tmp_path / "engines",
            calib_root=tiny_sets.calib.path.parent,
            gates=GateConfig(max_wer_delta_points=100.0, max_condition_wer_delta_points=100.0),
            resamples=200,
            refine=0,
            threads=1,
            progress=False,
            latency_target="ort-cpu",
        ),
    )
    data = result.data
    timed = data["latency_objective"]
    passing = [c["name"] for c in data["candidates"] if c["passed"]]
    assert timed["target"] == "ort-cpu" and timed["timed"] == passing and passing
    assert set(timed["ratios"]) == {"fp32", *passing} and timed["ratios"]["fp32"]["estimate"] == 1.0
    chosen = next(c for c in data["candidates"] if c["name"] == timed["chosen"])
    assert (
        data["found"]["plan"]["overrides"] == chosen["plan"]["overrides"]
    )  # the found plan is the chosen one
    assert timed["chosen"] in timed["equally_fast"]
    assert all(r["low"] <= r["estimate"] <= r["high"] for r in timed["ratios"].values())
    assert any(line.startswith("fastest passing plan on ort-cpu") for line in caplog.messages)
    assert any("objective: latency on ort-cpu" in line for line in result.lines())

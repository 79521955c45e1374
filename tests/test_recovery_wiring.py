"""The recovered FP32 source reaches every variant built from a recovery cache: the analyses' variant runner, the
found plan, the compare job's candidates; provenance says which techniques were on; a cache made with other
recovery options is never used silently. Small graphs in code, plus the tiny random Wav2Vec2 of
``test_recovery_calibrate``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from tests.test_recovery import block_model, inputs, run
from workbench.calibration import cache as cache_mod
from workbench.calibration import recovery as rec
from workbench.calibration.methods import MethodSpec
from workbench.calibration.recovery import RecoveryOptions
from workbench.compare.sensitivity import VariantRunner
from workbench.errors import WorkbenchError
from workbench.jobs import calibrate
from workbench.jobs.prepare import prepare
from workbench.model.synthetic import save_random_wav2vec2
from workbench.quantize.plan import FP32, PrecisionPlan, quantizable_nodes
from workbench.quantize.recovered import RecoveredSource
from workbench.quantize.smoothing import apply_smoothing, smoothing_targets
from workbench.search.found import matching_search


def _means(model: onnx.ModelProto, x: np.ndarray) -> dict[str, np.ndarray]:
    """Each MatMul input's per-channel mean over ``x`` (what the calibration pass collects)."""
    from tests.test_recovery import _with_outputs

    names = sorted({n.input[0] for n in model.graph.node if n.op_type == "MatMul"})
    import onnxruntime as ort

    session = ort.InferenceSession(
        _with_outputs(model, names).SerializeToString(), providers=["CPUExecutionProvider"]
    )
    values = dict(zip(names, session.run(names, {"x": x})))
    return {n: v.reshape(-1, v.shape[-1]).mean(0) for n, v in values.items()}


def _inits(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    return {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}


def _amax(model: onnx.ModelProto, x: np.ndarray) -> dict[str, float]:
    import onnxruntime as ort

    from tests.test_recovery import _with_outputs

    names = sorted({i for n in model.graph.node for i in n.input if i and i not in _inits(model)})
    session = ort.InferenceSession(
        _with_outputs(model, names).SerializeToString(), providers=["CPUExecutionProvider"]
    )
    return {n: float(np.abs(v).max()) for n, v in zip(names, session.run(names, {"x": x}))}


def test_a_plan_with_bias_correction_differs_only_in_the_corrected_weights() -> None:
    model = block_model()
    x = inputs(mean=2.0)
    means, amax = _means(model, x), _amax(model, x)
    plan = PrecisionPlan("mixed", "int8", {"k": "fp16"})  # k stays in FP16: its bias must stay as it is
    plain = onnx.load_from_string(VariantRunner(model, amax).model_bytes(plan))
    recovered = RecoveredSource(None, means, options={"bias_correction": True})
    corrected = onnx.load_from_string(VariantRunner(model, amax, recovered=recovered).model_bytes(plan))
    before, after = _inits(plain), _inits(corrected)
    changed = {n for n in before if n in after and not np.array_equal(before[n], after[n])}
    added = set(after) - set(before)
    # the INT8 layers with a bias Add (q, ffn_out) get it lowered; those without (ffn_in, head) get a new Add
    # (stored in FP16 like every float constant between the Q/DQ islands)
    assert changed == {"bq_fp16", "bb_fp16"}
    assert {n.removesuffix("_fp16") for n in added} == {"ffn_in_bias_correction", "head_bias_correction"}
    assert set(before) - set(after) == set()
    kept = {n.name: list(n.input) for n in plain.graph.node}
    new_nodes = [n for n in corrected.graph.node if n.name not in kept]
    assert sorted(n.name for n in new_nodes) == ["ffn_in_bias_correction", "head_bias_correction"]
    assert all(n.op_type == "Add" for n in new_nodes)
    # the head's correction writes the graph output itself: the model's interface stays as it is
    assert [o.name for o in corrected.graph.output] == [o.name for o in model.graph.output] == ["y"]
    # the shift removed is the planted one: E[x] @ dW per output channel
    _, record = recovered.for_plan(plan.with_guard({}), model)
    assert set(record["bias_correction"]["shifts"]) == {"q", "ffn_in", "ffn_out", "head"}
    assert record["techniques"] == ["bias_correction"]
    # and it helps: the INT8 output's mean error shrinks
    exact = run(model, x)
    err_plain = np.abs((run(plain, x) - exact).mean((0, 1))).max()
    err_corrected = np.abs((run(corrected, x) - exact).mean((0, 1))).max()
    assert err_corrected < err_plain


def test_the_runner_quantizes_the_smoothed_graph_and_keeps_the_export_for_fp32() -> None:
    model = block_model()
    targets = smoothing_targets(model)
    rng = np.random.default_rng(4)
    scales = {
        t.tensor: rng.uniform(0.3, 3.0, len(t.weight_absmax(model))).astype(np.float32) for t in targets
    }
    smoothed, _ = apply_smoothing(model, scales, targets)
    x = inputs()
    # the folded FP32 graph computes the same function
    np.testing.assert_allclose(run(smoothed, x), run(model, x), rtol=1e-4, atol=1e-4)
    amax = _amax(smoothed, x)
    runner = VariantRunner(model, amax, recovered=RecoveredSource(smoothed, None, smoothed=True))
    assert runner.model_bytes(FP32) == model.SerializeToString()
    int8 = onnx.load_from_string(runner.model_bytes(PrecisionPlan("int8", "int8", rest="fp32")))
    # the LayerNorm fold (ln2's gamma) and the scale nodes reached the variant
    assert not np.allclose(_inits(int8)["g2"], _inits(model)["g2"])
    np.testing.assert_allclose(_inits(int8)["g2"], _inits(smoothed)["g2"].astype(_inits(int8)["g2"].dtype))
    ops = [n.op_type for n in int8.graph.node]
    assert ops.count("Mul") >= sum(n.op_type == "Mul" for n in smoothed.graph.node)


def calibrate_tiny(
    tmp_path_factory: pytest.TempPathFactory, tiny_sets, recovery: RecoveryOptions, ort_cpu: bool = False
) -> tuple[Path, Path, calibrate.CalibrateResult]:
    """The tiny random Wav2Vec2 calibrated (percentile 99.99) on the tiny calibration set with ``recovery``:
    (model folder, engines root, the calibrate job's result). Export parity is checked on one clip (its own tests
    are test_calibrate_tiny's)."""
    model = save_random_wav2vec2(tmp_path_factory.mktemp("models") / "tiny", "tiny", seed=0)
    root = tmp_path_factory.mktemp("engines")
    made = calibrate.run(
        calibrate.CalibrateInputs(
            model,
            str(tiny_sets.calib.path),
            MethodSpec("percentile", 99.99),
            engines=root,
            recovery=recovery,
            ort_cpu=ort_cpu,
            parity_clips=1,
        )
    )
    return model, root, made


@pytest.fixture(scope="module")
def tiny_bc(tmp_path_factory: pytest.TempPathFactory, tiny_sets):
    return calibrate_tiny(tmp_path_factory, tiny_sets, RecoveryOptions(bias_correction=True))


def test_prepare_brings_the_caches_recovery_and_refuses_other_options(tiny_bc, tiny_sets) -> None:
    model, root, made = tiny_bc
    calib = str(tiny_sets.calib.path)
    given = prepare(model, calib, "percentile", root=root, cache_path=made.cache)
    assert given.recovered is not None and given.recovered.techniques == ["bias_correction"]
    assert given.tag.endswith("-bc") and given.provenance()["recovery"]["bias_correction"] is True
    same = prepare(
        model,
        calib,
        "percentile",
        root=root,
        cache_path=made.cache,
        recovery=RecoveryOptions(bias_correction=True),
    )
    assert same.recovered is not None
    with pytest.raises(
        WorkbenchError, match="was made with --bias-correction, not with no accuracy recovery"
    ):
        prepare(model, calib, "percentile", root=root, cache_path=made.cache, recovery=RecoveryOptions())
    with pytest.raises(WorkbenchError, match="not with --refine-ranges --bias-correction"):
        prepare(
            model,
            calib,
            "percentile",
            root=root,
            cache_path=made.cache,
            recovery=RecoveryOptions(bias_correction=True, refine_ranges=True),
        )


def test_a_found_plan_is_built_bias_corrected_and_says_so(tiny_bc, tiny_sets, tmp_path: Path) -> None:
    model, root, made = tiny_bc
    prepared = prepare(model, str(tiny_sets.calib.path), "percentile", root=root, cache_path=made.cache)
    export = onnx.load(str(prepared.fp32_onnx))
    nodes = quantizable_nodes(export)
    plan = PrecisionPlan("half", "int8", {n: "fp16" for n in nodes[::2]}).with_guard(prepared.guard)
    record = prepared.build(plan, tmp_path / "model.half.onnx", export)
    assert record is not None and record["techniques"] == ["bias_correction"]
    corrected = set(record["bias_correction"]["shifts"])
    int8_nodes = {n for n in nodes if plan.precision_of(n) == "int8"}
    assert corrected and corrected <= int8_nodes
    written = json.loads((tmp_path / "model.half.plan.json").read_text())
    assert written["recovery"]["techniques"] == ["bias_correction"]
    # the same plan from an unrecovered calibration: the variants differ only in the corrected layers' biases
    plain = prepare(model, str(tiny_sets.calib.path), "percentile", root=root)
    assert plain.recovered is None and plain.cache.content_hash == prepared.cache.content_hash
    assert plain.provenance()["recovery"] is None and plain.tag != prepared.tag
    plain.build(plan, tmp_path / "model.plain.onnx", export)
    a = _inits(onnx.load(str(tmp_path / "model.plain.onnx")))
    b = _inits(onnx.load(str(tmp_path / "model.half.onnx")))
    changed = {n for n in a if n in b and not np.array_equal(a[n], b[n])} | (set(b) - set(a))
    changed = {n.removesuffix("_fp16") for n in changed}  # float constants between the islands are FP16
    allowed = set().union(*(_biases_of(export, c) | {f"{c}_bias_correction"} for c in corrected))
    assert changed and changed <= allowed


def _biases_of(model: onnx.ModelProto, node_name: str) -> set[str]:
    """The bias initializers a node's correction may lower (its Add's constant, a Conv's B)."""
    inits = {i.name for i in model.graph.initializer}
    node = next(n for n in model.graph.node if n.name == node_name)
    out = {i for i in node.input[2:] if i in inits}
    for reader in model.graph.node:
        if node.output[0] in reader.input and reader.op_type == "Add":
            out |= {i for i in reader.input if i in inits}
    return out


def test_a_replaced_means_file_is_noticed(tiny_bc, tmp_path: Path) -> None:
    _, _, made = tiny_bc
    cache = cache_mod.load(made.cache)
    assert rec.source_problem(made.cache, cache.recovery) is None
    copy = tmp_path / made.cache.name
    copy.write_text(made.cache.read_text())
    cache_mod.sidecar(copy).write_text(cache_mod.sidecar(made.cache).read_text())
    means = rec.load_arrays(rec.means_path(made.cache))
    assert means
    rec.save_arrays(rec.means_path(copy), {k: v + 1.0 for k, v in means.items()})
    assert "not the one it was made with" in str(rec.source_problem(copy, cache.recovery))
    rec.means_path(copy).unlink()
    with pytest.raises(WorkbenchError, match="input means .* are missing"):
        rec.recovered_source(copy, cache.recovery, cache.keys["recovery"])


def test_a_search_made_with_recovery_is_offered_only_to_its_own_cache(tiny_bc, tiny_sets) -> None:
    """Bias correction leaves the scales, so the plain cache has the same content hash: the recovery options
    in the search's provenance keep a sign-off of the plain cache from taking the bias-corrected plan."""
    from workbench.artifacts import sha256_file, write_json_atomic
    from workbench.compare.outputs import header
    from workbench.search.outputs import SEARCH_FORMAT

    model, root, made = tiny_bc
    prepared = prepare(model, str(tiny_sets.calib.path), "percentile", root=root, cache_path=made.cache)
    plain = prepare(model, str(tiny_sets.calib.path), "percentile", root=root)
    assert plain.cache.content_hash == prepared.cache.content_hash and plain.cache_path != prepared.cache_path
    folder = prepared.folder / "compare"
    found_onnx = prepared.folder / "model.found-bc.onnx"
    prepared.build(PrecisionPlan("found-bc", "int8").with_guard(prepared.guard), found_onnx)
    record = {
        **header(SEARCH_FORMAT, {**prepared.provenance(), "dev_set": "d", "sensitivity": "s"}),
        "found": {
            "name": "found-bc",
            "onnx_path": str(found_onnx),
            "onnx_sha256": sha256_file(found_onnx),
            "int8_share": 1.0,
        },
    }
    write_json_atomic(folder / "search-found-bc.json", record)
    assert matching_search(prepared.fp32_onnx, prepared.cache_path) is not None
    assert matching_search(prepared.fp32_onnx, plain.cache_path) is None


def test_the_verbs_take_the_recovery_options_and_job_files_keep_them(tmp_path: Path) -> None:
    import argparse

    from workbench.commands.options import add_model_arguments, analysis_fields
    from workbench.jobs import codec, search

    parser = argparse.ArgumentParser()
    add_model_arguments(parser)
    given = ["--engines", str(tmp_path)]

    def recovery(*extra: str) -> RecoveryOptions | None:
        return analysis_fields(parser.parse_args([*given, *extra]), "searched")["recovery"]

    # none given: the default recipe's (the project file's too), said for the record; with --cache: the cache's own
    defaulted = analysis_fields(parser.parse_args(given), "searched")
    assert defaulted["recovery"] == RecoveryOptions(bias_correction=True, clip_search=True)
    assert any("the default recipe's accuracy recovery" in line for line in defaulted["assumed"])
    assert recovery("--cache", str(tmp_path / "c.cache"), "--model", str(tmp_path)) is None
    # the opt-outs: none at all, or the default's without one; options turned on are exactly those
    assert recovery("--no-recovery") == RecoveryOptions()
    assert recovery("--no-clip-search") == RecoveryOptions(bias_correction=True)
    assert recovery("--refine-ranges") == RecoveryOptions(refine_ranges=True)
    with pytest.raises(WorkbenchError, match="--no-recovery turns every"):
        recovery("--no-recovery", "--bias-correction")
    asked = analysis_fields(
        parser.parse_args([*given, "--bias-correction", "--smoothquant", "0.5"]), "searched"
    )["recovery"]
    assert asked == RecoveryOptions("0.5", bias_correction=True)
    inputs = search.SearchInputs(recovery=asked)
    codec.write_job(tmp_path / "job.json", inputs)
    assert codec.read_job(tmp_path / "job.json")[1].recovery == asked


def test_pruning_a_cache_deletes_its_recovery_files(tmp_path: Path) -> None:
    from workbench.calibration.prune import delete_cache

    cache = tmp_path / "calib-x-percentile-sq-bc.cache"
    files = [cache, cache_mod.sidecar(cache), rec.means_path(cache), rec.smoothed_path(cache)]
    for f in files:
        f.write_text("x")
    other = tmp_path / "calib-x-percentile.cache.means.npz"  # another cache's file stays
    other.write_text("x")
    delete_cache(cache, tmp_path)
    assert not any(f.exists() for f in files) and other.exists()

"""Backend selection (``--backend ort-cpu|ort-cuda|tensorrt``): one factory for every step, each number recorded
with its backend and device, and a backend this machine cannot run refused with one ``error:`` line before any
work (calibrate, compare, search, signoff, the dashboard's Run page)."""

from __future__ import annotations

import pytest
from evalkit import DEFAULT_MODEL, constant_ctc_onnx, write_small_set

from workbench.backends.factory import RunnerFactory, check_backend, ort_providers
from workbench.cli import main
from workbench.errors import WorkbenchError
from workbench.optional import try_import

ort = try_import("onnxruntime")[0]
torch = try_import("torch")[0]
HAS_CUDA_EP = ort is not None and "CUDAExecutionProvider" in ort.get_available_providers()
HAS_GPU = torch is not None and torch.cuda.is_available()


def test_unknown_backend_is_refused() -> None:
    with pytest.raises(WorkbenchError, match="unknown backend 'cuda'.*ort-cpu, ort-cuda, tensorrt"):
        RunnerFactory("cuda")
    with pytest.raises(WorkbenchError, match="unknown backend"):
        check_backend("trt")


def test_ort_cpu_runner_says_what_produced_its_numbers(tmp_path) -> None:
    import numpy as np

    model = constant_ctc_onnx(tmp_path / "c.onnx", "HELLO")
    assert ort_providers("ort-cpu") == ["CPUExecutionProvider"]
    runner = RunnerFactory("ort-cpu", threads=1).runner(model, "const")
    with runner:
        out = runner.infer({"input_values": np.zeros((1, 1600), np.float32)})
    assert out["logits"].ndim == 3 and runner.last_inference_time() > 0
    info = runner.describe()
    assert info["backend_name"] == "ort-cpu" and info["device"].startswith("cpu")
    assert info["providers"] == "CPUExecutionProvider"
    assert info["spinning"] == "stops when a run returns"


def test_ort_sessions_stop_spinning_when_a_run_returns() -> None:
    """Interleaved timing on a small CPU: one session's idle threads must not spin on the next one's cores."""
    from workbench.backends.onnxruntime import SPIN_STOP_KEY, session_options

    for exact in (True, False):
        assert session_options(2, exact_int8=exact).get_session_config_entry(SPIN_STOP_KEY) == "1"


@pytest.mark.skipif(HAS_CUDA_EP, reason="this onnxruntime has the CUDA execution provider")
def test_ort_cuda_without_onnxruntime_gpu_is_one_clear_error() -> None:
    with pytest.raises(
        WorkbenchError, match="needs ONNX Runtime's CUDAExecutionProvider.*install onnxruntime-gpu"
    ):
        check_backend("ort-cuda")


@pytest.mark.skipif(HAS_GPU, reason="a CUDA GPU is visible here")
def test_tensorrt_without_a_gpu_is_one_clear_error() -> None:
    with pytest.raises(WorkbenchError, match="NVIDIA GPU|no usable TensorRT module"):
        check_backend("tensorrt")


def test_steps_that_need_layer_outputs_refuse_tensorrt() -> None:
    with pytest.raises(WorkbenchError, match="tensorrt"):
        ort_providers("tensorrt")


@pytest.mark.skipif(HAS_CUDA_EP, reason="this onnxruntime has the CUDA execution provider")
@pytest.mark.parametrize("verb", ["calibrate", "compare", "search", "signoff"])
def test_every_step_refuses_a_missing_backend_before_any_work(verb, tmp_path, speech_like, capsys) -> None:
    sset = write_small_set(tmp_path / "calib_sets", ["HELLO WORLD", "GOODBYE WORLD"], speech_like)
    args = {
        "calibrate": ["--set", str(sset.path)],
        "compare": ["--calib-set", str(sset.path)],
        "search": ["--calib-set", str(sset.path)],
        "signoff": [
            "--eval-set",
            str(sset.path),
            "--candidate",
            f"fp32={constant_ctc_onnx(tmp_path / 'c.onnx', 'HELLO')}",
        ],
    }
    engines = tmp_path / "engines"
    assert main([verb, *args[verb], "--backend", "ort-cuda", "--engines", str(engines)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "CUDAExecutionProvider" in err
    assert "Traceback" not in err and not engines.exists()  # refused before any model work


@pytest.mark.skipif(HAS_CUDA_EP, reason="this onnxruntime has the CUDA execution provider")
def test_run_page_inputs_carry_the_backend_and_the_job_check_refuses_a_missing_one(
    tmp_path, speech_like
) -> None:
    from workbench.dashboard.pages import run
    from workbench.dashboard.paths import ArtifactRoots
    from workbench.jobs import codec
    from workbench.resources import demo_model_dir

    calib = write_small_set(tmp_path / "calib_sets", ["HELLO WORLD", "GOODBYE WORLD"], speech_like, "c")
    evaluation = write_small_set(tmp_path / "calib_sets", ["ONE TWO", "THREE FOUR"], speech_like, "e")
    roots = ArtifactRoots(tmp_path)
    model = str(demo_model_dir())
    made = [
        run.calibrate_inputs(model, str(calib.path), "max", 99.9, roots, "ort-cuda"),
        run.analysis_inputs(
            "compare", model, str(calib.path), "max", 1, "group", None, roots, backend="ort-cuda"
        ),
        run.signoff_inputs(
            model, str(calib.path), str(evaluation.path), "max", "r", None, 0, roots, "ort-cuda", "ort-cuda"
        ),
    ]
    for number, inputs in enumerate(made):
        path = tmp_path / f"job-{number}.json"
        codec.write_job(path, inputs)
        assert codec.read_job(path)[1].backend == "ort-cuda"
        with pytest.raises(WorkbenchError, match="CUDAExecutionProvider"):
            codec.check(inputs)
    assert made[2].target == "ort-cuda"


def test_signoff_on_tensorrt_engines_where_a_runtime_exists(tmp_path, speech_like, monkeypatch) -> None:
    """WER on the engine, CUDA-event latency and the engine-precision gate, through the same runner life cycle;
    skipped where no TensorRT runtime can run engines (neither machine of this project has one)."""
    try:
        check_backend("tensorrt")
    except WorkbenchError as exc:
        pytest.skip(f"no TensorRT runtime that can run engines here: {exc}")
    from workbench.evaluate.latency import LatencyConfig
    from workbench.jobs.signoff import SignoffInputs, run
    from workbench.workspace import ENV_VAR

    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    sset = write_small_set(tmp_path / "calib_sets", ["HELLO WORLD", "GOODBYE WORLD", "HELLO"], speech_like)
    model = constant_ctc_onnx(tmp_path / "c.onnx", "HELLO WORLD")
    result = run(
        SignoffInputs(
            candidates=[("fp32", model)],
            eval_set=sset,
            out_dir=tmp_path / "r",
            backend="tensorrt",
            model=DEFAULT_MODEL,
            latency=LatencyConfig((1,), 1, 3),
            engines=tmp_path / "engines",
            resamples=100,
        ),
    )
    lat = result.record["latency"]["fp32"]
    assert lat["backend"]["backend_name"] == "tensorrt" and lat["backend"]["device"].startswith("cuda")
    assert any(
        c["name"] == "engine precisions" and c["passed"] for c in result.record["verdicts"][0]["checks"]
    )
    assert (
        result.record["decision"]["mode"] == "ship" and result.recommendation == "fp32"
    )  # timed on the target


def test_cpu_streams_split_the_threads_between_two_concurrent_runs() -> None:
    from workbench.backends.onnxruntime import cpu_streams

    assert cpu_streams(1) == (1, 1)
    assert cpu_streams(2) == (2, 1)
    assert cpu_streams(16) == (2, 8)
    assert cpu_streams(16, requested=4) == (4, 4)
    assert cpu_streams(2, requested=4) == (2, 1)  # never more runs than threads
    assert cpu_streams(8, requested=1) == (1, 8)


def test_ort_cpu_infer_each_runs_feeds_at_once_with_the_outputs_and_order_of_infer(tmp_path) -> None:
    """Concurrent runs of one session give each feed the outputs one run at a time gives, in the feeds' order; a
    feed the model cannot take fails as one WorkbenchError after the outputs of the feeds before it."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from workbench.backends.onnxruntime import OnnxRuntimeRunner

    rng = np.random.default_rng(0)
    weight = rng.standard_normal((64, 32)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Tanh", ["h"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 32])],
        [numpy_helper.from_array(weight, "w")],
    )
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    feeds = [{"x": rng.standard_normal((1 + k % 5, 64)).astype(np.float32)} for k in range(23)]
    with OnnxRuntimeRunner(path, threads=2, name="m") as runner:
        assert runner.stream_plan() == (2, 1)
        assert runner.describe()["transcription_streams"] == "2 concurrent runs x 1 threads"
        one_by_one = [runner.infer(feed)["y"] for feed in feeds]
        at_once = [out["y"] for out in runner.infer_each(iter(feeds))]
        assert len(at_once) == len(feeds)
        for single, concurrent in zip(one_by_one, at_once):
            np.testing.assert_array_equal(single, concurrent)
        broken = [*feeds[:3], {"x": np.zeros((1, 7), np.float32)}, *feeds[3:]]
        got = []
        with pytest.raises(WorkbenchError, match="m: ONNX Runtime failed running it"):
            for out in runner.infer_each(iter(broken)):
                got.append(out["y"])
        assert len(got) == 3
    with OnnxRuntimeRunner(path, threads=2, streams=1) as single_stream:
        assert single_stream.stream_plan() == (1, 2)
        assert [o["y"].shape for o in single_stream.infer_each(iter(feeds[:4]))] == [
            f["x"].shape[:1] + (32,) for f in feeds[:4]
        ]


def test_a_session_that_onnx_runtime_moved_to_the_cpu_is_refused(tmp_path) -> None:
    # ONNX Runtime starts a session on the CPU with only a warning when the GPU provider asked for first is
    # missing or fails to load its libraries: the runner must not time or judge the CPU in the GPU's name
    import warnings

    import onnx
    from onnx import TensorProto, helper

    from workbench.backends.onnxruntime import open_session, session_options

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]))
    path = tmp_path / "relu.onnx"
    onnx.save(model, str(path))
    session, note = open_session(str(path), session_options(1), ["CPUExecutionProvider"])
    assert session.get_providers() == ["CPUExecutionProvider"] and note is None
    import onnxruntime as ort

    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("CUDA starts here: the fallback this guards against does not happen")
    with (
        warnings.catch_warnings(),
        pytest.raises(WorkbenchError, match="could not start CUDAExecutionProvider"),
    ):
        warnings.simplefilter("ignore")
        open_session(str(path), session_options(1), ["CUDAExecutionProvider", "CPUExecutionProvider"], "relu")

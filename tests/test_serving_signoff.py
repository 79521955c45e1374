"""``signoff --serving`` end to end on a small look-alike model (GroupNorm encoder, saved by transformers) on
ONNX Runtime CPU: the record's serving section, the serving gate, the winner by capacity only on the target,
the report's serving tables and figure; bad input (no [serving] table, a p99 target below one request, a batch
over the memory limit or the engine profile, a load the generator cannot make) is one ``error:`` line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from modelkit import ENGLISH_TEXTS, unit_set

from workbench.cli import main
from workbench.errors import WorkbenchError

pytestmark = pytest.mark.slow

FAST = "seconds_per_rate = 0.5\nbudget_s = 6.0\nrates = [20.0, 40.0]\nmax_batch = 2\n"
RELAXED = "max_wer_delta_points = 100.0\nmax_condition_wer_delta_points = 100.0\n"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    """A base-960h look-alike exported to ONNX and a small evaluation set."""
    from conftest import _speech_like

    from workbench.model.description import describe_model
    from workbench.model.export import export_onnx
    from workbench.model.loading import load_model
    from workbench.model.synthetic import save_lookalike

    root = tmp_path_factory.mktemp("serving")
    folder = save_lookalike(root / "model", "facebook/wav2vec2-base-960h", seed=2, head_scale=50.0)
    description = describe_model(folder)
    onnx_path = export_onnx(load_model(description), root / "model.onnx", description)
    evaluation = unit_set(root / "serving-eval", ENGLISH_TEXTS[:4], _speech_like, seed=5)
    return folder, onnx_path, evaluation, description


def _argv(served, tmp_path: Path, gates: str, *extra: str) -> tuple[list[str], Path]:
    folder, onnx_path, evaluation, _ = served
    path = tmp_path / "gates.toml"
    path.write_text(RELAXED + gates)
    out = tmp_path / "report"
    argv = ["signoff", "--candidate", f"fp32={onnx_path}", "--model", str(folder), "--eval-set"]
    argv += [
        str(evaluation.path),
        "--no-latency",
        "--resamples",
        "200",
        "--gates",
        str(path),
        "--out",
        str(out),
    ]
    return [*argv, *extra], out


@pytest.fixture(scope="module")
def demo_served(tiny_sets, tmp_path_factory: pytest.TempPathFactory):
    """The shipped demo model exported to ONNX, with the tiny synthetic evaluation set (its WER is below 100 %)."""
    from workbench.model.description import describe_model
    from workbench.model.export import export_onnx
    from workbench.model.loading import load_model
    from workbench.resources import demo_model_dir

    description = describe_model(demo_model_dir())
    path = export_onnx(load_model(description), tmp_path_factory.mktemp("demo") / "demo.onnx", description)
    return demo_model_dir(), path, tiny_sets.eval, description


DEMO_GATES = (
    "[serving]\np99_ms = 5000.0\nseconds_per_rate = 0.5\nbudget_s = 20.0\nrates = [2.0, 4.0]\nmax_batch = 2\n"
)


def test_serving_on_the_target_picks_the_winner_by_capacity(demo_served, tmp_path, capsys) -> None:
    argv, out = _argv(demo_served, tmp_path, DEMO_GATES, "--serving", "--target", "ort-cpu")
    assert main(argv) == 0, capsys.readouterr().err[-2000:]
    record = json.loads((out / "report.json").read_text())
    serving = record["serving"]
    assert serving["backend"] == "ort-cpu" and serving["settings"]["p99_ms"] == 5000.0
    names = set(record["candidates"])
    assert set(serving["candidates"]) == names and len(names) == 2  # fp32 and ONNX Runtime's dynamic INT8
    for cand in serving["candidates"].values():
        assert cand["load_s"] > 0 and cand["single_request_ms"] > 0 and cand["peak_rss_mb"] > 0
        assert set(cand["peak_rss_mb_by_batch"]) == {"1", "2"} and cand["largest_batch_fitting"] == 2
        points = cand["sweep"]["points"]
        assert [p["offered_qps"] for p in points] == [2.0, 4.0]  # the same loads for every candidate
        assert all(p["answered"] == p["requests"] > 0 for p in points)  # about 10 expected each
        assert cand["capacity_qps"] == 4.0
    for verdict in record["verdicts"]:
        check = next(c for c in verdict["checks"] if c["name"] == "serving")
        assert check["passed"] and "capacity 4 QPS" in check["detail"]
    decision = record["decision"]
    assert decision["mode"] == "ship" and decision["recommendation"] in names
    assert decision["rule"].startswith("serving capacity") and "serving capacity" in decision["line"]
    markdown = (out / "report.md").read_text()
    assert "Serving: latency against offered load" in markdown and "capacity QPS" in markdown
    assert "alt='Serving: latency against offered load'" in (out / "report.html").read_text()


def test_serving_off_the_target_picks_nothing_and_the_gate_reads_the_gate_load(
    demo_served, tmp_path, capsys
) -> None:
    gates = DEMO_GATES + "qps = 3.0\n"
    argv, out = _argv(demo_served, tmp_path, gates, "--serving", "--as-given")  # default target: tensorrt
    assert main(argv) == 0, capsys.readouterr().err[-2000:]
    record = json.loads((out / "report.json").read_text())
    assert record["decision"]["mode"] != "ship"
    assert any("capacity picks nothing" in r for r in record["decision"]["reasons"])
    check = next(c for c in record["verdicts"][0]["checks"] if c["name"] == "serving")
    assert check["passed"] and "at 3 QPS" in check["detail"]
    assert [p["offered_qps"] for p in record["serving"]["candidates"]["fp32"]["sweep"]["points"]] == [
        2.0,
        3.0,
        4.0,
    ]


@pytest.mark.parametrize(
    "gates,message",
    [
        ("", r"--serving needs a \[serving\] table"),
        ("[serving]\np99_ms = 0.001\n" + FAST, "below a single request's latency"),
        ("[serving]\np99_ms = 5000.0\nmemory_limit_mb = 1\n" + FAST, "does not fit serving.memory_limit_mb"),
        ("[serving]\np99_ms = 5000.0\nrates = [1000000.0]\n", "more than this load generator"),
    ],
)
def test_bad_serving_input_is_one_error_line(served, tmp_path, capsys, gates, message) -> None:
    argv, out = _argv(served, tmp_path, gates, "--serving", "--target", "ort-cpu", "--as-given")
    assert main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:"), err
    assert pytest.importorskip("re").search(message, err[0]), err[0]
    assert not out.exists()


def test_a_batch_over_the_engine_profile_is_refused(served) -> None:
    from workbench.backends.onnxruntime import OnnxRuntimeRunner
    from workbench.evaluate.batching import BatchPolicy
    from workbench.inputs.serving import ServingConfig
    from workbench.serving.measure import RequestSet, prepare_candidate

    _, onnx_path, evaluation, description = served

    class ProfileOfTwo(OnnxRuntimeRunner):
        """A runner whose profile accepts at most 2 clips a batch, as a TensorRT engine built for batch 2."""

        def batch_limit(self) -> int | None:
            return 2

    requests = RequestSet.of([evaluation.audio(u) for u in evaluation.utterances], description.prepare, 1.0)
    assert requests.lengths == [16000] * len(evaluation.utterances)
    with pytest.raises(WorkbenchError, match="max_batch 4 does not fit the engine's optimisation profile"):
        prepare_candidate(
            "fp32",
            lambda: ProfileOfTwo(onnx_path),
            lambda runner: BatchPolicy.for_runner(runner, description, 4),
            requests,
            ServingConfig(p99_ms=100.0, max_batch=4),
        )


def test_every_batch_size_runs_on_every_instance_before_the_sweep(served) -> None:
    # a GPU backend tunes its kernels per new input shape on first sight: no batch size may meet the timed
    # load for the first time
    from workbench.backends.onnxruntime import OnnxRuntimeRunner
    from workbench.evaluate.batching import BatchPolicy
    from workbench.inputs.serving import ServingConfig
    from workbench.serving.measure import RequestSet, prepare_candidate, release

    _, onnx_path, evaluation, description = served
    seen: list[list[int]] = []

    class Recording(OnnxRuntimeRunner):
        """The real runner, recording the batch size of every run."""

        def infer(self, feeds):
            sizes.append(int(next(iter(feeds.values())).shape[0]))
            return super().infer(feeds)

    def make() -> Recording:
        seen.append([])
        return Recording(onnx_path)

    requests = RequestSet.of([evaluation.audio(u) for u in evaluation.utterances], description.prepare, 1.0)
    sizes: list[int] = []
    prepared = prepare_candidate(
        "fp32",
        make,
        lambda runner: BatchPolicy.for_runner(runner, description, 3),
        requests,
        ServingConfig(p99_ms=5000.0, max_batch=3, instances=2),
    )
    release(prepared.models)
    assert len(seen) == 2 and prepared.warmup_s > 0
    assert sorted(set(sizes)) == [1, 2, 3] and sizes.count(3) >= 2  # both instances ran batch 3 before timing

"""``--ray``: calibrate, compare, search and signoff on a local Ray cluster (2 CPU workers, one per module) give the
serial run's records (timing fields apart); histograms merge exactly; a killed worker's shard runs on another;
a worker that fails the check set is refused; without Ray, ``--ray`` is one error line."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from modelkit import unit_set

from workbench.calibration.collectors import StreamingStats
from workbench.cluster.records import without_timing as _without_timing
from workbench.errors import WorkbenchError

CALIB_TEXTS = [
    "open the door",
    "a quiet room",
    "read it again",
    "the blue car",
    "walk home now",
    "one more day",
]
EVAL_TEXTS = [
    "hello there",
    "green apples fall",
    "keep it simple",
    "rain on the roof",
    "seven small dogs",
    "time to go",
]


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A tiny random CTC model and a disjoint calibration / evaluation pair of short clips."""
    from conftest import _speech_like

    from workbench.model.synthetic import save_random_wav2vec2

    root = tmp_path_factory.mktemp("ray")
    model = save_random_wav2vec2(root / "model", "tiny", seed=0)
    sets = root / "calib_sets"
    calib = unit_set(sets / "r-calib", CALIB_TEXTS, _speech_like, seed=1, seconds=(1.0, 1.7))
    evaluation = unit_set(sets / "r-eval", EVAL_TEXTS, _speech_like, seed=2, seconds=(0.9, 1.5))
    return {"root": root, "model": model, "sets": sets, "calib": calib, "eval": evaluation}


# ---- histogram merge (no cluster)


def test_histograms_add_exactly_whatever_the_split() -> None:
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(5000).astype(np.float32) * s for s in (0.01, 3.0, 0.2, 40.0, 0.0)]
    whole = StreamingStats(bins=128)
    for a in arrays:
        whole.update("t", a.copy())
    for split in ([0, 2, 4], [1], [3]), ([4], [0, 1, 2, 3]), ([3], [4, 0], [2, 1]):
        parts = []
        for indices in split:
            part = StreamingStats(bins=128)
            for i in indices:
                part.update("t", arrays[i].copy())
            parts.append(part)
        merged = parts[0]
        for part in parts[1:]:
            merged = merged.merged(part)
        a, b = whole.histogram("t"), merged.histogram("t")
        assert a is not None and b is not None
        assert np.array_equal(a.counts, b.counts) and a.range_max == b.range_max
        assert merged.maxes.amax == whole.maxes.amax
    # a histogram that saw only zeros adds its zeros and nothing else
    zeros = StreamingStats(bins=128)
    zeros.update("t", np.zeros(10, np.float32))
    alone = whole.merged(zeros).histogram("t")
    assert alone is not None and alone.counts[0] == whole.histogram("t").counts[0] + 10


def test_float_statistics_add_exactly_whatever_the_split(bench) -> None:
    from workbench.jobs.calibrate import export_or_reuse
    from workbench.model.description import describe_model
    from workbench.quantize.float_stats import collect_float_stats, open_float_session

    description = describe_model(str(bench["model"]))
    opened = open_float_session(export_or_reuse(description, bench["root"] / "engines-float"), threads=1)
    audio = [a for _, a in bench["calib"].iter_audio()]
    audio[3] = audio[3] * 40.0  # one loud clip: its shard holds the maxima

    def pass_over(indices: list[int]):
        clips = [audio[i] for i in indices]
        return collect_float_stats(opened, clips, keys={"k": 1}, progress=False, prepare=description.prepare)

    whole = pass_over(list(range(len(audio))))
    for split in ([0, 2, 4], [1], [3, 5]), ([5], [0, 1, 2, 3, 4]):
        parts = [pass_over(indices) for indices in split]
        merged = parts[0]
        for part in parts[1:]:
            merged = merged.merged(part)
        assert merged.to_json() == whole.to_json()
        assert list(merged.amax) == list(whole.amax)  # the file lists tensors in the same order
    with pytest.raises(ValueError, match="do not add"):
        whole.merged(collect_float_stats(opened, audio[:1], keys={"k": 2}, progress=False))


def test_balanced_shards_split_by_duration() -> None:
    from workbench.cluster.shards import balanced, balanced_groups

    shards = balanced([5.0, 1.0, 1.0, 1.0, 1.0, 1.0, 4.0], 2)
    assert sorted(i for s in shards for i in s) == list(range(7))
    assert sorted(sum([5.0, 1.0, 1.0, 1.0, 1.0, 1.0, 4.0][i] for i in s) for s in shards) == [7.0, 7.0]
    assert balanced_groups([[0, 1], [2], [3, 4]], [1, 1, 5, 2, 2], 2) == [[0, 1, 3, 4], [2]]


def test_ray_missing_is_one_error_line(bench, monkeypatch, capsys) -> None:
    from workbench.cli import main

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray fails as if it were not installed
    code = main(
        [
            "calibrate",
            "--model",
            str(bench["model"]),
            "--set",
            "r-calib",
            "--root",
            str(bench["sets"]),
            "--engines",
            str(bench["root"] / "never"),
            "--ray",
            "local:2",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1
    assert "pip install 'ray==" in err[0] and err[0].startswith("error:")
    assert not (bench["root"] / "never").exists()


@pytest.mark.parametrize("value", ["local:0", "local:x", "", "two words"])
def test_bad_ray_address_is_refused(value: str) -> None:
    from workbench.cluster.address import ClusterAddress

    with pytest.raises(WorkbenchError, match="--ray"):
        ClusterAddress.parse(value)


# ---- on the cluster


def _calibrate(bench, engines: Path, ray: str | None):
    from workbench.calibration.methods import MethodSpec
    from workbench.jobs import calibrate

    return calibrate.run(
        calibrate.CalibrateInputs(
            str(bench["model"]),
            "r-calib",
            MethodSpec("entropy", bins=256),
            engines=engines,
            calib_root=bench["sets"],
            parity_clips=1,
            ray=ray,
        )
    )


def test_calibrate_on_ray_equals_serial(bench, ray_cluster, monkeypatch) -> None:
    import workbench.quantize.guard as guard
    from workbench.calibration import cache, histograms
    from workbench.quantize.float_stats import FloatStats

    serial = _calibrate(bench, bench["root"] / "engines-serial", None)

    def not_here(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the driver made the float statistics pass")

    monkeypatch.setattr(guard, "collect_float_stats", not_here)  # the Ray pass's shards make them
    spread = _calibrate(bench, bench["root"] / "engines-ray", "local:2")
    assert FloatStats.load(serial.float_stats) == FloatStats.load(spread.float_stats)
    assert serial.float_stats.read_bytes() == spread.float_stats.read_bytes()
    a, b = cache.load(serial.cache), cache.load(spread.cache)
    assert a.scales == b.scales and a.convergence == b.convergence and a.convergence is not None
    ha, hb = (
        histograms.load(histograms.histogram_path(serial.cache)),
        histograms.load(histograms.histogram_path(spread.cache)),
    )
    assert ha.names == hb.names and np.array_equal(ha.counts, hb.counts)
    assert np.array_equal(ha.range_max, hb.range_max, equal_nan=True)
    assert serial.int8_onnx.read_bytes() == spread.int8_onnx.read_bytes()


def test_compare_ranking_on_ray_equals_serial(bench, ray_cluster) -> None:
    from workbench.jobs.compare import run_compare
    from workbench.jobs.prepare import prepare

    prepared = prepare(
        str(bench["model"]), "r-calib", "max", root=bench["root"] / "engines-cmp", calib_root=bench["sets"]
    )
    runs = [
        run_compare(
            prepared,
            bench["calib"],
            1,
            layers=False,
            inverse=True,
            progress=False,
            out=bench["root"] / f"cmp-{k}",
            ray=ray,
        )
        for k, ray in enumerate((None, "local:2"))
    ]
    assert runs[0].sensitivity and runs[1].sensitivity
    assert _without_timing(runs[0].sensitivity) == _without_timing(runs[1].sensitivity)
    assert len(runs[0].sensitivity["layers"]) > 3


def test_signoff_on_ray_equals_serial(bench, ray_cluster) -> None:
    from workbench.jobs import signoff

    built = _calibrate(bench, bench["root"] / "engines-so", None)
    candidates = [("fp32", built.fp32_onnx), ("int8", built.int8_onnx)]
    records = []
    for ray in (None, "local:2"):
        inputs = signoff.SignoffInputs(
            bench["eval"],
            bench["root"] / f"so-{ray is None}",
            candidates,
            model=str(bench["model"]),
            latency=None,
            batch_size=2,
            resamples=200,
            overflow_check=False,
            as_given=True,
            calib_root=bench["sets"],
            engines=bench["root"] / "engines-so",
            ray=ray,
        )
        records.append(signoff.run(inputs).record)
    assert records[0]["backend"]["batching"]["batch_check"]  # batched, and checked at batch 1
    assert _without_timing(records[0]) == _without_timing(records[1])


def _statistics_tasks(bench, pool) -> tuple[list, list]:
    from workbench.cluster.calibrate import StatisticsShard
    from workbench.model.description import describe_model

    audio = [a for _, a in bench["calib"].iter_audio()]
    prepare = describe_model(str(bench["model"])).prepare
    ref = pool.put(audio)
    tasks = [
        StatisticsShard(pool.check_model, ref, (i,), None, False, 64, ("CPUExecutionProvider",), prepare)
        for i in range(len(audio))
    ]
    return audio, tasks


def _check_set(bench, shift: float = 0.0):
    from workbench.cluster.check import CheckSet
    from workbench.jobs.calibrate import export_or_reuse
    from workbench.model.description import describe_model

    description = describe_model(str(bench["model"]))
    fp32 = export_or_reuse(description, bench["root"] / "engines-pool")
    inputs = [description.prepare(a) for _, a in bench["calib"].iter_audio()][:2]
    check = CheckSet.of(fp32.read_bytes(), inputs, ("CPUExecutionProvider",), "fp32")
    return CheckSet(check.model, check.inputs, [r + shift for r in check.reference], check.providers, "fp32")


@dataclass(frozen=True)
class SlowTask:
    """Writes its worker's pid to ``folder`` and sleeps: a shard long enough to kill its worker during it."""

    folder: str
    seconds: float

    def run(self, context: Any) -> int:
        Path(self.folder, f"{time.monotonic_ns()}-{os.getpid()}").write_text("running")
        time.sleep(self.seconds)
        return os.getpid()


def test_a_worker_killed_mid_shard_is_retried_on_another(bench, ray_cluster, tmp_path) -> None:
    from ray import cloudpickle

    from workbench.cluster.address import ClusterAddress
    from workbench.cluster.pool import open_pool

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import the tests folder
    killed: list[int] = []

    def kill_the_first_running_worker() -> None:
        deadline = time.monotonic() + 60
        while not killed and time.monotonic() < deadline:
            started = sorted(tmp_path.iterdir())
            if started:
                killed.append(int(started[0].name.split("-")[1]))
                os.kill(killed[0], signal.SIGKILL)
            time.sleep(0.05)

    try:
        with open_pool(ClusterAddress(local=2), _check_set(bench)) as pool:
            killer = threading.Thread(target=kill_the_first_running_worker)
            killer.start()
            pids = pool.map([SlowTask(str(tmp_path), 1.5) for _ in range(3)], "slow shards")
            killer.join()
            assert killed and len(pool.lost) == 1 and len(pool.workers) == 1
            assert killed[0] not in pids
            assert (
                pids == [pool.workers[0].pid] * 3
            )  # every shard, the killed one's included, ran on the survivor
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


def test_a_killed_worker_is_retried_on_another_and_the_last_one_fails_with_one_line(
    bench, ray_cluster
) -> None:
    from workbench.cluster.address import ClusterAddress
    from workbench.cluster.pool import open_pool

    with open_pool(ClusterAddress(local=2), _check_set(bench)) as pool:
        _, tasks = _statistics_tasks(bench, pool)
        serial = pool.map(tasks, "statistics")
        assert len(pool.workers) == 2
        os.kill(pool.workers[0].pid, signal.SIGKILL)  # a real worker process, lost before its next shard
        again = pool.map(tasks, "statistics")
        assert pool.lost and len(pool.workers) == 1
        assert [r.early.maxes.amax for r in again] == [r.early.maxes.amax for r in serial]
        os.kill(pool.workers[0].pid, signal.SIGKILL)
        with pytest.raises(WorkbenchError, match="no Ray worker left") as failed:
            pool.map(tasks, "statistics")
        assert "\n" not in str(failed.value)


@dataclass(frozen=True)
class StatisticsThreads:
    """The ONNX Runtime intra-op threads of this worker's statistics session of ``shard``'s model, and the
    worker's share of threads."""

    shard: Any

    def run(self, context: Any) -> tuple[int, int]:
        opened = self.shard.session(context)
        return opened.session.get_session_options().intra_op_num_threads, context.threads


def test_workers_count_statistics_with_their_share_of_threads(bench, ray_cluster) -> None:
    # ONNX Runtime's float results depend on its thread count (a convolution split over 4 threads or more gives
    # other values than over 1 to 3): a worker whose statistics session took every core of the host, not its
    # share, counted other activations than a run without Ray at that share (on a 16-core host, 2 to 8 workers)
    from ray import cloudpickle

    from workbench.backends.onnxruntime import available_cores
    from workbench.cluster.address import ClusterAddress
    from workbench.cluster.pool import open_pool

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        with open_pool(ClusterAddress(local=2), _check_set(bench)) as pool:
            _, tasks = _statistics_tasks(bench, pool)
            pool.map(tasks[:2], "statistics")
            found = pool.map([StatisticsThreads(tasks[0]), StatisticsThreads(tasks[1])], "threads")
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    assert found == [(max(1, available_cores() // 2), max(1, available_cores() // 2))] * 2


def test_compare_on_ray_takes_the_fp32_reference_from_the_workers(bench, ray_cluster, monkeypatch) -> None:
    # the driver's FP32 logits come from its own thread count, the variants' from the workers': the reference is
    # the workers', so every damage is measured at one thread count
    from workbench.compare.sensitivity import VariantRunner
    from workbench.jobs.compare import run_compare
    from workbench.jobs.prepare import prepare

    prepared = prepare(
        str(bench["model"]), "r-calib", "max", root=bench["root"] / "engines-cmp", calib_root=bench["sets"]
    )

    def ranked(ray: str | None, k: int) -> Any:
        return run_compare(
            prepared, bench["calib"], 1, layers=False, progress=False, out=bench["root"] / f"ref-{k}", ray=ray
        ).sensitivity

    serial = ranked(None, 0)

    def no_logits_here(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the driver ran a model for the ranking")

    monkeypatch.setattr(VariantRunner, "logits", no_logits_here)
    assert _without_timing(ranked("local:2", 1)) == _without_timing(serial)


def test_a_worker_that_fails_the_check_set_is_refused(bench, ray_cluster) -> None:
    from workbench.cluster.address import ClusterAddress
    from workbench.cluster.pool import open_pool

    with (
        pytest.raises(WorkbenchError, match="no Ray worker passed the check set") as refused,
        open_pool(ClusterAddress(local=2), _check_set(bench, shift=1e-3)),
    ):
        pass
    assert "max |logit difference| 0.001 > 0.0001" in str(refused.value)
    with open_pool(ClusterAddress(local=2), _check_set(bench, shift=1e-6)) as pool:  # within the tolerance
        assert len(pool.workers) == 2 and not pool.refused


def test_search_on_ray_equals_serial(bench, ray_cluster) -> None:
    from workbench.evaluate.gates import GateConfig
    from workbench.jobs import search

    records = []
    for k, ray in enumerate((None, "local:2")):
        inputs = search.SearchInputs(
            model=str(bench["model"]), calib_set="r-calib", method="max", calib_root=bench["sets"],
            engines=bench["root"] / "engines-search", out=bench["root"] / f"search-{k}", per_condition=1,
            dev_set="r-eval", gates=GateConfig(max_wer_delta_points=1e-6, max_condition_wer_delta_points=1e-6), resamples=200, refine=1,
            dev_blocks=2, batch_size=2, progress=False, ray=ray,
        )  # fmt: skip
        records.append(search.run(inputs).data)
    assert len(records[0]["candidates"]) > 2  # int8 everywhere fails the tiny budget: the search goes on
    rankings = [json.loads(Path(r["sensitivity_path"]).read_text()) for r in records]
    assert _without_timing(rankings[0]) == _without_timing(rankings[1])
    # the runs write to their own folders, and the ranking's hash covers its creation time
    serial, spread = (_without_timing(r) for r in records)
    spread = json.loads(json.dumps(spread).replace("/search-1/", "/search-0/"))
    for record in (serial, spread):
        del record["provenance"]["sensitivity"]
    assert serial == spread


def test_the_dashboard_sends_run_page_jobs_to_its_one_cluster(bench) -> None:
    from workbench.dashboard import access
    from workbench.dashboard.pages import run
    from workbench.dashboard.paths import ArtifactRoots
    from workbench.dashboard.server import launch
    from workbench.jobs import codec

    started = launch("127.0.0.1", 8501, ray="local:2", environ={})
    assert access.read_settings(started.env).ray == "local:2"
    assert access.read_settings({}).ray is None  # without --ray the forms have no cluster box
    with pytest.raises(WorkbenchError, match="local:N takes a whole number"):
        launch("127.0.0.1", 8501, ray="local:0", environ={})
    roots = ArtifactRoots(bench["root"])
    model, calib, evaluation = str(bench["model"]), str(bench["calib"].path), str(bench["eval"].path)
    made = [
        run.calibrate_inputs(model, calib, "max", 99.9, roots, ray="local:2"),
        run.analysis_inputs("compare", model, calib, "max", 1, "group", None, roots, ray="local:2"),
        run.analysis_inputs("search", model, calib, "max", 1, "group", evaluation, roots, ray="local:2"),
        run.signoff_inputs(model, calib, evaluation, "max", "ui", None, 0, roots, ray="local:2"),
    ]
    for k, inputs in enumerate(made):
        path = bench["root"] / f"job-{k}.json"
        codec.write_job(path, inputs)
        assert codec.read_job(path)[1].ray == "local:2"  # the job file carries the cluster to the job


def test_local_workers_of_a_gpu_backend_need_a_gpu(ray_cluster) -> None:
    from workbench.cluster.address import ClusterAddress
    from workbench.cluster.pool import worker_count

    assert worker_count(ray_cluster, ClusterAddress(local=3), gpu=False) == 3
    # one worker holds a whole GPU: local:N on a GPU backend takes at most one per GPU, none without one
    gpus = int(ray_cluster.cluster_resources().get("GPU", 0))
    if gpus:
        assert worker_count(ray_cluster, ClusterAddress(local=gpus + 2), gpu=True) == gpus
    else:
        with pytest.raises(WorkbenchError, match="has no GPU to run workers on"):
            worker_count(ray_cluster, ClusterAddress(local=2), gpu=True)


def test_shards_go_out_heaviest_first() -> None:
    from workbench.cluster.shards import dispatch_bound, heaviest_first, shard_weights

    assert heaviest_first([1.0, 5.0, 3.0, 5.0, 0.5]) == [1, 3, 2, 0, 4]
    assert shard_weights([[0, 2], [1]], [1.0, 4.0, 2.5]) == [3.5, 4.0]
    # 2 workers: in task order the heavy last task runs alone at the end; heaviest first the light ones fill in
    weights = [1.0, 1.0, 1.0, 1.0, 4.0]
    assert dispatch_bound(weights, 2, order=range(5)) == pytest.approx(8 / (2 * 6))
    assert dispatch_bound(weights, 2) == pytest.approx(1.0)
    assert dispatch_bound([3.0], 4) == pytest.approx(0.25)


@dataclass(frozen=True)
class StampTask:
    """Writes when it started (its index in the name) and sleeps a little."""

    folder: str
    index: int

    def run(self, context: Any) -> int:
        Path(self.folder, f"{time.monotonic_ns()}-{self.index}").write_text("started")
        time.sleep(0.4)
        return self.index


def test_the_pool_hands_out_heaviest_first_and_returns_in_task_order(bench, ray_cluster, tmp_path) -> None:
    from ray import cloudpickle

    from workbench.cluster.address import ClusterAddress
    from workbench.cluster.pool import open_pool

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        with open_pool(ClusterAddress(local=2), _check_set(bench)) as pool:
            tasks = [StampTask(str(tmp_path), i) for i in range(5)]
            assert pool.map(tasks, "stamps", weights=[1.0, 5.0, 2.0, 4.0, 3.0]) == [0, 1, 2, 3, 4]
            with pytest.raises(ValueError, match="2 weights for 5 tasks"):
                pool.map(tasks, "stamps", weights=[1.0, 2.0])
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    started = [
        int(p.name.split("-")[1]) for p in sorted(tmp_path.iterdir(), key=lambda p: int(p.name.split("-")[0]))
    ]
    assert set(started[:2]) == {1, 3} and set(started[2:4]) == {4, 2} and started[4] == 0


@dataclass(frozen=True)
class KernelState:
    """Whether this worker has started compiling the histogram kernel."""

    def run(self, context: Any) -> bool:
        from workbench.calibration import kernels

        return kernels._warming is not None or kernels._tried


def test_workers_of_a_histogram_pass_compile_the_kernel_during_the_check(bench, ray_cluster) -> None:
    from dataclasses import replace

    from ray import cloudpickle

    from workbench.cluster.address import ClusterAddress
    from workbench.cluster.pool import open_pool

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        states = []
        for histograms in (False, True):
            with open_pool(
                ClusterAddress(local=2), replace(_check_set(bench), histograms=histograms)
            ) as pool:
                states.append(pool.map([KernelState(), KernelState()], "kernel state"))
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    assert states == [[False, False], [True, True]]

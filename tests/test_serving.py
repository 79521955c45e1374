"""The serving benchmark's parts: Poisson arrivals, the dynamic batcher's rule on arrival lists, the batcher run
in real time with a real (sleeping) compute function (no request lost, arrival order kept), the capacity sweep
and the ``[serving]`` gate table."""

from __future__ import annotations

import time

import numpy as np
import pytest

from workbench.errors import WorkbenchError
from workbench.serving.batcher import BatcherSettings, Queued, next_batch, serve
from workbench.serving.capacity import Sweep, sweep, sweep_rates
from workbench.serving.load import Request, check_rate, poisson_arrivals


def test_poisson_arrivals_are_seeded_ordered_and_at_the_offered_rate() -> None:
    lengths = [16000, 32000, 48000]
    first = poisson_arrivals(200.0, 20.0, lengths, seed=3)
    assert first == poisson_arrivals(200.0, 20.0, lengths, seed=3)
    assert first != poisson_arrivals(200.0, 20.0, lengths, seed=4)
    assert [r.index for r in first] == list(range(len(first)))
    times = np.array([r.arrival_s for r in first])
    assert np.all(np.diff(times) > 0) and times[0] > 0 and times[-1] < 20.0
    assert len(first) == pytest.approx(4000, rel=0.05)
    gaps = np.diff(times)
    assert np.std(gaps) == pytest.approx(np.mean(gaps), rel=0.1)  # exponential: sd equals mean
    assert {r.samples for r in first} == set(lengths)
    assert all(r.samples == lengths[r.clip] for r in first)
    fixed = poisson_arrivals(5.0, 10.0, [160000])
    assert {r.samples for r in fixed} == {160000}


def test_a_load_beyond_the_generator_is_refused() -> None:
    with pytest.raises(WorkbenchError, match="more than this load generator"):
        check_rate(1e6)
    with pytest.raises(WorkbenchError, match="above 0"):
        poisson_arrivals(0.0, 1.0, [1])


def _q(*items: tuple[float, int]) -> list[Queued]:
    return [Queued(i, t, n) for i, (t, n) in enumerate(items)]


def test_batcher_waits_for_the_delay_then_dispatches_what_it_has() -> None:
    settings = BatcherSettings(max_batch=4, max_queue_delay_s=0.010)
    assert next_batch([], 0.0, settings) == ([], None)
    queue = _q((0.000, 100), (0.002, 100))
    assert next_batch(queue, 0.005, settings) == ([], pytest.approx(0.010))
    assert next_batch(queue, 0.010, settings) == ([0, 1], None)
    full = _q(*[(0.001 * i, 100) for i in range(6)])
    assert next_batch(full, 0.002, settings) == ([0, 1, 2, 3], None)  # full: at once, oldest first
    assert next_batch(queue, 0.0, BatcherSettings(4, 0.0)) == ([0, 1], None)  # no delay: at once


def test_batcher_forms_the_largest_preferred_size_at_once() -> None:
    settings = BatcherSettings(max_batch=8, max_queue_delay_s=1.0, preferred=(2, 4))
    queue = _q(*[(0.001 * i, 100) for i in range(5)])
    assert next_batch(queue, 0.005, settings) == ([0, 1, 2, 3], None)
    assert next_batch(queue[:1], 0.005, settings) == ([], pytest.approx(1.0))


def test_batcher_mixes_lengths_only_when_batches_are_padded() -> None:
    queue = _q((0.0, 100), (0.001, 200), (0.002, 100), (0.003, 300))
    exact = BatcherSettings(max_batch=4, max_queue_delay_s=0.0)
    assert next_batch(queue, 0.01, exact) == ([0, 2], None)
    later = [q for i, q in enumerate(queue) if i not in (0, 2)]
    assert next_batch(later, 0.01, exact) == ([0], None)  # the 200-sample request, now the oldest, alone
    padded = BatcherSettings(max_batch=4, max_queue_delay_s=0.0, pad=True)
    assert next_batch(queue, 0.01, padded) == ([0, 1, 2, 3], None)


class Sleeper:
    """A real compute: sleeps a fixed time per batch plus a little per request; records the batches."""

    def __init__(self, per_batch_s: float, per_request_s: float = 0.0) -> None:
        self.per_batch_s, self.per_request_s = per_batch_s, per_request_s
        self.batches: list[list[int]] = []

    def __call__(self, batch: list[Request]) -> None:
        self.batches.append([r.index for r in batch])
        time.sleep(self.per_batch_s + self.per_request_s * len(batch))


def test_served_requests_are_all_answered_once_in_arrival_order() -> None:
    requests = poisson_arrivals(150.0, 1.0, [100, 200], seed=1)
    compute = Sleeper(0.004, 0.0005)
    settings = BatcherSettings(max_batch=4, max_queue_delay_s=0.003)
    result = serve(requests, [compute], settings, drain_s=2.0)
    assert result.unfinished == []
    assert sorted(s.index for s in result.served) == [r.index for r in requests]  # none lost, none twice
    assert sorted(i for b in compute.batches for i in b) == [r.index for r in requests]
    assert all(1 <= len(b) <= 4 for b in compute.batches)
    assert any(len(b) > 1 for b in compute.batches)  # the load made batches
    for batch in compute.batches:  # one length per batch (no padding)
        assert len({requests[i].samples for i in batch}) == 1
    for length in (100, 200):  # first come, first served among requests of one length
        same = sorted(
            (s for s in result.served if requests[s.index].samples == length), key=lambda s: s.index
        )
        starts = [s.start_s for s in same]
        assert starts == sorted(starts)
    for s in result.served:
        assert s.end_s - s.start_s >= 0.004 and s.start_s >= s.arrival_s
        assert s.arrival_s >= requests[s.index].arrival_s - 1e-3


def test_several_instances_share_the_queue() -> None:
    requests = poisson_arrivals(100.0, 0.6, [100], seed=2)
    computes = [Sleeper(0.02), Sleeper(0.02)]
    result = serve(requests, computes, BatcherSettings(1, 0.0, instances=2), drain_s=5.0)
    assert len(result.served) == len(requests) and {s.instance for s in result.served} == {0, 1}
    assert all(computes[i].batches for i in range(2))


def test_an_error_in_the_model_stops_the_run_and_is_raised() -> None:
    def broken(batch: list[Request]) -> None:
        raise RuntimeError("model failed")

    with pytest.raises(RuntimeError, match="model failed"):
        serve(poisson_arrivals(50.0, 0.3, [100]), [broken], BatcherSettings(), drain_s=1.0)


def test_unanswered_requests_count_beyond_the_target_and_capacity_is_the_best_load_that_meets_it() -> None:
    compute = Sleeper(0.02)  # 50 requests per second at batch 1
    result = sweep(
        [compute], [100], BatcherSettings(1, 0.0), [10.0, 200.0], 1.0, 100.0, budget_s=30.0, refine_steps=0
    )
    low, high = result.points
    assert low.meets_target and low.answered == low.requests and low.p99_ms is not None
    assert low.p50_ms is not None and 20.0 <= low.p50_ms <= low.p95_ms <= low.p99_ms <= 100.0  # type: ignore[operator]
    assert not high.meets_target and high.answered < high.requests and high.p99_ms is None
    assert result.capacity_qps == 10.0 and "overloaded at 200" in result.stopped
    json = result.to_json()
    assert json["capacity_qps"] == 10.0 and len(json["points"]) == 2


def test_sweep_stops_when_its_budget_is_spent() -> None:
    result = sweep(
        [Sleeper(0.001)], [100], BatcherSettings(1, 0.0), [5.0, 6.0, 7.0], 1.0, 500.0, budget_s=1.2
    )
    assert len(result.points) == 1 and "budget" in result.stopped


def test_a_grid_too_coarse_for_the_candidate_is_refined_below_and_between(monkeypatch) -> None:
    from dataclasses import replace

    from workbench.serving import capacity

    monkeypatch.setattr(capacity, "SERVING", replace(capacity.SERVING, min_requests=4))
    # 20 requests per second at batch 1: 40 QPS overwhelms it, so the sweep halves the load until one meets
    below = sweep(
        [Sleeper(0.05)], [100], BatcherSettings(1, 0.0), [40.0], 0.5, 250.0, budget_s=30.0, refine_steps=0
    )
    assert not below.points[0].meets_target and below.capacity_qps is not None
    assert 40.0 / 2**5 <= below.capacity_qps < 40.0 and len(below.points) >= 2
    # between a met load and one that is overwhelmed: geometric midpoints narrow the gap
    between = sweep(
        [Sleeper(0.02)],
        [100],
        BatcherSettings(1, 0.0),
        [10.0, 200.0],
        1.0,
        100.0,
        budget_s=30.0,
        refine_steps=2,
    )
    added = sorted(p.offered_qps for p in between.points[2:])
    assert len(added) == 2 and all(10.0 < r < 200.0 for r in added)
    assert between.capacity_qps is not None and 10.0 <= between.capacity_qps < 200.0


def test_a_candidate_that_misses_the_target_lightly_loaded_is_told_so(monkeypatch) -> None:
    from dataclasses import replace

    from workbench.serving import capacity

    monkeypatch.setattr(capacity, "SERVING", replace(capacity.SERVING, descend_halvings=1, min_requests=2))
    result = sweep([Sleeper(0.3)], [100], BatcherSettings(1, 0.0), [20.0, 40.0], 0.3, 100.0, budget_s=30.0)
    # past the first load that misses, the budget goes below it: 40 QPS is never offered
    assert result.capacity_qps is None and [p.offered_qps for p in result.points] == [20.0, 10.0]
    assert "at every load down to 10 QPS" in result.stopped and "even lightly loaded" in result.stopped


def test_sweep_rates_surround_the_batch_1_throughput_and_keep_the_gate_load() -> None:
    rates = sweep_rates(single_ms=100.0, instances=2)
    assert rates == sorted(rates) and min(rates) < 20.0 < max(rates)
    assert 33.0 in sweep_rates(100.0, 1, qps=33.0)
    assert sweep_rates(100.0, 1, given=[3.0, 1.0]) == [1.0, 3.0]
    assert Sweep(100.0).capacity_qps is None


def test_serving_table_of_the_gate_file(tmp_path) -> None:
    from workbench.evaluate.gates import load_gate_config

    path = tmp_path / "gates.toml"
    path.write_text(
        "max_wer_delta_points = 0.5\n[serving]\np99_ms = 200.0\nqps = 20\npreferred_batch = [2, 4]\n"
    )
    gates = load_gate_config(path)
    assert (
        gates.serving is not None
        and gates.serving.p99_ms == 200.0
        and gates.serving.preferred_batch == (2, 4)
    )
    assert gates.to_json()["serving"]["qps"] == 20
    for body, message in [
        ("[serving]\nqps = 20\n", "p99_ms"),
        ("[serving]\np99_ms = 100\nmax_batch = 4\npreferred_batch = [8]\n", "exceed max_batch"),
        ("[serving]\np99_ms = 100\nmax_batch_size = 4\n", "max_batch_size"),
        ("[serving]\np99_ms = -1\n", "p99_ms"),
        ("[serving]\np99_ms = 100\nmax_queue_delay_ms = -1\n", "0 or more"),
    ]:
        path.write_text(body)
        with pytest.raises(WorkbenchError, match=message):
            load_gate_config(path)


def test_capacity_is_the_top_of_the_unbroken_run_of_loads_that_meet_the_target() -> None:
    from workbench.serving.capacity import LoadPoint

    def point(qps: float, ok: bool) -> LoadPoint:
        return LoadPoint(qps, qps, 10, 10, 1.0, 2.0, 3.0 if ok else 999.0, 1.0, 0.0, ok)

    result = Sweep(100.0, [point(1.0, True), point(2.0, True), point(3.0, False), point(4.0, True)])
    assert result.capacity_qps == 2.0  # the pass at 4 QPS above a failure at 3 is noise
    assert result.at(3.0) is result.points[2] and result.at(5.0) is None
    assert Sweep(100.0, [point(1.0, False), point(2.0, True)]).capacity_qps is None


def test_a_load_released_behind_schedule_was_not_generated() -> None:
    from workbench.serving.load import check_generated

    check_generated(30.0, 2.0)  # 30 ms late against 500 ms gaps: the offered load holds
    with pytest.raises(WorkbenchError, match="could not generate 1000 QPS.*behind schedule"):
        check_generated(30.0, 1000.0)

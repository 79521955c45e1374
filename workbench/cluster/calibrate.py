"""Calibration statistics over clip shards: each worker counts its clips (balanced by duration) into streaming
statistics, split at the convergence checkpoint; the parts add exactly (power-of-two histograms,
``StreamingStats.merged``) and each tensor's per-clip tops go back into clip order, so the merged statistics
equal one pass over every clip. The same shards also make the FP16 guard's float statistics (maxima and counts,
``FloatStats.merged``), the second pass over the set that a run without Ray makes on its own. Workers run ONNX
Runtime with their share of threads: the statistics equal those of a run without Ray at that thread count."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from workbench.calibration import kernels
from workbench.calibration.collectors import StreamingStats
from workbench.calibration.runner import StatisticsSession, accumulate, open_statistics_session
from workbench.cluster.address import ClusterAddress
from workbench.cluster.check import CheckSet
from workbench.cluster.pool import open_pool
from workbench.cluster.shards import balanced, shard_weights
from workbench.cluster.worker import WorkerContext
from workbench.config import RAY_CHECK_CLIPS, RAY_SHARDS_PER_WORKER
from workbench.errors import WorkbenchError
from workbench.quantize.float_stats import FloatSession, FloatStats, collect_float_stats, open_float_session


@dataclass
class ShardStatistics:
    """One shard's statistics: of its clips before the checkpoint and of the rest (clip indices of each), and
    the FP16 guard's float statistics of all of them (when asked for)."""

    early: StreamingStats
    early_indices: list[int]
    late: StreamingStats
    late_indices: list[int]
    floats: FloatStats | None = None


@dataclass(frozen=True)
class StatisticsShard:
    """Count the clips ``indices`` of the pieces in the object store through the FP32 model."""

    model: Any  # object-store reference to the FP32 ONNX bytes
    pieces: Any  # object-store reference to the list of raw clips (or chunks)
    indices: tuple[int, ...]
    checkpoint: int | None
    with_histograms: bool
    bins: int
    providers: tuple[str, ...]
    prepare: Callable[[np.ndarray], np.ndarray]
    float_keys: dict[str, Any] | None = None  # also the float statistics (``float_stats``) under these keys

    def session(self, context: WorkerContext) -> StatisticsSession:
        """The worker's one statistics session of the model (opened on first use)."""
        return context.cached(
            f"statistics-session:{self.model.hex()}:{','.join(self.providers)}",
            lambda: statistics_session(context, self.model, self.providers),
        )

    def run(self, context: WorkerContext) -> ShardStatistics:
        if self.with_histograms:
            kernels.warm_up()
        opened = self.session(context)
        pieces = context.blob(self.pieces)
        cut = len(pieces) if self.checkpoint is None else self.checkpoint
        parts = ([i for i in self.indices if i < cut], [i for i in self.indices if i >= cut])
        out = []
        for part in parts:
            stats = StreamingStats(with_histograms=self.with_histograms, bins=self.bins)
            accumulate(
                opened,
                (pieces[i] for i in part),
                len(part),
                stats,
                prepare=self.prepare,
                progress=False,
                workers=context.threads,
            )
            out.append(stats)
        floats = None
        if self.float_keys is not None:
            floats = collect_float_stats(
                self.float_session(context),
                (pieces[i] for i in self.indices),
                len(self.indices),
                self.float_keys,
                progress=False,
                prepare=self.prepare,
            )
        return ShardStatistics(out[0], parts[0], out[1], parts[1], floats)

    def float_session(self, context: WorkerContext) -> FloatSession:
        """The worker's one session of the model for the float statistics, opened as a run without Ray opens it
        (from the parsed model), with the worker's threads."""
        import onnx

        return context.cached(
            f"float-session:{self.model.hex()}",
            lambda: open_float_session(
                onnx.load_model_from_string(context.blob(self.model)), threads=context.threads
            ),
        )


def statistics_session(context: WorkerContext, model: Any, providers: Sequence[str]) -> StatisticsSession:
    """The worker's statistics session of the ONNX bytes behind ``model``, opened as a run without Ray opens it:
    from a file (written to a temporary folder and removed once ONNX Runtime has mapped it), so the graph is read
    without its weights and ONNX Runtime maps them once (parsing the bytes into a model first took several times
    longer for the demo model), with the worker's ONNX Runtime threads, whose count the statistics' float values
    depend on."""
    with tempfile.TemporaryDirectory(prefix="workbench-worker-", ignore_cleanup_errors=True) as tmp:
        path = Path(tmp) / "model.fp32.onnx"
        path.write_bytes(context.blob(model))
        return open_statistics_session(path, providers=providers, threads=context.threads)


def merge_floats(shards: Sequence[ShardStatistics]) -> FloatStats | None:
    """The shards' float statistics added in shard order (exact: maxima and counts), or None if not asked for."""
    found = [s.floats for s in shards if s.floats is not None]
    if not found:
        return None
    total = found[0]
    for floats in found[1:]:
        total = total.merged(floats)
    return total


def merge_statistics(
    shards: Sequence[ShardStatistics], names: Sequence[str], checkpoint: int | None
) -> StreamingStats:
    """The statistics of every clip: early parts merged (the checkpoint's state), then the late parts; tops in
    clip order; tensors in graph order (``names``)."""
    parts = [(s.early, s.early_indices) for s in shards] + [(s.late, s.late_indices) for s in shards]
    early = _merged([p for p in parts[: len(shards)] if p[1]])
    every = _merged([p for p in parts if p[1]])
    if early is not None and checkpoint is not None and every is not None:
        every.with_checkpoint(early)
    if every is None:
        raise WorkbenchError("the calibration set has no clips")
    order = sorted((i, k, stats) for stats, indices in parts for k, i in enumerate(indices))
    every.tops = {name: [stats.tops[name][k] for _, k, stats in order] for name in every.tops}
    every.in_order(list(names))
    return every


def _merged(parts: list[tuple[StreamingStats, list[int]]]) -> StreamingStats | None:
    if not parts:
        return None
    total = parts[0][0]
    for stats, _ in parts[1:]:
        total = total.merged(stats)
    return total


def spread_statistics(
    address: ClusterAddress,
    fp32: bytes,
    pieces: list[np.ndarray],
    durations: Sequence[float],
    *,
    checkpoint: int | None,
    with_histograms: bool,
    bins: int,
    providers: Sequence[str],
    prepare: Callable[[np.ndarray], np.ndarray],
    names: Sequence[str],
    float_keys: dict[str, Any] | None = None,
) -> tuple[StreamingStats, FloatStats | None]:
    """The statistics pass over ``pieces`` on the cluster (see the module docstring); with ``float_keys`` (the
    pieces are whole clips) also the FP16 guard's float statistics of them, in the same shards."""
    check = CheckSet.of(fp32, [prepare(p) for p in pieces[:RAY_CHECK_CLIPS]], providers, "the FP32 model")
    check = replace(check, histograms=with_histograms)
    with open_pool(address, check, gpu="CUDAExecutionProvider" in providers) as pool:
        pieces_ref = pool.put(pieces)
        shards = balanced(durations, RAY_SHARDS_PER_WORKER * len(pool.workers))
        tasks = [
            StatisticsShard(
                pool.check_model,
                pieces_ref,
                tuple(shard),
                checkpoint,
                with_histograms,
                bins,
                tuple(providers),
                prepare,
                float_keys,
            )
            for shard in shards
        ]
        results = pool.map(tasks, "calibration statistics", shard_weights(shards, durations))
    return merge_statistics(results, names, checkpoint), merge_floats(results)

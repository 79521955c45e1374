"""Run the FP32 ONNX model with ONNX Runtime and stream the inputs of every compute node into collectors.

"Run the model" (this module) is separate from "accumulate statistics" (collectors.py). The inputs
of every MatMul/Gemm/Conv are marked as extra graph outputs; each clip runs once (one pass), its
activations go straight into running maxima and exact growing histograms and are then dropped, so
memory does not grow with the number of clips and neither batching nor clip order changes the result.
Statistics of each clip are accumulated by a thread pool (one task per tensor, on every core) right
after its run, while ONNX Runtime waits, so one clip's activations are alive at a time. Counting while
ONNX Runtime runs the next clip was tried and dropped: its parallel ops split work evenly over the
cores, so a statistics thread on one core held back every op, and the run time varied by +-15 % from
run to run (Wav2Vec2-base, 16 clips, idle machine: 8.9-11.1 s against 8.9 s one after the other).
The histograms are counted by a compiled one-pass kernel (``kernels``); without numba, ONNX Runtime's
output buffers serve as the scratch space of the numpy passes (no copies) unless two outputs share
memory. Thresholds are then searched for all tensors in parallel.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from tqdm import tqdm

from workbench.backends.onnxruntime import on_first_provider, ort_failures, runs_ahead
from workbench.calibration import kernels
from workbench.calibration.channels import ChannelStats
from workbench.calibration.collectors import StatisticsSnapshot, StreamingStats
from workbench.calibration.graph_structure import (
    GraphSummary,
    outputs_fragment,
    read_structure,
    write_with_external_weights,
)
from workbench.calibration.methods import MethodSpec, compute_amax
from workbench.config import QUANTIZABLE_OPS
from workbench.errors import WorkbenchError
from workbench.model.export import INPUT
from workbench.model.features import normalise_audio
from workbench.quiet import bars_on

_LINKED_WEIGHTS = "weights.bin"  # the hard link's name inside the temporary folder

if TYPE_CHECKING:  # onnx is imported only where a ModelProto is handled: it costs about a second of CPU
    import onnx


@dataclass
class PhaseClock:
    """Wall seconds per named phase of a calibration run (summed over repeats), for profiles."""

    seconds: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start


def activation_tensors(model: onnx.ModelProto | GraphSummary) -> list[str]:
    """Float activation inputs of MatMul/Gemm/Conv (initializers and constants excluded), graph order."""
    graph = model if isinstance(model, GraphSummary) else GraphSummary.of_model(model)
    consts = {o for n in graph.nodes if n.op_type == "Constant" for o in n.outputs}
    names: list[str] = []
    for node in graph.nodes:
        if node.op_type in QUANTIZABLE_OPS:
            for name in node.inputs[:2]:
                if name and name not in graph.initializers and name not in consts and name not in names:
                    names.append(name)
    return names


def calibration_session(
    model: onnx.ModelProto | Path,
    names: list[str],
    threads: int | None = None,
    providers: Sequence[str] = ("CPUExecutionProvider",),
):
    """An ORT session (``providers``: CPU, or CUDA from ``workbench.backends.factory.ort_providers``) that also
    returns every tensor in ``names`` (graph outputs added).

    From a path (weights inside the file) nothing of the weights is copied: the file is hard-linked
    into a temporary folder and ONNX Runtime loads a small graph file beside the link whose weights are
    external data at their offsets in it (``graph_structure.write_with_external_weights``); ONNX Runtime
    then maps them from the page cache instead of reading the file (about 0.6 s for Wav2Vec2-base
    instead of 1.0-1.2 s). Where no hard link can be made (another file system), the file is copied
    there with the extra outputs appended (``graph_structure.outputs_fragment``). A ModelProto, or a
    model with external data, is re-serialised with the outputs swapped
    (``backends.onnxruntime.session_with_outputs``). Thread-pool threads spin during a run (as plain
    inference's do) and stop spinning when it returns (``session.force_spinning_stop``), so the statistics
    threads that count each run's tensors get the cores. Optimisation is "extended": ONNX Runtime's fusions
    (MatMul+Add, GELU, LayerNorm) skip any node whose output was asked for, so every tensor is still
    returned, and the run is as fast as plain inference (Wav2Vec2-base, 16 clips: 7.8 s with the 106 extra
    outputs against 7.9 s plain; at "basic", 8.8 s); values agree with the unfused graph to about 1e-6.
    """
    import onnxruntime as ort

    from workbench.backends.onnxruntime import session_options, session_with_outputs

    options = session_options(threads, optimization="extended")
    options.add_session_config_entry("session.intra_op.allow_spinning", "1")
    providers = list(providers)
    if isinstance(model, Path):
        with tempfile.TemporaryDirectory(prefix="workbench-calib-") as tmp:
            graph = Path(tmp) / "graph.onnx"
            try:
                os.link(model, Path(tmp) / _LINKED_WEIGHTS)
            except OSError:
                shutil.copyfile(model, graph)
                with open(graph, "ab") as handle:
                    handle.write(outputs_fragment(names))
            else:
                write_with_external_weights(model, graph, _LINKED_WEIGHTS, names)
            session = ort.InferenceSession(str(graph), options, providers=providers)
            return on_first_provider(session, providers, model.name)
    return session_with_outputs(model, names, options)


@dataclass
class StatisticsSession:
    """An ONNX Runtime session of a model that also returns every activation tensor the statistics count."""

    session: Any
    names: list[str]


def open_statistics_session(
    model: onnx.ModelProto | Path,
    clock: PhaseClock | None = None,
    providers: Sequence[str] = ("CPUExecutionProvider",),
    threads: int | None = None,
) -> StatisticsSession:
    """The session ``collect_statistics`` runs clips through (graph read, tensors marked, session made);
    ``threads``: ONNX Runtime's intra-op threads (default: the cores this process may run on). Its float results
    depend on the thread count (the demo model's feature-extractor convolutions give other float values with 4
    threads or more than with 1 to 3), so statistics that must equal another run's use the same count."""
    clock = clock or PhaseClock()
    with clock.phase("graph"):
        structure = read_structure(model) if isinstance(model, Path) else GraphSummary.of_model(model)
        names = activation_tensors(structure)
    if not names:
        raise WorkbenchError(
            "the model has no MatMul/Gemm/Conv node with an activation input; nothing to calibrate"
        )
    with clock.phase("session"):
        source: onnx.ModelProto | Path = model
        if isinstance(model, Path) and structure.external_data:
            # weights in files beside it: they cannot follow a copied graph file
            import onnx
            from onnx.external_data_helper import load_external_data_for_model

            source = onnx.load(str(model), load_external_data=False)
            load_external_data_for_model(source, str(model.parent))
        with ort_failures(f"the model {model}" if isinstance(model, Path) else "the model"):
            session = calibration_session(source, names, threads, providers)
        del source
    return StatisticsSession(session, names)


def accumulate(
    opened: StatisticsSession,
    clips: Iterable[np.ndarray],
    count: int | None,
    stats: StreamingStats,
    clock: PhaseClock | None = None,
    checkpoint: int | None = None,
    prepare: Callable[[np.ndarray], np.ndarray] = normalise_audio,
    channels: ChannelStats | None = None,
    progress: bool = True,
    workers: int | None = None,
) -> int:
    """Run every clip through ``opened`` and fold its tensors into ``stats`` (see ``collect_statistics``);
    the number of clips run. ``workers``: threads that count the tensors (default ``_workers()``)."""
    clock = clock or PhaseClock()
    session, names = opened.session, opened.names
    seen = 0
    feeds = (
        (f"calibration clip {i + 1}", {INPUT: prepare(audio)[None]})
        for i, audio in enumerate(
            tqdm(
                clips,
                total=count,
                desc="calibration (one pass)",
                unit="clip",
                disable=not (progress and bars_on()),
            )
        )
    )
    runs = runs_ahead(session, names, feeds)  # the next clip runs while this one's tensors are counted
    with ThreadPoolExecutor(max_workers=workers or _workers()) as pool:
        while True:
            with clock.phase("inference"):
                ran = next(runs, None)
            if ran is None:
                break
            values = ran[1]
            if seen == checkpoint:
                stats.mark_checkpoint()
            with clock.phase("statistics"):
                update = stats.update if channels is None else _both(stats, channels)
                for task in [
                    pool.submit(update, name, value, own)
                    for name, value, own in zip(names, values, _unshared(values))
                ]:
                    task.result()
            del values
            seen += 1
    return seen


def collect_statistics(
    model: onnx.ModelProto | Path,
    clips: Iterable[np.ndarray],
    count: int | None,
    with_histograms: bool = True,
    bins: int = 2048,
    clock: PhaseClock | None = None,
    providers: Sequence[str] = ("CPUExecutionProvider",),
    checkpoint: int | None = None,
    prepare: Callable[[np.ndarray], np.ndarray] = normalise_audio,
    channels: ChannelStats | None = None,
) -> StreamingStats:
    """One pass over raw 16 kHz clips (each made ``input_values`` by ``prepare``: the model's feature settings).

    Given a path, only the graph structure is read (``graph_structure.read_structure``: the weights
    are skipped) and the session comes from the file itself (see ``calibration_session``), so the
    weights are parsed once, by ONNX Runtime. External data files are loaded. The compiled histogram
    kernel is imported in the background meanwhile. ``clock`` (optional) receives the wall time of
    each phase: graph, session, inference (the runs) and statistics (counting each run's tensors).
    ``checkpoint`` (optional): after that many clips what the range methods read of the statistics is kept
    once (``StreamingStats.mark_checkpoint``), for the convergence report. ``channels`` (optional) also
    receives every run's tensors it names (per-channel max, mean and a row sample, for the accuracy-recovery
    transforms), in the same pass, before a tensor's buffer is used as scratch space.
    """
    clock = clock or PhaseClock()
    if with_histograms:
        kernels.warm_up()
    opened = open_statistics_session(model, clock, providers)
    stats = StreamingStats(with_histograms=with_histograms, bins=bins)
    seen = accumulate(opened, clips, count, stats, clock, checkpoint, prepare, channels)
    if seen == 0:
        raise WorkbenchError("the calibration set has no clips")
    stats.in_order(opened.names)  # the threads finish in any order; files list tensors in graph order
    return stats


def _both(stats: StreamingStats, channels: ChannelStats) -> Callable[[str, np.ndarray, bool], None]:
    """One task's update of the per-channel statistics, then of the range statistics."""

    def update(name: str, values: np.ndarray, own: bool) -> None:
        channels.update(name, values)
        stats.update(name, values, own)

    return update


def _unshared(arrays: list[np.ndarray]) -> list[bool]:
    """Which arrays share no memory with another one, so they may be used as scratch space.

    ONNX Runtime hands its output buffers to numpy without a copy, and an output of a view-like op
    (Reshape, Squeeze) can alias its input's buffer when both were asked for.
    """
    spans = sorted((a.__array_interface__["data"][0], a.nbytes, k) for k, a in enumerate(arrays))
    own = [True] * len(arrays)
    reach, last = -1, -1
    for start, size, k in spans:
        if start < reach:
            own[k] = False
            own[last] = False
        if start + size > reach:
            reach, last = start + size, k
    return own


def _workers() -> int:
    return max(1, min(8, os.cpu_count() or 1))


def ranges_from_statistics(
    stats: StreamingStats | StatisticsSnapshot, spec: MethodSpec, clock: PhaseClock | None = None
) -> dict[str, float]:
    """amax per tensor with the chosen method (tensors in parallel: numpy releases the GIL)."""
    names = list(stats.maxes.amax)

    def one(name: str) -> float:
        return compute_amax(
            spec, stats.maxes.amax[name], stats.histogram(name) if spec.name != "max" else None
        )

    with (clock or PhaseClock()).phase("thresholds"), ThreadPoolExecutor(max_workers=_workers()) as pool:
        values = list(
            tqdm(
                pool.map(one, names),
                total=len(names),
                desc=f"{spec.name} thresholds",
                unit="tensor",
                leave=False,
                disable=not bars_on(),
            )
        )
    return dict(zip(names, values))


def calibrate_ranges(
    model: onnx.ModelProto | Path,
    clips: Iterable[np.ndarray],
    count: int | None,
    spec: MethodSpec,
    clock: PhaseClock | None = None,
    prepare: Callable[[np.ndarray], np.ndarray] = normalise_audio,
) -> dict[str, float]:
    """amax per activation tensor that feeds a MatMul/Gemm/Conv, symmetric, per tensor."""
    stats = collect_statistics(
        model, clips, count, with_histograms=spec.name != "max", bins=spec.bins, clock=clock, prepare=prepare
    )
    return ranges_from_statistics(stats, spec, clock)

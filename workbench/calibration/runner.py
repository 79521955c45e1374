"""Run the FP32 ONNX model with ONNX Runtime and stream the inputs of every compute node into collectors.

"Run the model" (this module) is separate from "accumulate statistics" (collectors.py). The inputs
of every MatMul/Gemm/Conv are marked as extra graph outputs; each clip runs once (one pass), its
activations go straight into running maxima and exact growing histograms and are then dropped, so
memory does not grow with the number of clips and neither batching nor clip order changes the result.
Statistics of clip n are accumulated by a thread pool (one task per tensor) while ONNX Runtime runs
clip n+1 (it releases the GIL, and its thread pool does not spin), so at most two clips' activations
are alive at a time. ONNX Runtime's output buffers serve as the scratch space for |x| and its scaling
(no copies) unless two outputs share memory.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterable

import numpy as np
import onnx
from onnx.external_data_helper import load_external_data_for_model
from tqdm import tqdm

from workbench.calibration.collectors import StreamingStats
from workbench.calibration.methods import MethodSpec, compute_amax
from workbench.errors import WorkbenchError
from workbench.model.export import INPUT
from workbench.model.features import normalise_audio
from workbench.quantize.plan import QUANTIZABLE_OPS


def activation_tensors(model: onnx.ModelProto) -> list[str]:
    """Float activation inputs of MatMul/Gemm/Conv (initializers and constants excluded), graph order."""
    inits = {i.name for i in model.graph.initializer}
    consts = {o for n in model.graph.node if n.op_type == "Constant" for o in n.output}
    names: list[str] = []
    for node in model.graph.node:
        if node.op_type in QUANTIZABLE_OPS:
            for name in node.input[:2]:
                if name and name not in inits and name not in consts and name not in names:
                    names.append(name)
    return names


def _uses_external_data(model: onnx.ModelProto) -> bool:
    return any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer)


def _outputs_fragment(names: list[str]) -> bytes:
    """Serialised ModelProto holding only a graph with ``names`` as outputs.

    Protobuf merges a repeated occurrence of an embedded message field, so appending these bytes to a
    serialised model adds ``names`` to its graph outputs without parsing or re-serialising its weights.
    """
    graph = onnx.GraphProto()
    graph.output.extend(onnx.ValueInfoProto(name=name) for name in names)
    return onnx.ModelProto(graph=graph).SerializeToString()


def calibration_session(model: onnx.ModelProto | Path, names: list[str], threads: int | None = None):
    """An ORT CPU session that also returns every tensor in ``names`` (graph outputs added).

    From a path (weights inside the file) the model is copied by the kernel to a temporary file with
    the extra outputs appended (see ``_outputs_fragment``) and ONNX Runtime loads that file: about
    three times faster than handing it the re-serialised model as bytes, and no Python copy of the
    weights. A ModelProto, or a model with external data, is re-serialised with the outputs swapped.
    Thread-pool spinning is off so the statistics threads get the cores while ONNX Runtime waits.
    """
    import onnxruntime as ort

    from workbench.backends.onnxruntime import session_options

    options = session_options(threads, optimization="basic")
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    providers = ["CPUExecutionProvider"]
    if isinstance(model, Path):
        with tempfile.TemporaryDirectory(prefix="workbench-calib-") as tmp:
            copy = Path(tmp) / model.name
            shutil.copyfile(model, copy)
            with open(copy, "ab") as handle:
                handle.write(_outputs_fragment(names))
            return ort.InferenceSession(str(copy), options, providers=providers)
    # swap the outputs in place for serialisation (a deep copy would hold the weights twice more)
    original = [onnx.ValueInfoProto.FromString(o.SerializeToString()) for o in model.graph.output]
    del model.graph.output[:]
    model.graph.output.extend(onnx.ValueInfoProto(name=name) for name in names)
    try:
        data = model.SerializeToString()
    finally:
        del model.graph.output[:]
        model.graph.output.extend(original)
    session = ort.InferenceSession(data, options, providers=providers)
    del data
    return session


def collect_statistics(model: onnx.ModelProto | Path, clips: Iterable[np.ndarray], count: int | None,
                       with_histograms: bool = True, bins: int = 2048) -> StreamingStats:
    """One pass over raw 16 kHz clips (each normalised like the feature extractor does).

    Given a path, the model is read only for the names of the tensors to calibrate and then dropped;
    the session comes from the file itself (see ``calibration_session``), so the weights are not held
    twice (once by Python, once by ONNX Runtime) during the pass. External data files are loaded.
    """
    proto = onnx.load(str(model), load_external_data=False) if isinstance(model, Path) else model
    names = activation_tensors(proto)
    if not names:
        raise WorkbenchError("the model has no MatMul/Gemm/Conv node with an activation input; nothing to calibrate")
    source: onnx.ModelProto | Path = proto
    if isinstance(model, Path):
        if _uses_external_data(proto):  # weights in files beside it: they cannot follow a copied graph file
            load_external_data_for_model(proto, str(model.parent))
        else:
            source = model
    del proto
    session = calibration_session(source, names)
    del source
    stats = StreamingStats(with_histograms=with_histograms, bins=bins)
    seen = 0
    with ThreadPoolExecutor(max_workers=_workers()) as pool:
        pending: list = []
        for audio in tqdm(clips, total=count, desc="calibration (one pass)", unit="clip"):
            values = session.run(names, {INPUT: normalise_audio(audio)[None]})
            for task in pending:
                task.result()
            scratch = _unshared(values)
            pending = [pool.submit(stats.update, name, value, own)
                       for name, value, own in zip(names, values, scratch)]
            del values
            seen += 1
        for task in pending:
            task.result()
    if seen == 0:
        raise WorkbenchError("the calibration set has no clips")
    return stats


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


def ranges_from_statistics(stats: StreamingStats, spec: MethodSpec) -> dict[str, float]:
    """amax per tensor with the chosen method."""
    names = list(stats.maxes.amax)

    def one(name: str) -> float:
        return compute_amax(spec, stats.maxes.amax[name], stats.histogram(name) if spec.name != "max" else None)

    with ThreadPoolExecutor(max_workers=_workers()) as pool:
        values = list(tqdm(pool.map(one, names), total=len(names), desc=f"{spec.name} thresholds",
                           unit="tensor", leave=False))
    return dict(zip(names, values))


def calibrate_ranges(model: onnx.ModelProto | Path, clips: Iterable[np.ndarray], count: int | None,
                     spec: MethodSpec) -> dict[str, float]:
    """amax per activation tensor that feeds a MatMul/Gemm/Conv, symmetric, per tensor."""
    stats = collect_statistics(model, clips, count, with_histograms=spec.name != "max", bins=spec.bins)
    return ranges_from_statistics(stats, spec)

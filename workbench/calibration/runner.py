"""Run the FP32 ONNX model with ONNX Runtime and stream the inputs of every compute node into collectors.

"Run the model" (this module) is separate from "accumulate statistics" (collectors.py). Clips run
one at a time, so neither batch size nor padding can change the statistics; two passes (max,
then fixed-range histograms) make the result independent of clip order.
"""

from __future__ import annotations

from typing import Callable, Iterable

import numpy as np
import onnx
from tqdm import tqdm

from workbench.calibration.collectors import HistogramCollector, MaxCollector
from workbench.calibration.methods import MethodSpec, compute_amax
from workbench.model.export import INPUT, normalise
from workbench.quantize.plan import QUANTIZABLE_OPS


def activation_tensors(model: onnx.ModelProto) -> list[str]:
    """Float activation inputs of MatMul/Gemm/Conv (initializers excluded)."""
    inits = {i.name for i in model.graph.initializer}
    consts = {o for n in model.graph.node if n.op_type == "Constant" for o in n.output}
    names: list[str] = []
    for node in model.graph.node:
        if node.op_type in QUANTIZABLE_OPS:
            for name in node.input[:2]:
                if name and name not in inits and name not in consts and name not in names:
                    names.append(name)
    return names


def _session_with_outputs(model: onnx.ModelProto, names: list[str]):
    import onnxruntime as ort

    from workbench.backends.onnxruntime import session_options

    augmented = onnx.ModelProto()
    augmented.CopyFrom(model)
    existing = {o.name for o in augmented.graph.output}
    for name in names:
        if name not in existing:
            augmented.graph.output.append(onnx.ValueInfoProto(name=name))
    return ort.InferenceSession(augmented.SerializeToString(), session_options(optimization="basic"),
                                providers=["CPUExecutionProvider"])


def calibrate_ranges(model: onnx.ModelProto, clips: Callable[[], Iterable[np.ndarray]], count: int,
                     spec: MethodSpec) -> dict[str, float]:
    """amax per activation tensor; ``clips`` is called once per pass and yields raw 16 kHz audio."""
    names = activation_tensors(model)
    session = _session_with_outputs(model, names)
    maxes = MaxCollector()
    for audio in tqdm(clips(), total=count, desc="calibration pass 1/2 (ranges)", unit="clip"):
        for name, value in zip(names, session.run(names, {INPUT: normalise(audio)[None]})):
            maxes.update(name, value)
    if spec.name == "max":
        return dict(maxes.amax)
    hists = HistogramCollector(maxes.amax, bins=spec.bins)
    for audio in tqdm(clips(), total=count, desc="calibration pass 2/2 (histograms)", unit="clip"):
        for name, value in zip(names, session.run(names, {INPUT: normalise(audio)[None]})):
            hists.update(name, value)
    return {n: compute_amax(spec, maxes.amax.get(n, 0.0), hists.histograms.get(n))
            for n in tqdm(names, desc=f"{spec.name} thresholds", unit="tensor")}

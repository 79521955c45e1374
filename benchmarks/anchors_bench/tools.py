"""The calibration jobs of ``benchmarks/anchors.py``, each run in its own process (``python anchors.py --child
SPEC.json``; ModelOpt's with its own venv's python) so its wall time and peak RSS are its own. Every job reads
the same calibration clips, normalised the way the workbench feeds the model (per-clip zero mean, unit
variance), from files the parent wrote once:

- ``natural.npz``: every clip of the calibration set at its own length, fed one clip per batch ([1, samples]);
- ``cropped.npy``: [clips, samples], every clip cropped to the set's shortest clip before normalising (one
  array: what ModelOpt's ``calibration_data`` takes; ONNX Runtime gets the same rows one per batch).

A job prints one JSON line: ``wall_s``, ``peak_rss_mb``, ``onnx`` (the quantized model) and what it adds.
Only numpy and the tool itself are imported at module level: the ModelOpt job runs under another onnx /
onnxruntime."""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

ORT_METHODS = ("MinMax", "Entropy", "Percentile")
FEEDS = ("natural", "cropped")


def feed(data: Path, kind: str) -> Iterator[np.ndarray]:
    """The calibration clips of ``kind`` (``natural`` or ``cropped``), each [1, samples] float32."""
    if kind == "natural":
        with np.load(data / "natural.npz") as clips:
            for key in sorted(clips.files):
                yield clips[key][None]
    elif kind == "cropped":
        for row in np.load(data / "cropped.npy", mmap_mode="r"):
            yield np.ascontiguousarray(row)[None]
    else:
        raise ValueError(f"unknown feed {kind!r}; one of {FEEDS}")


def job_ort(spec: dict[str, Any]) -> dict[str, Any]:
    """ONNX Runtime ``quantize_static``: QDQ, per-channel, symmetric INT8 activations and weights, the given
    calibration method, every other option at its default (all op types ORT quantizes)."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.items = feed(Path(spec["data"]), spec["feed"])

        def get_next(self):
            audio = next(self.items, None)
            return None if audio is None else {"input_values": audio}

    quantize_static(
        spec["fp32"],
        spec["onnx"],
        Reader(),
        quant_format=QuantFormat.QDQ,
        per_channel=True,
        activation_type=QuantType.QInt8,
        weight_type=QuantType.QInt8,
        calibrate_method=getattr(CalibrationMethod, spec["method"]),
        extra_options={"ActivationSymmetric": True, "WeightSymmetric": True},
    )
    import onnxruntime

    return {"versions": {"onnxruntime": onnxruntime.__version__}}


def job_modelopt(spec: dict[str, Any]) -> dict[str, Any]:
    """ModelOpt ONNX PTQ ``quantize(quantize_mode="int8")``: its defaults (entropy, the rest of the graph in
    FP16), or with ``high_precision_dtype="fp32"`` (the rest kept FP32); calibration data = the cropped array."""
    import importlib.metadata as meta

    import onnxruntime
    from modelopt.onnx.quantization import quantize

    data = np.load(Path(spec["data"]) / "cropped.npy")
    kwargs = dict(spec.get("options") or {})
    quantize(
        spec["fp32"],
        quantize_mode="int8",
        calibration_data={"input_values": data},
        output_path=spec["onnx"],
        **kwargs,
    )
    return {
        "versions": {
            "nvidia-modelopt": meta.version("nvidia-modelopt"),
            "onnxruntime": onnxruntime.__version__,
            "onnx": meta.version("onnx"),
        }
    }


def job_workbench(spec: dict[str, Any]) -> dict[str, Any]:
    """The workbench's ``calibrate`` job (what ``python -m workbench calibrate`` runs) with the FP32 export already
    in place: load the PyTorch model, a 6-clip parity check, one streaming pass over the whole set, the ranges,
    cache + histograms, the INT8-everywhere Q/DQ model."""
    from workbench.calibration.methods import MethodSpec
    from workbench.jobs import calibrate

    method = (
        MethodSpec(spec["method"], spec["percentile"])
        if spec.get("percentile")
        else MethodSpec(spec["method"])
    )
    result = calibrate.run(
        calibrate.CalibrateInputs(
            spec["model"],
            spec["calib_set"],
            method,
            engines=Path(spec["engines"]),
            calib_root=Path(spec["calib_root"]),
        )
    )
    if result.reused_cache:
        raise RuntimeError(
            f"the cache {result.cache} was reused: the benchmark must time a fresh calibration"
        )
    shutil.copyfile(result.int8_onnx, spec["onnx"])
    return {"cache": str(result.cache), "tensors": result.tensors}


def job_search(spec: dict[str, Any]) -> dict[str, Any]:
    """The workbench's ``search`` job (sensitivity ranking, then the bisect search, dev set = the calibration set,
    no refinement, intervals widened to the evaluation set's size) on a finished calibration's cache."""
    from workbench.console import show_progress
    from workbench.jobs import search

    show_progress(stream=sys.stderr)  # stdout carries this child's JSON answer
    out = search.run(
        search.SearchInputs(
            model=spec["model"],
            calib_set=spec["calib_set"],
            method=spec["method"],
            cache=Path(spec["cache"]),
            engines=Path(spec["engines"]),
            calib_root=Path(spec["calib_root"]),
            signoff_set=spec["eval_set"],
            refine=0,
            resamples=spec.get("resamples", 1000),
            progress=False,
        ),
    )
    found = out.data["found"]
    if found is None:
        return {"onnx": None, "found": None, "evaluations": out.data["evaluations"]}
    shutil.copyfile(found["onnx_path"], spec["onnx"])
    return {
        "found": {k: found[k] for k in ("name", "int8_share", "k", "fp16_groups")},
        "evaluations": out.data["evaluations"],
    }


JOBS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "ort": job_ort,
    "modelopt": job_modelopt,
    "workbench": job_workbench,
    "search": job_search,
}


def child(spec_path: Path) -> None:
    """Run the job a spec file names; print one JSON line with its wall time and this process's peak RSS."""
    from childproc import peak_rss_mb

    spec = json.loads(Path(spec_path).read_text())
    start = time.perf_counter()
    extra = JOBS[spec["kind"]](spec)
    wall = time.perf_counter() - start
    print(
        json.dumps(
            {
                "job": spec["name"],
                "wall_s": round(wall, 2),
                "peak_rss_mb": round(peak_rss_mb(), 1),
                "onnx": spec["onnx"],
                **extra,
            }
        )
    )

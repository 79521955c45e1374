"""The sign-off pipeline: candidates (ONNX files, FP32 baseline first) + sets -> judged record -> report."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from workbench.errors import WorkbenchError
from workbench.evaluate.accuracy import compare_accuracy
from workbench.evaluate.gates import GateConfig, judge, recommend
from workbench.evaluate.latency import LatencyConfig, bucket_clips, measure_latency
from workbench.evaluate.machine import machine_info, package_versions
from workbench.evaluate.transcribe import transcribe_set
from workbench.report.record import artifact_entry, build_record
from workbench.report.render import write_report


@dataclass
class SignoffInputs:
    candidates: list[tuple[str, Path]]  # (name, ONNX path); the first is the baseline
    eval_set: object  # SpeechSet
    out_dir: Path
    model: Path | None = None
    calib_set: object | None = None
    cache: Path | None = None
    gates: GateConfig = field(default_factory=GateConfig)
    latency: LatencyConfig | None = field(default_factory=LatencyConfig)
    sensitivity: Path | None = None
    threads: int | None = None
    providers: tuple[str, ...] = ("CPUExecutionProvider",)
    resamples: int = 2000
    seed: int = 0
    limit: int | None = None


def _runner(path: Path, name: str, inputs: SignoffInputs):
    from workbench.backends.onnxruntime import OnnxRuntimeRunner

    return OnnxRuntimeRunner(path, providers=inputs.providers, threads=inputs.threads, name=name)


def run_signoff(inputs: SignoffInputs, log: Callable[[str], None] = print) -> tuple[dict, dict[str, Path]]:
    """Transcribe, score, time and judge every candidate; write report.json/.md/.html. Returns (record, paths)."""
    if not inputs.candidates:
        raise WorkbenchError("give at least one candidate (the FP32 baseline first)")
    names = [n for n, _ in inputs.candidates]
    if len(set(names)) != len(names):
        raise WorkbenchError(f"candidate names must be unique, got {names}")
    for name, path in inputs.candidates:
        if not Path(path).is_file():
            raise WorkbenchError(f"candidate {name}: {path} does not exist")
    sensitivity = None
    if inputs.sensitivity is not None:
        try:
            sensitivity = json.loads(Path(inputs.sensitivity).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise WorkbenchError(f"sensitivity file {inputs.sensitivity}: {exc}") from exc
    eval_set = inputs.eval_set
    utts = eval_set.utterances[: inputs.limit] if inputs.limit else eval_set.utterances
    machine = machine_info()
    hyps: dict[str, list[str]] = {}
    latencies = {}
    buckets = bucket_clips(eval_set) if inputs.latency else {}
    for name, path in inputs.candidates:
        log(f"[{name}] transcribing {len(utts)} utterances of {eval_set.name}")
        hyps[name] = transcribe_set(_runner(path, name, inputs), eval_set, name, limit=inputs.limit).texts
        if inputs.latency:
            log(f"[{name}] timing batch sizes {list(inputs.latency.batch_sizes)} x buckets {list(buckets)}")
            latencies[name] = measure_latency(_runner(path, name, inputs), buckets, inputs.latency, name, machine)
    accuracy = compare_accuracy(utts, hyps, names[0], resamples=inputs.resamples, seed=inputs.seed)
    verdicts = judge(accuracy, latencies, inputs.gates)
    choice = recommend(verdicts, latencies, inputs.gates.latency_batch)
    artifacts = [artifact_entry("evaluation set", eval_set.path, "speech set")]
    if inputs.model is not None:
        artifacts.insert(0, artifact_entry("model", inputs.model, "model"))
    if inputs.calib_set is not None:
        artifacts.append(artifact_entry("calibration set", inputs.calib_set.path, "speech set"))
    if inputs.cache is not None:
        artifacts.append(artifact_entry("calibration cache", inputs.cache, "cache"))
    if inputs.sensitivity is not None:
        artifacts.append(artifact_entry("sensitivity", inputs.sensitivity, "json"))
    artifacts += [artifact_entry(f"candidate {n}", p, "onnx") for n, p in inputs.candidates]
    notes = [f"evaluation set {eval_set.name} content hash {eval_set.content_hash}"]
    if inputs.limit:
        notes.append(f"only the first {inputs.limit} utterances of the evaluation set were scored")
    record = build_record(accuracy=accuracy.to_json(), latency={n: r.to_json() for n, r in latencies.items()},
                          verdicts=[v.to_json() for v in verdicts], recommendation=choice,
                          gates=inputs.gates.to_json(), artifacts=artifacts, machine=machine,
                          packages=package_versions(), sensitivity=sensitivity, notes=notes)
    return record, write_report(record, inputs.out_dir)

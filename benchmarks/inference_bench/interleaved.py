"""Interleaved timing in one process: every round runs every variant once, so load drift hits all alike."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from inference_bench.prep import Variant


def interleaved(
    variants: list[Variant],
    clips: list[np.ndarray],
    points: list[tuple[int, float]],
    rounds: int,
    providers: list[str],
    threads: int | None,
) -> dict:
    """p50 of each variant with the runs interleaved (A B C, B C A, ...) in one process, and the ratio to FP32.

    The grid times variants one after another; on a shared machine the load drifts between them. Here
    every round runs every variant once, so a drift hits all of them alike and the ratios are robust.
    """
    from workbench.backends.onnxruntime import OnnxRuntimeRunner
    from workbench.evaluate.latency import make_batch
    from workbench.evaluate.transcribe import logits_of

    runners = {
        v.name: OnnxRuntimeRunner(
            Path(v.path), providers=providers, threads=threads, name=v.name, exact_int8=v.exact_int8
        )
        for v in variants
    }
    out: dict = {}
    try:
        for runner in runners.values():
            runner.activate()
        names = list(runners)
        for batch, seconds in points:
            feed = make_batch(clips, batch, seconds)
            for runner in runners.values():
                logits_of(runner, feed)
            times: dict[str, list[float]] = {n: [] for n in names}
            for i in range(rounds):
                for name in names[i % len(names) :] + names[: i % len(names)]:
                    logits_of(runners[name], feed)
                    times[name].append(runners[name].last_inference_time() * 1000.0)
            p50 = {n: float(np.median(t)) for n, t in times.items()}
            out[f"{seconds:g}s b{batch}"] = {
                "rounds": rounds,
                "p50_ms": p50,
                "x_fp32": {n: p50[n] / p50["fp32"] for n in names if "fp32" in p50},
            }
    finally:
        for runner in runners.values():
            runner.deactivate()
    return out

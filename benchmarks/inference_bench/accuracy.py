"""Accuracy of the benchmark's variants: on evaluation clips (CPU) logits vs FP32, CPU flavour vs its graph and
WER; on the timing clips (any provider, the GPU too) logits vs FP32's on the same provider and inf/NaN."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from inference_bench.prep import Variant


def accuracy_check(variants: list[Variant], eval_set: str, count: int, threads: int | None) -> dict:
    """Logits of each variant vs FP32 and each ``-cpu`` flavour vs its TensorRT-bound graph; WER per variant."""
    from workbench.backends.onnxruntime import OnnxRuntimeRunner
    from workbench.evaluate.transcribe import logits_of
    from workbench.evaluate.wer import corpus_wer, score_utterances
    from workbench.model.features import normalise_audio
    from workbench.model.vocab import decode_ids
    from workbench.speech.store import load_set, set_path

    if not set_path(eval_set).exists():
        return {"skipped": f"evaluation set {eval_set} not found (python -m workbench data build)"}
    speech_set = load_set(eval_set)
    utts = speech_set.utterances[:count]
    audio = [normalise_audio(speech_set.audio(u))[None] for u in utts]
    logits: dict[str, list[np.ndarray]] = {}
    for variant in variants:
        with OnnxRuntimeRunner(
            Path(variant.path), threads=threads, name=variant.name, exact_int8=variant.exact_int8
        ) as runner:
            logits[variant.name] = [logits_of(runner, x)[0] for x in audio]
    refs = [u.text for u in utts]
    ids = [u.id for u in utts]

    def compare(a: str, b: str) -> dict:
        diff = max(float(np.abs(x - y).max()) for x, y in zip(logits[a], logits[b]))
        agree = sum(int((x.argmax(-1) == y.argmax(-1)).sum()) for x, y in zip(logits[a], logits[b]))
        frames = sum(len(x) for x in logits[a])
        return {"max_abs_logit_diff": diff, "token_agreement": agree / frames}

    out: dict = {
        "set": speech_set.name,
        "set_hash": speech_set.content_hash,
        "clips": len(utts),
        "wer": {},
        "vs_fp32": {},
        "cpu_flavour_vs_tensorrt_bound": {},
    }
    for name, values in logits.items():
        hyps = [decode_ids(v.argmax(-1).tolist()) for v in values]
        out["wer"][name] = corpus_wer(score_utterances(ids, refs, hyps))
        if name != "fp32" and "fp32" in logits:
            out["vs_fp32"][name] = compare(name, "fp32")
        base = name.partition("-cpu")[0]
        if base != name and base in logits:  # int8-cpu, int8-cpu-s8, ... vs int8
            out["cpu_flavour_vs_tensorrt_bound"][name] = compare(name, base)
    return out


def logit_check(
    variants: list[Variant], clips: list[np.ndarray], providers: list[str], seconds: float = 4.0
) -> dict:
    """Each variant's logits on ``clips`` (cut to ``seconds``) against FP32's on the same provider."""
    from workbench.backends.onnxruntime import OnnxRuntimeRunner
    from workbench.evaluate.latency import make_batch
    from workbench.evaluate.transcribe import logits_of

    feed = make_batch(clips, len(clips), seconds)
    logits = {}
    for variant in variants:
        with OnnxRuntimeRunner(Path(variant.path), providers=providers, name=variant.name) as runner:
            logits[variant.name] = np.asarray(logits_of(runner, feed), np.float32)
    out = {}
    for name, value in logits.items():
        row = {"nonfinite": int(value.size - np.count_nonzero(np.isfinite(value)))}
        if "fp32" in logits and name != "fp32":
            ref = logits["fp32"]
            row["max_abs_logit_diff"] = float(np.nanmax(np.abs(value - ref)))
            row["token_agreement"] = float((value.argmax(-1) == ref.argmax(-1)).mean())
        out[name] = row
    return out

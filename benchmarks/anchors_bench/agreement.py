"""Judging the quantized models of a model with random weights: how far each stays from the FP32 model's own output.

A random-weight model (the base-size Wav2Vec2 of ``workbench.model.synthetic``) transcribes nothing, so its WER
is 100 % whatever the precision and says nothing. What it still allows: run the FP32 ONNX model and each quantized
one on the same clips (ONNX Runtime CPU, batch 1, the model's own feature preparation) and measure

- token agreement: the share of frames whose argmax token equals the FP32 model's;
- transcript agreement: the share of clips whose greedy CTC transcript equals the FP32 model's;
- logit error: max and mean |logit - FP32 logit|, the mean relative to the mean |FP32 logit|, and the mean cosine
  similarity of each clip's logits with FP32's.

``compare_logits`` is the pure part (lists of [frames, vocab] arrays); ``judge`` runs the models; ``agreement_rows``
and ``agreement_table`` join the numbers to the tools' calibration runs (a failed or skipped run keeps its row)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from anchors_bench.rows import run_row

WHY = (
    "random weights: every model's WER is 100 % (nothing is recognised), so each quantized model is judged by "
    "agreement with the FP32 model's own output on the same clips: argmax tokens per frame, greedy transcripts, "
    "and logit error"
)


PRECISION_NOTE = (
    "ONNX Runtime's default session options: with session.x64quantprecision (the workbench's exact "
    "U8S8 option on CPUs without VNNI) the session refused it: "
)


def compare_logits(
    reference: Sequence[np.ndarray], candidate: Sequence[np.ndarray], decode: Callable[[np.ndarray], str]
) -> dict[str, Any]:
    """Agreement of ``candidate``'s logits with ``reference``'s, clip by clip (each [frames, vocab])."""
    if len(reference) != len(candidate):
        raise ValueError(f"{len(reference)} reference clips but {len(candidate)} candidate clips")
    frames = same_tokens = same_texts = 0
    max_abs, abs_sum, ref_abs_sum, cosines = 0.0, 0.0, 0.0, []
    for ref, cand in zip(reference, candidate):
        ref, cand = np.asarray(ref, dtype=np.float64), np.asarray(cand, dtype=np.float64)
        if ref.shape != cand.shape:
            raise ValueError(f"logits of shape {cand.shape} against the reference's {ref.shape}")
        frames += ref.shape[0]
        same_tokens += int(np.sum(ref.argmax(-1) == cand.argmax(-1)))
        same_texts += decode(ref) == decode(cand)
        diff = np.abs(cand - ref)
        max_abs = max(max_abs, float(diff.max()))
        abs_sum += float(diff.sum())
        ref_abs_sum += float(np.abs(ref).sum())
        norms = float(np.linalg.norm(ref) * np.linalg.norm(cand))
        cosines.append(float(np.sum(ref * cand)) / norms if norms else float(np.array_equal(ref, cand)))
    values = sum(r.size for r in reference)
    return {
        "clips": len(reference),
        "frames": frames,
        "token_agreement_pct": round(100 * same_tokens / frames, 3) if frames else None,
        "transcript_agreement_pct": round(100 * same_texts / len(reference), 3) if len(reference) else None,
        "max_abs_logit_diff": round(max_abs, 5),
        "mean_abs_logit_diff": round(abs_sum / values, 6) if values else None,
        "mean_abs_diff_over_mean_abs_fp32": round(abs_sum / ref_abs_sum, 6) if ref_abs_sum else None,
        "mean_cosine": round(float(np.mean(cosines)), 6) if cosines else None,
    }


def run_logits(
    model: Path, inputs: Sequence[np.ndarray], exact_int8: bool = True
) -> tuple[list[np.ndarray], float]:
    """Each prepared clip's logits [frames, vocab] (float32) through ONNX Runtime CPU, batch 1; mean ms per clip."""
    from workbench.backends.onnxruntime import OnnxRuntimeRunner
    from workbench.evaluate.transcribe import logits_of

    out = []
    with OnnxRuntimeRunner(Path(model), exact_int8=exact_int8) as runner:
        start = time.perf_counter()
        for row in inputs:
            out.append(np.asarray(logits_of(runner, row[None, :])[0], dtype=np.float32))
    return out, round(1000 * (time.perf_counter() - start) / max(len(inputs), 1), 2)


def _error(exc: Exception) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[-300:]}"


def judge(
    fp32: Path,
    models: dict[str, Path],
    clips: Sequence[np.ndarray],
    description: Any,
    log: Callable[[str], None] = print,
) -> dict[str, dict[str, Any]]:
    """FP32 and every model of ``models`` on ``clips``; per name the agreement with FP32 (or the error it raised)
    and its mean ms per clip (ONNX Runtime CPU, indicative on a shared machine). Sessions get the workbench's
    options (as in its sign-off); a model whose session refuses the exact-U8S8 option is run again with ONNX
    Runtime's defaults, and its entry says so (``loaded_with``)."""
    from workbench.backends.cpu_int8 import u8s8_exact

    inputs = [description.prepare(np.asarray(c, dtype=np.float32)) for c in clips]
    reference, ms = run_logits(fp32, inputs)
    judged = {"fp32": {**compare_logits(reference, reference, description.decode), "ms_per_clip": ms}}
    for name, path in models.items():
        log(f"   [{name}] {len(inputs)} clips against FP32")
        try:
            logits, ms = run_logits(path, inputs)
            judged[name] = {**compare_logits(reference, logits, description.decode), "ms_per_clip": ms}
        except Exception as exc:  # a model ONNX Runtime cannot run or that gives other shapes is a result too
            judged[name] = {"error": _error(exc)}
            if not u8s8_exact()[0] and "Exception during initialization" in str(exc):
                try:  # the session had the workbench's exact-U8S8 option; run the model as ORT's defaults would
                    logits, ms = run_logits(path, inputs, exact_int8=False)
                    judged[name] = {
                        **compare_logits(reference, logits, description.decode),
                        "ms_per_clip": ms,
                        "loaded_with": PRECISION_NOTE + _error(exc),
                    }
                except Exception as again:
                    judged[name]["error_with_ort_defaults"] = _error(again)
    return judged


def agreement_rows(judged: dict[str, dict[str, Any]], runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per run (run order): the tool, setting, calibration wall and peak RSS, and its agreement with FP32,
    or why there is none (the run failed or was skipped, or the quantized model did not run)."""
    rows = []
    for run in runs:
        name = run["job"]
        row = run_row(run)
        found = judged.get(name)
        if "skipped" in run:
            row["status"] = "skipped: " + run["skipped"]
        elif "error" in run:
            row["status"] = "failed: " + str(run["error"])
        elif found is None:
            row["status"] = "failed: not judged (no ONNX written)"
        elif "error" in found:
            row["status"] = "failed to run: " + found["error"]
        else:
            row.update(status="judged", **found)
        rows.append(row)
    return rows


def agreement_table(rows: list[dict[str, Any]]) -> list[str]:
    """The base-model anchors table in Markdown (agreement with FP32, logit error, calibration cost)."""
    head = [
        "candidate",
        "tool",
        "token agr. %",
        "transcript agr. %",
        "max abs logit diff",
        "mean abs logit diff",
        "rel. mean abs",
        "cosine",
        "ms/clip",
        "calib s",
        "peak RSS MB",
    ]
    keys = [
        ("token_agreement_pct", ".2f"),
        ("transcript_agreement_pct", ".1f"),
        ("max_abs_logit_diff", ".4f"),
        ("mean_abs_logit_diff", ".5f"),
        ("mean_abs_diff_over_mean_abs_fp32", ".4f"),
        ("mean_cosine", ".5f"),
        ("ms_per_clip", ".1f"),
    ]
    num = lambda v, f: "-" if v is None else format(v, f)  # noqa: E731
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in rows:
        cost = [num(r.get("calibration_wall_s"), ".1f"), num(r.get("peak_rss_mb"), ".0f")]
        if r["status"] != "judged":
            cells = [r["candidate"], r["tool"], r["status"][:160]] + [""] * (len(keys) - 1) + cost
        else:
            name = r["candidate"] + (" (ORT default session options)" if r.get("loaded_with") else "")
            cells = [name, r["tool"]] + [num(r.get(k), f) for k, f in keys] + cost
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return lines

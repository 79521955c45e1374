"""The ``language-model`` step of a project whose sign-off estimates its beam search's language model from the demo's
training texts (``[signoff] training_lm``: the embedded demo preset).

The model is estimated from the training split of ``workbench.speech.text`` (texts are assigned to a split by a hash,
so none is an evaluation text; the step checks that against the evaluation set). ``start`` begins the estimate in a
worker process while the layer comparison leaves most of a core idle; ``run`` waits for it (or estimates it here).
Without flashlight-text the step says so and the sign-offs score their first decoder only.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any

from workbench.pipeline.steps import Context, StepOutput, print_lines

STEP = "language-model"
LM_SCHEME = "training-text-3gram/1"  # changes when the estimate does, so older models are not reused


def wanted(ctx: Context) -> bool:
    return ctx.project.signoff.training_lm


def available() -> bool:
    from workbench.optional import has_module

    return has_module("flashlight.lib.text.decoder.kenlm")


def path_of(ctx: Context) -> Path:
    return ctx.engines / f"{ctx.project.name}-lm.arpa"


def inputs(ctx: Context) -> dict[str, Any]:
    return {
        "scheme": LM_SCHEME,
        "sentences": ctx.project.signoff.training_lm_sentences,
        "eval": ctx.needs_sets().eval.content_hash,
        "available": available(),
        "path": str(path_of(ctx)),
    }


def start(ctx: Context) -> None:
    """Begin the estimate in a worker process (nothing when flashlight-text is missing)."""
    if available():
        ctx.background[STEP] = in_background(
            build_training_lm, path_of(ctx), ctx.project.signoff.training_lm_sentences
        )


def in_background(fn: Callable[..., Any], *args: Any) -> Future:
    """``fn(*args)`` (an importable function) in a fresh worker process that ends with this one: spawned, not
    forked, since this process has run ONNX Runtime's thread pools by then."""
    import multiprocessing
    import os

    from workbench.speech.workers import die_with_parent

    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(1, mp_context=context, initializer=die_with_parent, initargs=(os.getpid(),))
    future = pool.submit(fn, *args)
    pool.shutdown(wait=False)  # the worker ends after its one task
    return future


def build_training_lm(path: Path, limit: int | None) -> tuple[int, int, int]:
    """(order, sentences, words) of the training-text language model written to ``path`` (in a worker process)."""
    from workbench.evaluate.ngram import training_text_lm

    model = training_text_lm(path, limit=limit)
    return model.order, model.sentences, model.words


def run(ctx: Context) -> StepOutput:
    from workbench.evaluate.ngram import shared_texts, training_text_lm

    if not available():
        print_lines(
            [
                "note: beam search needs flashlight-text (./setup.sh installs it); the sign-off scores greedy "
                "decoding only"
            ]
        )
        return {"lm": None}, []
    path, limit = path_of(ctx), ctx.project.signoff.training_lm_sentences
    exclude = [u.text for u in ctx.needs_sets().eval.utterances]
    running = ctx.background.pop(STEP, None)
    built_aside = running.result() if running is not None else None  # waited for: it writes ``path``
    if built_aside is not None and not shared_texts(exclude, limit):  # (shared: never, by construction)
        order, sentences, words = built_aside
        print("language model estimated in the background during the layer comparison")
    else:
        model = training_text_lm(path, exclude, limit=limit)
        order, sentences, words = model.order, model.sentences, model.words
    print(
        f"language model: {path} ({order}-gram interpolated Kneser-Ney from {sentences} training "
        f"sentences, {words} words; none of them an evaluation text)"
    )
    return {"lm": str(path)}, [path]

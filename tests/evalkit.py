"""Helpers shared by test_evaluate.py and test_report.py: a constant-output CTC ONNX graph and a small
speech set written with the store's own writer (no TTS needed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from workbench.model.description import describe_vocabulary
from workbench.model.vocab import BLANK_ID, DEFAULT_VOCABULARY, VOCAB, encode_text
from workbench.speech.records import Clip, Utterance

#: The description of the hand-built graphs below: the default vocabulary, normalised input.
DEFAULT_MODEL = describe_vocabulary(DEFAULT_VOCABULARY, source="hand-built constant CTC graph")


def ctc_logits_for(text: str, vocab_size: int = len(VOCAB)) -> np.ndarray:
    """Logits [1, frames, vocab] whose greedy CTC decoding is ``text`` (blank between every label)."""
    ids: list[int] = []
    for label in encode_text(text):
        ids += [label, label, BLANK_ID]
    logits = np.full((1, len(ids), vocab_size), -5.0, dtype=np.float32)
    logits[0, np.arange(len(ids)), ids] = 5.0
    return logits


def constant_ctc_onnx(path: Path, text: str) -> Path:
    """An ONNX model ``input_values`` [batch, samples] -> ``logits`` that always decodes to ``text``.

    logits = C + 0 * mean(input) (broadcast over the batch), so the input is really consumed."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    const = ctc_logits_for(text)
    nodes = [
        helper.make_node("ReduceMean", ["input_values"], ["m"], axes=[1], keepdims=1),  # [B, 1]
        helper.make_node("Unsqueeze", ["m", "axes"], ["m3"]),  # [B, 1, 1]
        helper.make_node("Mul", ["m3", "zero"], ["z"]),
        helper.make_node("Add", ["z", "C"], ["logits"]),
    ]
    graph = helper.make_graph(
        nodes,
        "const_ctc",
        [helper.make_tensor_value_info("input_values", TensorProto.FLOAT, ["batch", "samples"])],
        [
            helper.make_tensor_value_info(
                "logits", TensorProto.FLOAT, ["batch", const.shape[1], const.shape[2]]
            )
        ],
        [
            numpy_helper.from_array(const, "C"),
            numpy_helper.from_array(np.zeros((), np.float32), "zero"),
            numpy_helper.from_array(np.array([2], np.int64), "axes"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return Path(path)


def write_small_set(
    root: Path, texts: list[str], speech_like, name: str = "unit-eval", speakers: int = 4, prefix: str = "spk"
):
    """A stored SpeechSet with one clip per text; conditions and ``speakers`` speakers (named ``prefix`` and a
    number) cycle deterministically."""
    from workbench.speech.store import write_set

    conditions = ("quiet", "noisy", "accented")
    clips = []
    for i, text in enumerate(texts):
        seconds = 1.2 if i % 2 == 0 else 2.0
        cond = conditions[i % 3]
        utt = Utterance(
            id=f"u{i:03d}",
            text=text,
            speaker=f"{prefix}{i % speakers}",
            voice=f"voice{i % speakers}",
            accent="us" if cond != "accented" else "gb",
            condition=cond,
            duration_s=seconds,
            source="unit",
            bucket="short" if seconds < 1.5 else "long",
        )
        clips.append(Clip(utt, speech_like(seconds, seed=i)))
    return write_set(Path(root) / name, clips, {"how": "unit test"}, [], {})

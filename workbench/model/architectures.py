"""The architectures the workbench supports, and the check of a ``config.json`` made before anything loads.

Each supported class is a CTC model of the Wav2Vec2 family: a convolutional feature encoder on raw 16 kHz
audio, a transformer (or conformer) encoder and a linear CTC head (``lm_head``). ``check_config`` reads
only the JSON: a model without a CTC head, another kind of model (Whisper, BERT, ...) or a config that
names no supported class is refused with one line that lists what is supported, before weights are read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workbench.errors import WorkbenchError


@dataclass(frozen=True)
class Architecture:
    """A supported transformers class: its ``model_type`` and the attribute holding the base model."""

    name: str
    model_type: str
    base: str  # the base model's attribute (prefix of module and ONNX node names)
    example: str  # a public checkpoint of this class


ARCHITECTURES: dict[str, Architecture] = {
    a.name: a
    for a in (
        Architecture("Wav2Vec2ForCTC", "wav2vec2", "wav2vec2", "facebook/wav2vec2-base-960h"),
        Architecture("HubertForCTC", "hubert", "hubert", "facebook/hubert-large-ls960-ft"),
        Architecture("WavLMForCTC", "wavlm", "wavlm", "patrickvonplaten/wavlm-libri-clean-100h-base-plus"),
        Architecture(
            "Data2VecAudioForCTC", "data2vec-audio", "data2vec_audio", "facebook/data2vec-audio-base-960h"
        ),
        Architecture(
            "Wav2Vec2ConformerForCTC",
            "wav2vec2-conformer",
            "wav2vec2_conformer",
            "facebook/wav2vec2-conformer-rel-pos-large-960h-ft",
        ),
    )
}
BY_MODEL_TYPE: dict[str, Architecture] = {a.model_type: a for a in ARCHITECTURES.values()}
BASE_PREFIXES: frozenset[str] = frozenset(a.base for a in ARCHITECTURES.values())
SUPPORTED = ", ".join(ARCHITECTURES)
CTC_HEAD = "lm_head.weight"


def unsupported(where: str, what: str) -> WorkbenchError:
    """The one-line refusal: what the model is, and what is supported."""
    return WorkbenchError(
        f"{where}: {what}; the workbench supports CTC speech models: {SUPPORTED} "
        "(a folder saved with save_pretrained, with config.json, weights and vocab.json)"
    )


def check_config(config: Any, where: str) -> Architecture:
    """The supported architecture a parsed ``config.json`` describes, or a user error naming what is supported."""
    if not isinstance(config, dict):
        raise unsupported(where, "config.json is not a JSON object")
    model_type = config.get("model_type")
    names = config.get("architectures")
    if names is not None and not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
        raise unsupported(where, "config.json's 'architectures' is not a list of class names")
    if names:
        found = [ARCHITECTURES[n] for n in names if n in ARCHITECTURES]
        if not found:
            kind = (
                "a CTC model of an unsupported class"
                if any(n.endswith("ForCTC") for n in names)
                else "not a CTC speech model (no CTC head)"
            )
            raise unsupported(where, f"{', '.join(names)} (model_type {model_type!r}) is {kind}")
        arch = found[0]
        if model_type != arch.model_type:
            raise unsupported(
                where,
                f"config.json names {arch.name} but its model_type is {model_type!r}, "
                f"not {arch.model_type!r}",
            )
        return arch
    if model_type in BY_MODEL_TYPE:  # no 'architectures': the weights must show the CTC head (checked later)
        return BY_MODEL_TYPE[model_type]
    raise unsupported(
        where, f"config.json names no architecture and its model_type {model_type!r} is not a supported one"
    )

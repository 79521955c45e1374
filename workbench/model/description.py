"""One description of the model a job works on, read once from its folder and carried by every artifact.

``describe_model(folder or hub id)`` reads ``config.json`` (architecture, checked before anything else is
read), the feature-extractor settings (``processor_config.json`` or ``preprocessor_config.json``: ``do_normalize``,
sampling rate, attention mask), the tokenizer files
(vocabulary, CTC blank = the config's ``pad_token_id``, word delimiter, special tokens) and the safetensors
headers (the CTC head exists and is as wide as the vocabulary); it loads no weights and writes nothing.
The ``ModelDescription`` then answers every model-specific question of the pipeline: how a clip becomes
``input_values`` (``prepare``), how logits become text (``decode``), how reference text is made comparable
(``normalise_text``) and in which unit errors are counted (``error_unit``: WER or CER).

The export writes the description into the ONNX file's metadata (``METADATA_KEY``), and every variant
made from that export keeps it, so a candidate ONNX file names the model it came from
(``description_of_onnx``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from workbench.errors import WorkbenchError
from workbench.model.architectures import CTC_HEAD, check_config, unsupported
from workbench.model.features import FeatureSettings, read_feature_settings
from workbench.model.folders import model_hash, resolve_folder, weight_shapes
from workbench.model.textnorm import TextNormaliser, check_error_unit
from workbench.model.vocab import Vocabulary, load_vocabulary

METADATA_KEY = "workbench.model"
FORMAT = "workbench-model/1"
#: config.json keys that decide the graph's structure, kept in the description for reports.
STRUCTURE_KEYS = (
    "feat_extract_norm",
    "do_stable_layer_norm",
    "conv_bias",
    "position_embeddings_type",
    "num_hidden_layers",
    "hidden_size",
    "num_attention_heads",
    "intermediate_size",
    "feat_proj_layer_norm",
    "num_buckets",
    "conv_depthwise_kernel_size",
    "num_conv_pos_embeddings",
)


@dataclass(frozen=True)
class ModelDescription:
    """Everything model-specific the pipeline needs, from one folder (or from an ONNX file's metadata)."""

    source: str  # what the user gave: a folder or a hub id
    model_hash: str
    architecture: str
    model_type: str
    vocabulary: Vocabulary
    features: FeatureSettings
    structure: dict[str, Any] = field(default_factory=dict)
    error_unit_override: str | None = None
    folder: Path | None = None  # None when known only from an ONNX file's metadata

    @cached_property
    def normaliser(self) -> TextNormaliser:
        return TextNormaliser.for_vocabulary(self.vocabulary)

    @property
    def error_unit(self) -> str:
        """``wer`` or ``cer``: the override when given, else what the vocabulary's script calls for."""
        return self.error_unit_override or self.normaliser.error_unit

    @property
    def error_unit_source(self) -> str:
        return "--error-unit" if self.error_unit_override else "the model's vocabulary"

    def with_error_unit(self, unit: str | None) -> ModelDescription:
        return replace(self, error_unit_override=check_error_unit(unit)) if unit else self

    def prepare(self, audio: np.ndarray) -> np.ndarray:
        """One 16 kHz clip -> the model's ``input_values`` row (normalised only when ``do_normalize``)."""
        return self.features.prepare(audio)

    def decode(self, logits: np.ndarray) -> str:
        """Greedy CTC transcript of one utterance's logits [frames, vocab], in the model's own alphabet."""
        return self.vocabulary.greedy(logits)

    def normalise_text(self, text: str) -> str:
        return self.normaliser(text)

    def summary(self) -> str:
        """One line for the CLI."""
        chars = len(self.vocabulary.characters)
        return (
            f"{self.architecture} ({self.model_type}), {self.vocabulary.size} tokens ({chars} characters, blank "
            f"id {self.vocabulary.blank_id}), do_normalize={self.features.do_normalize}, "
            f"error unit {self.error_unit.upper()} (from {self.error_unit_source})"
        )

    def to_json(self) -> dict[str, Any]:
        """Plain JSON: what goes into ONNX metadata and report provenance (the source folder as given)."""
        return {
            "format": FORMAT,
            "source": self.source,
            "model_hash": self.model_hash,
            "architecture": self.architecture,
            "model_type": self.model_type,
            "vocabulary": self.vocabulary.to_json(),
            "features": self.features.to_json(),
            "structure": dict(self.structure),
        }

    def same_model(self, other: ModelDescription) -> bool:
        """Same weights, vocabulary, features and structure (wherever each was loaded from)."""
        mine, theirs = self.to_json(), other.to_json()
        mine.pop("source")
        theirs.pop("source")
        return mine == theirs

    def record(self) -> dict[str, Any]:
        """What a report or artifact records about the model (no token table)."""
        return {
            "source": self.source,
            "model_hash": self.model_hash,
            "architecture": self.architecture,
            "model_type": self.model_type,
            "vocabulary_size": self.vocabulary.size,
            "blank_id": self.vocabulary.blank_id,
            "word_delimiter": self.vocabulary.word_delimiter,
            "do_normalize": self.features.do_normalize,
            "sampling_rate": self.features.sampling_rate,
            "return_attention_mask": self.features.return_attention_mask,
            "error_unit": self.error_unit,
            "error_unit_from": self.error_unit_source,
            "text_normalisation": self.normaliser.describe(),
            "structure": dict(self.structure),
        }

    @classmethod
    def from_json(cls, obj: Any, folder: Path | None = None) -> ModelDescription:
        if not isinstance(obj, dict) or obj.get("format") != FORMAT:
            raise WorkbenchError(f"not a workbench model description ({FORMAT})")
        try:
            return cls(
                str(obj["source"]),
                str(obj["model_hash"]),
                str(obj["architecture"]),
                str(obj["model_type"]),
                Vocabulary.from_json(obj["vocabulary"]),
                FeatureSettings.from_json(obj["features"]),
                dict(obj.get("structure") or {}),
                folder=folder,
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise WorkbenchError(
                f"damaged workbench model description ({type(exc).__name__}: {exc})"
            ) from exc


def _read_config(folder: Path, where: str) -> dict[str, Any]:
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise unsupported(where, f"config.json cannot be read ({exc})") from exc
    if not isinstance(config, dict):
        raise unsupported(where, "config.json is not a JSON object")
    return config


def _check_transformers_config(folder: Path, where: str, architecture: str) -> Any:
    """The config as transformers reads it (a config it cannot load is refused here, before weights)."""
    import transformers

    try:
        config = transformers.AutoConfig.from_pretrained(str(folder))
    except Exception as exc:  # ValueError (unknown model_type), KeyError, TypeError, OSError: all one message
        raise unsupported(
            where,
            f"transformers cannot load its config.json ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0][:160] if str(exc) else ''})",
        ) from exc
    expected = getattr(transformers, architecture).config_class
    if not isinstance(config, expected):
        raise unsupported(
            where, f"transformers reads its config.json as {type(config).__name__}, not {expected.__name__}"
        )
    return config


def _check_head(folder: Path, where: str, vocabulary: Vocabulary, vocab_size: int) -> None:
    shapes = weight_shapes(folder)
    if shapes is not None:
        head = shapes.get(CTC_HEAD)
        if head is None:
            raise unsupported(
                where,
                "the weights have no CTC head (lm_head.weight); this is a model without a "
                "head, e.g. Wav2Vec2Model",
            )
        vocab_size = head[0] if head else vocab_size
    if vocabulary.size > vocab_size:
        raise WorkbenchError(
            f"{where}: vocab.json has ids up to {vocabulary.size - 1} but the CTC head has "
            f"{vocab_size} outputs; the vocabulary belongs to another model (save this model's "
            "processor beside it)"
        )


def describe_model(name_or_path: str | Path, error_unit: str | None = None) -> ModelDescription:
    """The description of a model folder or hub id; refuses unsupported models before reading any weights."""
    check_error_unit(error_unit)
    folder = resolve_folder(name_or_path)
    return inspect_folder(folder, str(name_or_path), model_hash(folder), error_unit)


def inspect_folder(
    folder: Path, where: str, model_hash: str = "", error_unit: str | None = None
) -> ModelDescription:
    """Config, vocabulary, CTC head (safetensors header) and features of a local model folder, every check
    that refuses an unsupported model; no weights are read and, without ``model_hash``, nothing is hashed."""
    arch = check_config(_read_config(folder, where), where)
    config = _check_transformers_config(folder, where, arch.name)
    blank = getattr(config, "pad_token_id", None)
    vocabulary = load_vocabulary(folder, blank_id=blank if isinstance(blank, int) else None)
    _check_head(folder, where, vocabulary, int(getattr(config, "vocab_size", vocabulary.size)))
    features = read_feature_settings(folder)
    structure = {k: getattr(config, k) for k in STRUCTURE_KEYS if hasattr(config, k)}
    if arch.model_type == "data2vec-audio":
        structure["feat_extract_norm"] = "layer"  # Data2VecAudio's conv layers always use LayerNorm
    structure = {k: list(v) if isinstance(v, tuple) else v for k, v in structure.items()}
    return ModelDescription(
        where,
        model_hash,
        arch.name,
        arch.model_type,
        vocabulary,
        features,
        structure,
        check_error_unit(error_unit),
        folder,
    )


def describe_vocabulary(
    vocabulary: Vocabulary,
    features: FeatureSettings | None = None,
    source: str = "hand-built graph",
    architecture: str = "Wav2Vec2ForCTC",
) -> ModelDescription:
    """A description without a model folder, for graphs built by hand (tests): its hash is the vocabulary's."""
    from workbench.artifacts import sha256_bytes
    from workbench.model.architectures import ARCHITECTURES

    digest = sha256_bytes(json.dumps(vocabulary.to_json(), sort_keys=True).encode())
    return ModelDescription(
        source,
        f"vocabulary-{digest}",
        architecture,
        ARCHITECTURES[architecture].model_type,
        vocabulary,
        features or FeatureSettings(),
    )


def _varint(handle: Any) -> int:
    shift, value = 0, 0
    while True:
        byte = handle.read(1)
        if not byte:
            raise ValueError("truncated varint")
        value |= (byte[0] & 0x7F) << shift
        if byte[0] < 0x80:
            return value
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _fields(data: bytes) -> dict[int, list[bytes]]:
    """Length-delimited fields of a small protobuf message (a metadata entry)."""
    import io

    out: dict[int, list[bytes]] = {}
    handle = io.BytesIO(data)
    while handle.tell() < len(data):
        tag = _varint(handle)
        if tag & 7 != 2:
            raise ValueError("unexpected wire type in a metadata entry")
        out.setdefault(tag >> 3, []).append(handle.read(_varint(handle)))
    return out


def onnx_metadata(path: Path) -> dict[str, str]:
    """An ONNX file's ``metadata_props`` read from the protobuf wire format, skipping over the graph
    (a 1 GB model is not loaded to read a few kilobytes)."""
    props: dict[str, str] = {}
    size = Path(path).stat().st_size
    with open(path, "rb") as handle:
        while handle.tell() < size:
            tag = _varint(handle)
            field_number, wire = tag >> 3, tag & 7
            if wire == 0:
                _varint(handle)
            elif wire == 1:
                handle.seek(8, 1)
            elif wire == 5:
                handle.seek(4, 1)
            elif wire == 2:
                length = _varint(handle)
                if field_number == 14:  # ModelProto.metadata_props
                    entry = _fields(handle.read(length))
                    key, value = entry.get(1, [b""])[0], entry.get(2, [b""])[0]
                    props[key.decode("utf-8")] = value.decode("utf-8")
                else:
                    handle.seek(length, 1)
            else:
                raise ValueError(f"unexpected wire type {wire}")
            if handle.tell() > size:
                raise ValueError("truncated file")
    return props


def description_of_onnx(path: Path) -> ModelDescription | None:
    """The description an exported ONNX file (or a variant of it) carries; None when it has none."""
    try:
        props = onnx_metadata(Path(path))
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise WorkbenchError(
            f"{path} is not a readable ONNX model ({exc}); give an ONNX file written by "
            "python -m workbench calibrate, search or signoff"
        ) from exc
    if METADATA_KEY not in props:
        return None
    try:
        return ModelDescription.from_json(json.loads(props[METADATA_KEY]))
    except (ValueError, WorkbenchError) as exc:
        raise WorkbenchError(
            f"{path}: its model description is damaged ({exc}); export it again with "
            "python -m workbench calibrate"
        ) from exc


def set_metadata(model: Any, description: ModelDescription) -> None:
    """Write the description into an in-memory ONNX model's metadata (replacing an older one)."""
    kept = [(p.key, p.value) for p in model.metadata_props if p.key != METADATA_KEY]
    del model.metadata_props[:]
    for key, value in kept + [(METADATA_KEY, json.dumps(description.to_json(), sort_keys=True))]:
        prop = model.metadata_props.add()
        prop.key, prop.value = key, value

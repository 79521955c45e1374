"""A model's folder on disk: find it (local, or a hub id in the local Hugging Face cache), hash it, read its
weight names and shapes; nothing is loaded and nothing is written.

``resolve_folder`` turns what the user gave into a folder with a ``config.json``; ``weight_shapes`` reads
tensor names and shapes from safetensors headers without loading weights (so a checkpoint without a CTC
head is refused before a gigabyte is read); ``model_hash`` hashes every file that decides what the model
computes.
"""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path
from typing import Any

from workbench.artifacts import sha256_file
from workbench.errors import WorkbenchError

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
INDEX_FILES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
#: Files that decide what the model computes and how its output is read: all of them go into the hash.
DESCRIBING_FILES = (
    "config.json",
    "preprocessor_config.json",
    "processor_config.json",
    "vocab.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
)


HUB_ID = r"[\w.-]+(/[\w.-]+)?"


def looks_like_path(text: str) -> bool:
    return Path(text).is_absolute() or text.startswith((".", "~")) or text.count("/") > 1 or "\\" in text


def resolve_folder(name_or_path: str | Path) -> Path:
    """The local folder of a model: the folder given, or a hub id's snapshot in the local Hugging Face cache."""
    path = Path(name_or_path).expanduser()
    text = str(name_or_path)
    if path.exists():
        if not path.is_dir():
            raise WorkbenchError(
                f"{path} is a file; give the model's folder (saved with save_pretrained) or a "
                "Hugging Face hub id such as facebook/wav2vec2-base-960h"
            )
        if not (path / "config.json").is_file():
            raise WorkbenchError(f"{path} has no config.json; it is not a Hugging Face model folder")
        return path
    if looks_like_path(text) or not re.fullmatch(HUB_ID, text):
        raise WorkbenchError(
            f"model folder {path} does not exist (give a folder saved with save_pretrained "
            "or a Hugging Face hub id such as facebook/wav2vec2-base-960h)"
        )
    try:
        from huggingface_hub import snapshot_download

        folder = Path(snapshot_download(text, allow_patterns=["*.json", "*.safetensors", "*.bin", "*.txt"]))
    except Exception as exc:  # offline, unknown repository, gated model: all end in the same advice
        raise WorkbenchError(
            f"could not find hub id {text!r} locally or download it ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0][:160] if str(exc) else ''}). Offline, a hub id cannot be downloaded: "
            "pass a local folder saved with save_pretrained."
        ) from exc
    if not (folder / "config.json").is_file():
        raise WorkbenchError(f"hub id {text!r} has no config.json; it is not a Hugging Face model")
    return folder


def weight_files(folder: Path) -> list[Path]:
    """The weight files of a model folder (single file, or the shards an index names)."""
    for index in INDEX_FILES:
        if (folder / index).is_file():
            try:
                shards = sorted(
                    set(json.loads((folder / index).read_text(encoding="utf-8"))["weight_map"].values())
                )
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
                raise WorkbenchError(f"{folder / index} is not a readable weight index ({exc})") from exc
            missing = [s for s in shards if not (folder / s).is_file()]
            if missing:
                raise WorkbenchError(f"{folder}: weight shard {missing[0]} named by {index} is missing")
            return [folder / s for s in shards]
    return [folder / name for name in WEIGHT_FILES if (folder / name).is_file()][:1]


def _safetensors_header(path: Path) -> dict[str, Any]:
    """The header of a safetensors file, checked against the file: every tensor's ``data_offsets`` must lie
    inside the data that follows the header (a truncated or damaged file is refused before anything loads)."""
    try:
        with open(path, "rb") as handle:
            (size,) = struct.unpack("<Q", handle.read(8))
            if size > 100_000_000:
                raise ValueError("header larger than 100 MB")
            header = json.loads(handle.read(size))
        data_bytes = path.stat().st_size - 8 - size
    except (OSError, ValueError, struct.error) as exc:
        raise WorkbenchError(
            f"{path} is not a readable safetensors file ({exc}); save the model again"
        ) from exc
    if not isinstance(header, dict):
        raise WorkbenchError(f"{path} is not a readable safetensors file (header is not an object)")
    for name, info in header.items():
        if name == "__metadata__":
            continue
        offsets = info.get("data_offsets") if isinstance(info, dict) else None
        if not (
            isinstance(offsets, list)
            and len(offsets) == 2
            and all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)
            and 0 <= offsets[0] <= offsets[1] <= data_bytes
        ):
            raise WorkbenchError(
                f"{path}: tensor {name}'s data ({offsets}) runs past the end of the file's {max(data_bytes, 0)} "
                "data bytes: the file is truncated or damaged; copy it again or save the model again"
            )
    return header


def weight_shapes(folder: Path) -> dict[str, list[int]] | None:
    """Tensor name -> shape from safetensors headers; None when the weights are PyTorch pickles (not read here)."""
    files = weight_files(folder)
    if not files:
        raise WorkbenchError(
            f"{folder} has no weights ({' or '.join(WEIGHT_FILES)}); save the model with "
            "model.save_pretrained(folder)"
        )
    if not all(f.suffix == ".safetensors" for f in files):
        return None
    shapes: dict[str, list[int]] = {}
    for path in files:
        for name, info in _safetensors_header(path).items():
            if name != "__metadata__" and isinstance(info, dict):
                shapes[name] = [int(d) for d in info.get("shape", [])]
    return shapes


def model_hash(name_or_path: str | Path) -> str:
    """Content hash of a model: weights (every shard), config, preprocessor and tokenizer files."""
    import hashlib

    folder = resolve_folder(name_or_path)
    digest = hashlib.sha256()
    for path in [folder / n for n in DESCRIBING_FILES if (folder / n).is_file()] + weight_files(folder):
        digest.update(path.name.encode() + sha256_file(path).encode())
    return digest.hexdigest()


def artifact_folder_name(mhash: str) -> str:
    """The folder under ``engines/`` for a model hash: 12 hex digits, or a file-name-safe hub id."""
    if mhash.startswith("hub:"):
        return "hub-" + re.sub(r"[^A-Za-z0-9._-]+", "-", mhash[4:])
    return mhash[:12]

"""Load any Hugging Face ``Wav2Vec2ForCTC`` from a local folder or a hub id, with clear errors."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from workbench.artifacts import sha256_file
from workbench.errors import WorkbenchError


def check_model_source(name_or_path: str | Path) -> None:
    """Refuse, before anything is loaded, a model path that does not exist or a folder without config.json."""
    path = Path(name_or_path)
    text = str(name_or_path)
    looks_like_path = path.is_absolute() or text.startswith((".", "~")) or text.count("/") > 1
    if not path.exists() and looks_like_path:
        raise WorkbenchError(f"model folder {path} does not exist (give a folder saved with save_pretrained "
                             "or a Hugging Face hub id such as facebook/wav2vec2-base-960h)")
    if path.is_dir() and not (path / "config.json").is_file():
        raise WorkbenchError(f"{path} has no config.json; it is not a Hugging Face model folder")


def load_model(name_or_path: str | Path) -> Any:
    """The model in eval mode, float32 on CPU."""
    from transformers import Wav2Vec2ForCTC

    path = Path(name_or_path)
    check_model_source(name_or_path)
    try:
        model = Wav2Vec2ForCTC.from_pretrained(str(name_or_path))
    except (OSError, ValueError) as exc:
        where = f"folder {path}" if path.exists() else f"hub id {name_or_path!r}"
        raise WorkbenchError(
            f"could not load a Wav2Vec2ForCTC from {where}: {str(exc).splitlines()[0][:200]}. "
            "Offline, a hub id cannot be downloaded: pass a local folder saved with save_pretrained."
        ) from exc
    return model.eval().float()


def artifact_folder_name(mhash: str) -> str:
    """The folder under ``engines/`` for a model hash: 12 hex digits, or a file-name-safe hub id."""
    if mhash.startswith("hub:"):
        return "hub-" + re.sub(r"[^A-Za-z0-9._-]+", "-", mhash[4:])
    return mhash[:12]


def model_hash(name_or_path: str | Path) -> str:
    """Content hash of a local model's weights and config (the hub id itself when not local)."""
    path = Path(name_or_path)
    if not path.is_dir():
        return f"hub:{name_or_path}"
    import hashlib

    digest = hashlib.sha256()
    for name in ("config.json", "model.safetensors", "pytorch_model.bin"):
        if (path / name).exists():
            digest.update(name.encode() + sha256_file(path / name).encode())
    return digest.hexdigest()

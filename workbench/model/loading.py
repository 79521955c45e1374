"""Check a model source and load the model; nothing here writes anything.

``check_model_source`` refuses a missing or unsupported model before anything is loaded (the folder found by
``workbench.model.folders``, described by ``workbench.model.description``); ``load_model`` loads the
architecture the description names, in eval mode, float32 on CPU, and refuses a model whose CTC head
would be randomly initialised.
"""

from __future__ import annotations

import pickle
import re
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.model.description import ModelDescription, describe_model, inspect_folder
from workbench.model.folders import HUB_ID, looks_like_path, resolve_folder
from workbench.quiet import transformers_quiet


def check_model_source(name_or_path: str | Path) -> None:
    """Refuse, before anything is loaded or written, a model folder that is missing or not a supported CTC model
    (config, vocabulary and CTC head checked; no weights read, nothing hashed). A hub id that is not a local
    folder is checked when it is fetched."""
    path = Path(name_or_path).expanduser()
    if (
        not path.exists()
        and not looks_like_path(str(name_or_path))
        and re.fullmatch(HUB_ID, str(name_or_path))
    ):
        return
    inspect_folder(resolve_folder(name_or_path), str(name_or_path))


def load_model(model: ModelDescription | str | Path) -> Any:
    """The model in eval mode, float32 on CPU; refused when its CTC head would be randomly initialised."""
    import transformers

    description = model if isinstance(model, ModelDescription) else describe_model(model)
    if description.folder is None:
        raise WorkbenchError(
            f"the model {description.source} is known only from an ONNX file's metadata; give "
            "its folder (--model) to load it"
        )
    cls = getattr(transformers, description.architecture)
    transformers_quiet()  # no "Loading weights" bar, no advisory warnings: the workbench says what matters
    try:
        loaded, info = cls.from_pretrained(str(description.folder), output_loading_info=True)
    except (OSError, ValueError, RuntimeError, KeyError, TypeError, EOFError, pickle.UnpicklingError) as exc:
        raise WorkbenchError(
            f"could not load a {description.architecture} from {description.folder}: "
            f"{str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__}"
            " (save it again with model.save_pretrained(folder))"
        ) from exc
    missing = [k for k in (info or {}).get("missing_keys", []) if k.startswith("lm_head")]
    if missing:
        from workbench.model.architectures import unsupported

        raise unsupported(
            str(description.source),
            f"the weights have no CTC head ({', '.join(missing)} missing; it would be randomly initialised)",
        )
    return loaded.eval().float()

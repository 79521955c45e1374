"""The finished search that belongs to an FP32 export and calibration cache, for the sign-off to include.

``matching_search`` looks at ``<engines>/<model hash>/compare/search-*.json`` (beside the FP32 model) and
returns the newest one whose provenance names this FP32 ONNX, this cache and its accuracy-recovery options, whose found plan's ONNX
still has the recorded hash, and whose dev set is not the evaluation set (a plan selected on the
evaluation set must not be judged on it).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from workbench.artifact_paths import inside
from workbench.artifacts import read_json_artifact, sha256_file
from workbench.calibration import cache as cache_mod
from workbench.errors import WorkbenchError
from workbench.search.outputs import SEARCH_FORMAT


@dataclass(frozen=True)
class FoundSearch:
    """A finished search's record, its found plan's ONNX, name and INT8 share, and its sensitivity file if intact."""

    search: Path
    onnx: Path
    name: str
    int8_share: float
    sensitivity: Path | None


def matching_search(fp32_onnx: Path, cache_path: Path, eval_hash: str | None = None) -> FoundSearch | None:
    """The newest matching search with a found plan, or None."""
    folder = Path(fp32_onnx).parent / "compare"
    if not folder.is_dir():
        return None
    fp32_hash = sha256_file(fp32_onnx)
    cache = cache_mod.load(Path(cache_path))
    cache_hash, recovery = cache.content_hash, cache.keys.get("recovery")
    best: tuple[str, FoundSearch] | None = None
    for path in folder.glob("search-*.json"):
        try:
            data = read_json_artifact(path, SEARCH_FORMAT, "skipped")
        except WorkbenchError:  # unreadable, bad JSON, not UTF-8 or another format: not a search to offer
            continue
        if not data.get("found"):
            continue
        prov, found = data.get("provenance", {}), data["found"]
        if not isinstance(prov, dict) or not isinstance(found, dict):
            continue
        if prov.get("fp32_onnx") != fp32_hash or prov.get("cache") != cache_hash:
            continue
        if (
            prov.get("recovery") != recovery
        ):  # bias correction leaves the scales (and so the cache hash) as they are
            continue
        if eval_hash is not None and prov.get("dev_set") == eval_hash:
            continue
        # paths a search file names are read only inside this model's folder (never elsewhere on its say-so)
        onnx_path = (
            inside(found["onnx_path"], folder.parent) if isinstance(found.get("onnx_path"), str) else None
        )
        if onnx_path is None or not onnx_path.is_file() or sha256_file(onnx_path) != found.get("onnx_sha256"):
            continue
        named = data.get("sensitivity_path")
        sens = inside(named, folder.parent) if isinstance(named, str) and named else None
        if sens is not None and (not sens.is_file() or sha256_file(sens) != prov.get("sensitivity")):
            sens = None
        item = FoundSearch(path, onnx_path, found["name"], float(found["int8_share"]), sens)
        if best is None or str(data.get("created")) > best[0]:
            best = (str(data.get("created")), item)
    return best[1] if best else None

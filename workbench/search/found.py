"""The finished search that belongs to an FP32 export and calibration cache, for the sign-off to include.

``matching_searches`` looks at ``<engines>/<model hash>/compare/search-*.json`` (beside the FP32 model) for the
searches whose provenance names this FP32 ONNX, this cache and its accuracy-recovery options, whose found plan's
ONNX still has the recorded hash, and whose dev set is not the evaluation set (a plan selected on the evaluation
set must not be judged on it). ``chosen_search`` is what the sign-off takes: the search it was given, else the
only match; several matches are refused with their names, never settled by age.
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
    """A finished search's record, its found plan's ONNX, name and INT8 share, its sensitivity file if intact, when
    it was made and the dev set it selected on."""

    search: Path
    onnx: Path
    name: str
    int8_share: float
    sensitivity: Path | None
    created: str = ""
    dev_name: str = ""
    dev_hash: str = ""

    def line(self) -> str:
        """One line for the record and for a refusal that names the choices."""
        return (
            f"{self.search} ({self.created}; dev set {self.dev_name or '?'} {self.dev_hash[:12]}; plan {self.name}, "
            f"{self.int8_share * 100:.1f}% INT8)"
        )


def matching_searches(fp32_onnx: Path, cache_path: Path, eval_hash: str | None = None) -> list[FoundSearch]:
    """Every matching search with an intact found plan, newest first."""
    folder = Path(fp32_onnx).parent / "compare"
    if not folder.is_dir():
        return []
    fp32_hash = sha256_file(fp32_onnx)
    cache = cache_mod.load(Path(cache_path))
    cache_hash, recovery = cache.content_hash, cache.keys.get("recovery")
    found_all: list[FoundSearch] = []
    for path in sorted(folder.glob("search-*.json")):
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
        dev_entry = data.get("dev_set")
        dev: dict = dev_entry if isinstance(dev_entry, dict) else {}
        found_all.append(
            FoundSearch(
                path,
                onnx_path,
                found["name"],
                float(found["int8_share"]),
                sens,
                str(data.get("created")),
                str(dev.get("name", "")),
                str(prov.get("dev_set", "")),
            )
        )
    return sorted(found_all, key=lambda f: f.created, reverse=True)


def matching_search(fp32_onnx: Path, cache_path: Path, eval_hash: str | None = None) -> FoundSearch | None:
    """The newest matching search with a found plan, or None."""
    found = matching_searches(fp32_onnx, cache_path, eval_hash)
    return found[0] if found else None


def chosen_search(
    fp32_onnx: Path, cache_path: Path, eval_hash: str | None, given: Path | None
) -> FoundSearch | None:
    """The search whose plan the sign-off includes: ``given`` (``--search RECORD``), which must match this export,
    cache and recovery and not have selected on the evaluation set; without it the one matching search, None when
    there is none, and a refusal naming them when there are several (the newest is not taken silently)."""
    found = matching_searches(fp32_onnx, cache_path, eval_hash)
    if given is not None:
        wanted = Path(given).resolve()
        for item in found:
            if item.search.resolve() == wanted:
                return item
        if not Path(given).is_file():
            raise WorkbenchError(f"--search {given}: no such search record")
        raise WorkbenchError(
            f"--search {given} is not a finished search of this export, calibration cache and recovery options "
            f"with an intact found plan, or it selected on the evaluation set; "
            + (
                "the matching searches: " + "; ".join(f.line() for f in found)
                if found
                else "no search matches them (give the --method and recovery options the search was made with)"
            )
        )
    if len(found) > 1:
        raise WorkbenchError(
            f"{len(found)} searches match this export and calibration cache: "
            + "; ".join(f.line() for f in found)
            + "; give --search RECORD to say which plan to sign off (or --no-search to leave the mixed plan out)"
        )
    return found[0] if found else None

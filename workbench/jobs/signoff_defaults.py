"""What a sign-off that builds its own candidates assumes when an option is left out, checked against the workspace.

The model: without ``--model`` the embedded demo model is signed off (calibrated, compared, searched: the other
verbs ask the same), refused when the workspace's artifacts come from other models (``check_default_model``). The calibration recipe (method + accuracy-recovery options): given
none, the default recipe would make a new calibration beside the caches and searches already there, and the report
would leave their plan out without a word; ``check_recipe`` refuses that and names the recipes found, and
``recipe_of_search`` lets a sign-off given ``--search RECORD`` take that search's recipe instead of the flags.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.artifacts import read_json_artifact
from workbench.calibration import cache as cache_mod
from workbench.calibration.recovery import RecoveryOptions
from workbench.errors import WorkbenchError
from workbench.jobs.calibrate import FP32_NAME
from workbench.jobs.prepare import describe_recovery, recovery_of
from workbench.model.description import description_of_onnx
from workbench.model.folders import artifact_folder_name
from workbench.resources import demo_model_dir
from workbench.search.outputs import SEARCH_FORMAT


@dataclass(frozen=True)
class Recipe:
    """A calibration method and the recovery keys of a cache (``RecoveryOptions.params()['recovery']``; None: none)."""

    method: str
    recovery: dict[str, Any] | None = None

    @classmethod
    def asked(cls, method: str, options: RecoveryOptions | None) -> Recipe:
        return cls(method, (options or RecoveryOptions()).params().get("recovery"))

    def options(self) -> RecoveryOptions:
        return recovery_of(self.recovery) or RecoveryOptions()

    def words(self) -> str:
        """The recipe as the verbs' options spell it (``--method percentile --bias-correction --clip-search``)."""
        options = recovery_of(self.recovery)
        extra = describe_recovery(options) if options is not None and options.active else ""
        return f"--method {self.method}" + (f" {extra}" if extra else " (no accuracy recovery)")


@dataclass(frozen=True)
class Made:
    """An existing cache or search and the recipe it was made with."""

    kind: str  # "cache" or "search"
    path: Path
    recipe: Recipe

    def line(self) -> str:
        return f"{self.kind} {self.path.name}: {self.recipe.words()}"


def caches_of(model_folder: Path, calib_hash: str) -> list[tuple[Path, str, Recipe]]:
    """The readable caches of this calibration set in the model's folder: path, content hash, recipe."""
    out = []
    for path in sorted(Path(model_folder).glob(f"calib-{calib_hash[:12]}-*.cache")):
        try:
            cache = cache_mod.load(path)
        except WorkbenchError:
            continue
        if cache.keys.get("calibration_set") != calib_hash or "statistics_backend" in cache.keys:
            continue
        out.append(
            (path, cache.content_hash, Recipe(str(cache.keys.get("method")), cache.keys.get("recovery")))
        )
    return out


def made_on(model_folder: Path, calib_hash: str, eval_hash: str | None = None) -> list[Made]:
    """The caches and the searches with a found plan (not selected on ``eval_hash``) made on this calibration set."""
    caches = caches_of(model_folder, calib_hash)
    by_hash = {content: recipe for _, content, recipe in caches}
    made = [Made("cache", path, recipe) for path, _, recipe in caches]
    for path in sorted((Path(model_folder) / "compare").glob("search-*.json")):
        try:
            data = read_json_artifact(path, SEARCH_FORMAT, "skipped")
        except WorkbenchError:
            continue
        prov = data.get("provenance")
        if not data.get("found") or not isinstance(prov, dict) or prov.get("calibration_set") != calib_hash:
            continue
        if eval_hash is not None and prov.get("dev_set") == eval_hash:
            continue
        recipe = by_hash.get(str(prov.get("cache")))
        if recipe is not None:
            made.append(Made("search", path, recipe))
    return made


def recipe_of_search(search: Path, model_folder: Path, calib_hash: str) -> Recipe:
    """The recipe of the search record ``search`` (``--search``), found through its cache in the model's folder."""
    if not Path(search).is_file():
        raise WorkbenchError(f"--search {search}: no such search record")
    data = read_json_artifact(
        Path(search), SEARCH_FORMAT, "give a search-*.json written by python -m workbench search"
    )
    entry = data.get("provenance")
    prov: dict[str, Any] = entry if isinstance(entry, dict) else {}
    for _, content, recipe in caches_of(model_folder, calib_hash):
        if content == prov.get("cache"):
            return recipe
    raise WorkbenchError(
        f"--search {search} was not made with a calibration cache of this model on this calibration set "
        f"(its calibration set {str(prov.get('calibration_set'))[:12]}); give the --model and --calib-set it was "
        "searched with"
    )


def check_recipe(asked: Recipe, given: bool, made: list[Made]) -> str | None:
    """Refuse a default recipe (``given`` False: no --method or recovery option) when caches or searches of this model
    and calibration set exist and none was made with it, naming them; given recipes pass, with a note (returned) when
    searches of other recipes are left out."""
    if not made or any(m.recipe == asked for m in made):
        return None
    listing = "; ".join(m.line() for m in made)
    if not given:
        raise WorkbenchError(
            f"no --method or recovery option: the default recipe ({asked.words()}) would calibrate anew, while this "
            f"model's calibration and searches on this set were made with other recipes: {listing}; give --search "
            "RECORD (its recipe is taken) or that recipe's options"
        )
    searches = [m for m in made if m.kind == "search"]
    if not searches:
        return None
    return f"no search was made with {asked.words()}; searches of other recipes left out: " + "; ".join(
        m.line() for m in searches
    )


def check_default_model(
    engines: Path, demo_hash: str | None = None, cache: Path | None = None, done: str = "signed off"
) -> str:
    """A verb given no ``--model`` (a sign-off: and no candidates) would work on the embedded demo model (hash
    ``demo_hash``, None: computed): refused when the workspace's artifacts (or ``cache``) come from other models,
    naming them; otherwise the line that says so. ``done``: what the verb does to the model ("signed off",
    "calibrated", "compared", "searched")."""
    if demo_hash is None:
        from workbench.model.description import describe_model

        demo_hash = describe_model(demo_model_dir()).model_hash
    others: dict[str, str] = {}
    for fp32 in sorted(Path(engines).glob(f"*/{FP32_NAME}")):
        if fp32.parent.name == artifact_folder_name(demo_hash):
            continue
        described = description_of_onnx(fp32)
        if described is not None and described.model_hash != demo_hash:
            others[described.model_hash] = str(described.source)
    if cache is not None:
        made_from = cache_mod.load(Path(cache)).keys.get("model")
        if isinstance(made_from, str) and made_from != demo_hash:
            others.setdefault(made_from, f"the model of --cache {cache}")
    if others:
        listing = "; ".join(f"{source} ({mhash[:12]})" for mhash, source in others.items())
        raise WorkbenchError(
            f"no --model: the embedded demo model would be {done}, but this workspace holds artifacts of other "
            f"models: {listing}; give --model FOLDER (the demo model is --model {demo_model_dir()})"
        )
    return f"no --model: the embedded demo model ({demo_hash[:12]}) is {done}"


def resolve_recipe(
    asked: Recipe,
    given: bool,
    search: Path | None,
    model_folder: Path,
    calib_hash: str,
    eval_hash: str,
) -> tuple[Recipe, list[str]]:
    """The recipe a sign-off builds its candidates with and the lines that say how it was chosen: ``--search``'s
    own (a different recipe given beside it is refused), else ``asked`` checked by ``check_recipe``."""
    if search is not None:
        found = recipe_of_search(search, model_folder, calib_hash)
        if given and found != asked:
            raise WorkbenchError(
                f"--search {search} was made with {found.words()}, not {asked.words()}: drop the method and "
                "recovery options to take the search's, or give a search made with them"
            )
        return found, [f"calibration recipe of the search {Path(search).name}: {found.words()}"]
    note = check_recipe(asked, given, made_on(model_folder, calib_hash, eval_hash))
    lines = [] if given else [f"no --method or recovery option: the default recipe {asked.words()}"]
    return asked, lines + ([note] if note else [])

"""``workbench.toml``, read and checked: typed, frozen settings of one project, or one ``error:`` line.

Every table and key is known (an unknown key, a value of the wrong type or range, and a model, data source or set
that is not there are each one ``BadInput`` naming the file, the key and the fix); paths are relative to the file's
folder. What is left out takes the defaults of ``workbench.config`` (the calibration recipe: ``DEFAULT_METHOD`` and
``DEFAULT_RECOVERY``). ``Project.to_json`` is what the pipeline hashes. A few fields have no key in the file (``PRESET_ONLY``): the embedded
demo preset (``workbench.project.demo``) sets them, synthetic speech and the language model of the demo's training
texts, which describe the demo model's world and no other.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import tomllib

from workbench.config import (
    BACKENDS,
    DEFAULT_BACKEND,
    DEFAULT_METHOD,
    DEFAULT_PERCENTILE,
    DEFAULT_RECOVERY,
    EVIDENCE,
    LAYOUTS,
    OUTSIDE_PROFILE_DEFAULT,
    OUTSIDE_PROFILE_POLICIES,
    SEARCH,
    RecoveryDefaults,
    SetBuildConfig,
)
from workbench.evaluate.gates import GateConfig
from workbench.inputs import shape
from workbench.inputs.gates import check_gate_values
from workbench.inputs.problem import Where
from workbench.inputs.read import decode_utf8, read_bytes

FILE_NAME = "workbench.toml"
FIX = "fix workbench.toml (python -m workbench init writes a commented starter)"
SPLITS: tuple[str, ...] = ("speaker", "given")
RECOVERY_NAMES: dict[str, str] = {
    "bias-correction": "bias_correction",
    "clip-search": "clip_search",
    "refine-ranges": "refine_ranges",
    "shift-scale": "shift_scale",
}
METHOD_NAMES: tuple[str, ...] = ("entropy", "max", "percentile", "mse")
# fields the embedded demo preset sets and a project file cannot (no key: an unknown-key error)
PRESET_ONLY: frozenset[str] = frozenset({"synthetic", "training_lm", "training_lm_sentences"})


def file_keys(kind: Any) -> list[str]:
    """The keys a project file's table for ``kind`` takes: its fields but the preset's own."""
    return [f.name for f in fields(kind) if f.name not in PRESET_ONLY]


@dataclass(frozen=True)
class DataSpec:
    """Where the speech comes from: one source split by speaker (texts kept apart), or given stored sets; the demo
    preset's ``split = "synthetic"`` builds its sets from synthetic speech (``synthetic``, ``data build``'s settings)."""

    split: str = "speaker"
    source: Path | None = None  # split = "speaker": a manifest, audio folder or corpus root
    layout: str | None = None  # its layout (workbench.config.LAYOUTS)
    calibration: str | None = None  # split = "given": stored set names under calib_sets/ or set folders
    dev: str | None = None
    evaluation: str | None = None
    unlabelled: tuple[str, ...] = ()  # sets without transcripts, for the label-free sign-off
    synthetic: SetBuildConfig | None = None  # split = "synthetic" (the demo preset only)


@dataclass(frozen=True)
class RecipeSpec:
    """The calibration recipe: method (and its percentile) and accuracy-recovery techniques."""

    method: str = DEFAULT_METHOD
    percentile: float = DEFAULT_PERCENTILE
    recovery: RecoveryDefaults = DEFAULT_RECOVERY


@dataclass(frozen=True)
class SearchSpec:
    """The mixed-precision search (its WER budget is the project's gates)."""

    enabled: bool = True
    per_condition: int = 2  # clips per condition of the sensitivity ranking
    dev_per_condition: int | None = None
    refine: int = 0
    finer: int = 0
    resamples: int = 1000
    confidence: float = SEARCH.confidence


@dataclass(frozen=True)
class TargetSpec:
    """One deployment target: where the candidate runs, where it is measured, and its clip-length profile."""

    name: str = "tensorrt"
    backend: str = DEFAULT_BACKEND
    latency: bool = False
    latency_batch_sizes: tuple[int, ...] = (1, 8, 32)  # timed batch sizes (with latency = true)
    latency_repeats: int = 10
    latency_warmup: int = 2
    latency_budget_s: float | None = None  # a point that would take longer gets fewer rounds, never below:
    latency_min_repeats: int = 3
    decoder: str | None = None  # this target's decoders (None: [signoff] decoder)
    report: str | None = None  # the report folder under reports/ (None: <project>-signoff-<target>)
    as_given: bool = False
    min_seconds: float | None = None  # deployment profile (default: the calibration set's)
    max_seconds: float | None = None
    outside_profile: str = OUTSIDE_PROFILE_DEFAULT


@dataclass(frozen=True)
class SignoffSpec:
    resamples: int = 2000
    seed: int = 0
    overflow_clips: int | None = None
    decoder: str = "greedy"  # comma separated: the first judges, the others are scored beside it
    min_speakers: int = EVIDENCE.min_speakers  # the least evidence a PASS needs per judged group
    min_reference_words: int = EVIDENCE.min_reference_words
    beam_width: int | None = None
    lm: Path | None = None
    also_limit: int | None = (
        None  # the decoders after the first score this many utterances spread over the set
    )
    # the demo preset: the language model estimated from the demo's training texts (a step of its own; None: all)
    training_lm: bool = False
    training_lm_sentences: int | None = None


@dataclass(frozen=True)
class Project:
    path: Path
    name: str
    model: str  # a model folder, or "demo" (the embedded model)
    data: DataSpec
    recipe: RecipeSpec = field(default_factory=RecipeSpec)
    search: SearchSpec = field(default_factory=SearchSpec)
    gates: GateConfig = field(default_factory=GateConfig)
    targets: tuple[TargetSpec, ...] = (TargetSpec(),)
    signoff: SignoffSpec = field(default_factory=SignoffSpec)
    preset: str | None = None  # an embedded preset's name (no file at ``path``)

    @property
    def root(self) -> Path:
        return self.path.parent

    @property
    def origin(self) -> str:
        """The project file, or the embedded preset, as the output and the records name it."""
        return f"the embedded {self.preset} preset" if self.preset else str(self.path)

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k not in ("path", "preset")}


TABLES = ("project", "model", "data", "calibration", "search", "gates", "target", "signoff")


def load_project(path: Path) -> Project:
    """Read and check ``path`` (``workbench.toml``)."""
    path = Path(path)
    where = Where(f"project file {path}", FIX)
    if not path.is_file():
        raise where.fixing("write one with python -m workbench init --model DIR --data PATH").fail(
            "not found"
        )
    try:
        data = tomllib.loads(decode_utf8(read_bytes(path, where), where))
    except tomllib.TOMLDecodeError as exc:
        raise where.fail(f"not valid TOML ({exc})") from exc
    shape.only_keys(data, TABLES, where)
    root = path.parent
    head = _table(data, "project", where, ("name",))
    name = shape.string(head.get("name", root.resolve().name or "project"), where.key("project").key("name"))
    if not name.replace("-", "").replace("_", "").isalnum():
        raise (
            where.key("project").key("name").fail(f"may hold only letters, digits, '-' and '_', not {name!r}")
        )
    model_table = _table(data, "model", where, ("path",))
    if "path" not in model_table:
        raise where.key("model").fail('needs path = "<model folder>" (or "demo" for the embedded model)')
    model = shape.string(model_table["path"], where.key("model").key("path"))
    if model != "demo":
        folder = (root / model).resolve()
        if not folder.is_dir():
            raise where.key("model").key("path").fail(f"{folder} is not a model folder")
        model = str(folder)
    project = Project(
        path=path.resolve(),
        name=name,
        model=model,
        data=_data(_table(data, "data", where, file_keys(DataSpec)), root, where.key("data")),
        recipe=_recipe(_table(data, "calibration", where, ("method", "percentile", "recovery")), where),
        search=_typed(SearchSpec, _table(data, "search", where, file_keys(SearchSpec)), where, "search"),
        gates=_gates(_table(data, "gates", where, [f.name for f in fields(GateConfig)]), where.key("gates")),
        targets=_targets(data.get("target"), where),
        signoff=_signoff(_table(data, "signoff", where, file_keys(SignoffSpec)), root, where),
    )
    if project.search.enabled and project.data.split == "given" and project.data.dev is None:
        raise where.key("data").fail(
            'the search needs a dev set apart from the calibration and evaluation sets: give dev = "<set>", '
            "or [search] enabled = false"
        )
    return project


def _table(data: dict[str, Any], name: str, where: Where, known: Any) -> dict[str, Any]:
    table = shape.mapping(data.get(name, {}), where.key(name))
    shape.only_keys(table, known, where.key(name))
    return table


def _data(table: dict[str, Any], root: Path, where: Where) -> DataSpec:
    split = shape.choice(table.get("split", "speaker"), SPLITS, where.key("split"))
    unlabelled = tuple(
        shape.string(v, where.key("unlabelled").index(i))
        for i, v in enumerate(shape.sequence(table.get("unlabelled", []), where.key("unlabelled")))
    )
    names = {
        k: shape.optional_string(table.get(k), where.key(k)) for k in ("calibration", "dev", "evaluation")
    }
    if split == "speaker":
        if "source" not in table:
            raise where.fail('split = "speaker" needs source = "<manifest, audio folder or corpus root>"')
        source = (root / shape.string(table["source"], where.key("source"))).resolve()
        if not source.exists():
            raise where.key("source").fail(f"{source} does not exist")
        layout = shape.choice(table.get("layout"), LAYOUTS, where.key("layout"))
        if any(names.values()):
            raise where.fail(
                'split = "speaker" makes the sets from source: drop calibration, dev and evaluation'
            )
        return DataSpec(split, source, layout, unlabelled=unlabelled)
    for key in ("calibration", "evaluation"):
        if names[key] is None:
            raise where.fail(f'split = "given" needs {key} = "<set name or folder>"')
    if "source" in table or "layout" in table:
        raise where.fail('split = "given" names the sets: drop source and layout')
    resolved = {k: _set_name(v, root) if v is not None else None for k, v in names.items()}
    return DataSpec(
        split, None, None, resolved["calibration"], resolved["dev"], resolved["evaluation"], unlabelled
    )


def _set_name(value: str, root: Path) -> str:
    """A set folder relative to the project file when one is there, else a stored set name (checked when loaded)."""
    folder = root / value
    return str(folder.resolve()) if folder.is_dir() else value


def _recipe(table: dict[str, Any], where: Where) -> RecipeSpec:
    at = where.key("calibration")
    method = shape.choice(table.get("method", DEFAULT_METHOD), METHOD_NAMES, at.key("method"))
    percentile = shape.finite_number(table.get("percentile", DEFAULT_PERCENTILE), at.key("percentile"))
    if not 50.0 < percentile <= 100.0:
        raise at.key("percentile").fail(f"must be in (50, 100], not {percentile:g}")
    if "recovery" not in table:
        return RecipeSpec(method, percentile)
    listed = shape.sequence(table["recovery"], at.key("recovery"))
    on = {
        RECOVERY_NAMES[shape.choice(v, tuple(RECOVERY_NAMES), at.key("recovery").index(i))]
        for i, v in enumerate(listed)
    }
    recovery = RecoveryDefaults(
        bias_correction="bias_correction" in on,
        clip_search="clip_search" in on,
        refine_ranges="refine_ranges" in on,
        shift_scale="shift_scale" in on,
    )
    return RecipeSpec(method, percentile, recovery)


def _typed(kind: Any, table: dict[str, Any], where: Where, name: str) -> Any:
    """``kind(**table)`` with each value checked against the field's default type (ints >= 0, bools, numbers)."""
    values: dict[str, Any] = {}
    for f in fields(kind):
        if f.name not in table:
            continue
        value, at = table[f.name], where.key(name).key(f.name)
        default = getattr(kind(), f.name)
        if isinstance(default, bool):
            if not isinstance(value, bool):
                raise at.fail(f"must be true or false, found {shape.describe(value)}")
        elif isinstance(default, int) or default is None:
            value = shape.integer(value, at, minimum=0 if f.name in ("seed", "refine", "finer") else 1)
        elif isinstance(default, float):
            value = shape.finite_number(value, at)
        values[f.name] = value
    return kind(**values)


def _gates(table: dict[str, Any], where: Where) -> GateConfig:
    check_gate_values(table, where)
    return GateConfig(**table)


def _targets(value: Any, where: Where) -> tuple[TargetSpec, ...]:
    if value is None:
        return (TargetSpec(),)
    items = shape.sequence(value, where.key("target"))
    if not items:
        raise where.key("target").fail("needs at least one [[target]]")
    out = []
    known = file_keys(TargetSpec)
    for i, item in enumerate(items):
        at = where.key("target").index(i)
        table = shape.mapping(item, at)
        shape.only_keys(table, known, at)
        name = shape.choice(table.get("name", "tensorrt"), BACKENDS, at.key("name"))
        backend = shape.choice(table.get("backend", DEFAULT_BACKEND), BACKENDS, at.key("backend"))
        policy = shape.choice(
            table.get("outside_profile", OUTSIDE_PROFILE_DEFAULT),
            OUTSIDE_PROFILE_POLICIES,
            at.key("outside_profile"),
        )
        flags = {}
        for key in ("latency", "as_given"):
            if not isinstance(table.get(key, False), bool):
                raise at.key(key).fail(f"must be true or false, found {shape.describe(table[key])}")
            flags[key] = bool(table.get(key, False))
        listed = shape.sequence(table.get("latency_batch_sizes", [1, 8, 32]), at.key("latency_batch_sizes"))
        batches = tuple(
            shape.integer(v, at.key("latency_batch_sizes").index(j), minimum=1) for j, v in enumerate(listed)
        )
        if not batches:
            raise at.key("latency_batch_sizes").fail("needs at least one batch size")
        repeats = shape.integer(table.get("latency_repeats", 10), at.key("latency_repeats"), minimum=1)
        warmup = shape.integer(table.get("latency_warmup", 2), at.key("latency_warmup"), minimum=0)
        least = shape.integer(table.get("latency_min_repeats", 3), at.key("latency_min_repeats"), minimum=1)
        budget = (
            shape.finite_number(table["latency_budget_s"], at.key("latency_budget_s"), positive=True)
            if "latency_budget_s" in table
            else None
        )
        decoder = shape.optional_string(table.get("decoder"), at.key("decoder"))
        report = shape.optional_string(table.get("report"), at.key("report"))
        if report is not None and not report.replace("-", "").replace("_", "").isalnum():
            raise at.key("report").fail(f"may hold only letters, digits, '-' and '_', not {report!r}")
        seconds = {
            k: shape.finite_number(table[k], at.key(k), positive=True) if k in table else None
            for k in ("min_seconds", "max_seconds")
        }
        out.append(
            TargetSpec(
                name=name,
                backend=backend,
                latency=flags["latency"],
                latency_batch_sizes=batches,
                latency_repeats=repeats,
                as_given=flags["as_given"],
                min_seconds=seconds["min_seconds"],
                max_seconds=seconds["max_seconds"],
                outside_profile=policy,
                latency_warmup=warmup,
                latency_budget_s=budget,
                latency_min_repeats=least,
                decoder=decoder,
                report=report,
            )
        )
    if len({t.name for t in out}) != len(out):
        raise where.key("target").fail("names a deployment target twice")
    folders = [t.report for t in out if t.report is not None]
    if len(set(folders)) != len(folders):
        raise where.key("target").fail("names a report folder twice")
    return tuple(out)


def _signoff(table: dict[str, Any], root: Path, where: Where) -> SignoffSpec:
    at = where.key("signoff")
    lm = None
    if "lm" in table:
        lm = (root / shape.string(table["lm"], at.key("lm"))).resolve()
        if not lm.is_file():
            raise at.key("lm").fail(f"{lm} is not a file")
    decoder = shape.string(table.get("decoder", "greedy"), at.key("decoder"))
    rest = _typed(
        SignoffSpec, {k: v for k, v in table.items() if k not in ("lm", "decoder")}, where, "signoff"
    )
    if rest.resamples < 100:
        raise at.key("resamples").fail(f"must be at least 100, not {rest.resamples}")
    return replace(rest, decoder=decoder, lm=lm)

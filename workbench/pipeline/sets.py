"""The sets step: the project's calibration, dev and evaluation sets, made from one source or loaded as given.

``split = "speaker"``: the source is imported whole once (``jobs.import_set``, as ``<project>-all``), its speakers
are assigned per accent to evaluation (a third), dev and calibration (``speech.split.partition_speakers``), and a
text spoken in evaluation is dropped from dev and calibration, one spoken in dev from calibration, so the three sets
share neither speakers nor texts; they are written together (``speech.store.write_sets``). The inputs' hash is the
source's file listing (paths, sizes, modification times) and the data settings. ``split = "given"``: the named
sets are loaded; their content hashes are the inputs. ``split = "synthetic"`` (the demo preset): ``data build``'s
synthetic calibration, evaluation and held-out dev sets (``jobs.sets``); the inputs are its settings.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.pipeline.state import digest
from workbench.project.file import DataSpec
from workbench.speech.overlap import disjoint, overlap
from workbench.speech.records import Clip, Utterance
from workbench.speech.split import DEV_ROLE, partition_speakers
from workbench.speech.store import SetSpec, SpeechSet, load_set, made_record, write_sets

SPLIT_SCHEME = "speaker-per-accent/1"  # changes when the split rule does, so older splits are not reused
ROLES = ("calib", DEV_ROLE, "eval")


@dataclass(frozen=True)
class ProjectSets:
    calib: SpeechSet
    dev: SpeechSet | None
    eval: SpeechSet
    unlabelled: tuple[SpeechSet, ...] = ()

    def hashes(self) -> dict[str, Any]:
        return {
            "calib": self.calib.content_hash,
            "dev": self.dev.content_hash if self.dev is not None else None,
            "eval": self.eval.content_hash,
            "unlabelled": [s.content_hash for s in self.unlabelled],
        }

    def files(self) -> list[Path]:
        sets = [self.calib, self.eval, *([self.dev] if self.dev is not None else []), *self.unlabelled]
        return [s.path / "card.json" for s in sets]

    def to_json(self) -> dict[str, Any]:
        return {
            "calib": str(self.calib.path),
            "dev": str(self.dev.path) if self.dev is not None else None,
            "eval": str(self.eval.path),
            "unlabelled": [str(s.path) for s in self.unlabelled],
            "hashes": self.hashes(),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProjectSets:
        return cls(
            load_set(data["calib"]),
            load_set(data["dev"]) if data.get("dev") else None,
            load_set(data["eval"]),
            tuple(load_set(p) for p in data.get("unlabelled", [])),
        )


def source_listing(source: Path) -> str:
    """A hash of the source's files: relative path, size and modification time of each (no audio is read)."""
    source = Path(source)
    if source.is_file():
        stat = source.stat()
        return digest([source.name, stat.st_size, stat.st_mtime_ns])
    rows = []
    for folder, _, names in os.walk(source):
        for name in sorted(names):
            path = Path(folder) / name
            stat = path.stat()
            rows.append([path.relative_to(source).as_posix(), stat.st_size, stat.st_mtime_ns])
    return digest(sorted(rows))


def given_sets(data: DataSpec, root: Path) -> ProjectSets:
    """Load the named sets (``split = "given"``)."""
    if data.calibration is None or data.evaluation is None:
        raise WorkbenchError('split = "given" needs calibration and evaluation sets')
    return ProjectSets(
        load_set(data.calibration, root),
        load_set(data.dev, root) if data.dev else None,
        load_set(data.evaluation, root),
        tuple(load_set(name, root) for name in data.unlabelled),
    )


def synthetic_sets(data: DataSpec, root: Path) -> ProjectSets:
    """Build (or reuse, as ``data build`` does) the synthetic sets of ``data.synthetic`` under ``root``."""
    from workbench.jobs import sets

    if data.synthetic is None:
        raise WorkbenchError('split = "synthetic" needs the sets\' settings')
    result = sets.run(sets.SetsInputs(data.synthetic, root=root))
    for line in result.lines():
        print(line)
    built = result.built
    return ProjectSets(built.calib, built.dev, built.eval, tuple(load_set(n, root) for n in data.unlabelled))


def inputs_of(data: DataSpec, root: Path) -> dict[str, Any]:
    """What the sets step depends on: for a split, the data settings and the source listing; for given sets, their
    content hashes (loaded and checked); for synthetic sets, their settings (the worker count aside)."""
    if data.split == "synthetic":
        settings = asdict(data.synthetic) if data.synthetic is not None else {}
        settings.pop("workers", None)
        return {"split": "synthetic", "settings": settings, "unlabelled": list(data.unlabelled)}
    if data.split == "given":
        return {"split": "given", "sets": given_sets(data, root).hashes()}
    if data.source is None:
        raise WorkbenchError('split = "speaker" needs a source')
    unlabelled = [load_set(n, root).content_hash for n in data.unlabelled]
    listing = source_listing(data.source)
    return {"split": asdict(data), "listing": listing, "scheme": SPLIT_SCHEME, "unlabelled": unlabelled}


def roles_by_speaker(utts: list[Utterance]) -> dict[str, list[Utterance]]:
    """Each role's utterances: speakers per accent to eval / dev / calib, shared texts dropped (eval's first)."""
    accents = {u.speaker: u.accent for u in utts}
    roles = partition_speakers(sorted(accents), lambda s: accents[s], dev=True)
    by: dict[str, list[Utterance]] = {role: [] for role in ROLES}
    for u in utts:
        by[roles[u.speaker]].append(u)
    taken = {u.text for u in by["eval"]}
    by[DEV_ROLE] = [u for u in by[DEV_ROLE] if u.text not in taken]
    taken |= {u.text for u in by[DEV_ROLE]}
    by["calib"] = [u for u in by["calib"] if u.text not in taken]
    return by


def split_sets(name: str, data: DataSpec, root: Path, progress: bool = True) -> ProjectSets:
    """Import the source whole and write ``<name>-calib``, ``-dev`` and ``-eval`` split by speaker."""
    from workbench.jobs import import_set
    from workbench.speech.importer import ImportConfig

    if data.source is None or data.layout is None:
        raise WorkbenchError('split = "speaker" needs a source and its layout')
    whole = import_set.run(
        import_set.ImportInputs(
            ImportConfig(name=f"{name}-all", role="eval"),
            data.layout,
            str(data.source),
            root=root,
            progress=progress,
        )
    ).result.speech_set
    by = roles_by_speaker(whole.utterances)
    empty = [role for role in ROLES if not by[role]]
    if empty:
        speakers = len({u.speaker for u in whole.utterances})
        raise WorkbenchError(
            f"{data.source}: {speakers} speaker(s) leave no {' or '.join(empty)} set after the split by speaker "
            "(a third of each accent's speakers to evaluation, half the rest to dev); give more speakers, or "
            'split = "given" with sets of your own'
        )
    checks = {
        "calib-eval": overlap(by["calib"], by["eval"]),
        "dev-eval": overlap(by[DEV_ROLE], by["eval"]),
        "calib-dev": overlap(by["calib"], by[DEV_ROLE]),
    }
    if not all(
        disjoint(c) for c in checks.values()
    ):  # the rule above makes them disjoint; never write otherwise
        raise WorkbenchError(f"the split of {data.source} is not disjoint: {checks}")
    profile = whole.card.get("profile")
    specs = [
        SetSpec(
            root / f"{name}-{role}",
            [Clip(Utterance.from_json(u.to_json()), whole.audio(u)) for u in by[role]],
            made_record(role, f"{data.layout}:{data.source}", {"split": SPLIT_SCHEME, "from": whole.name}),
            [],
            checks,
            profile,
        )
        for role in ROLES
    ]
    calib, dev, evaluation = write_sets(specs)
    return ProjectSets(calib, dev, evaluation, tuple(load_set(n, root) for n in data.unlabelled))

"""Speech set storage: ``calib_sets/<name>/`` with manifest.jsonl, audio/*.flac and a card.

Sets are written into a temporary folder and moved into place (a calibration/evaluation pair together,
through ``workbench.journal``), so a failed or killed build leaves no half set, never a mixed pair,
and never damages an existing one. ``load_set`` checks the card and every manifest line
(``workbench.inputs.sets``), refuses links and repeated utterances, and verifies the files against the card
(``workbench.speech.integrity``); ``recard_set`` re-cards a set whose change was meant. The card holds counts per stratum, a duration histogram,
the content hash and how the set was made.
"""

from __future__ import annotations

import json
import platform
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from workbench import __version__, journal
from workbench.artifacts import sha256_file, shared_mode, write_json_atomic
from workbench.config import CONDITIONS, NOISY_CONDITION, REVERBERANT_CONDITION, EngineProfile
from workbench.errors import WorkbenchError
from workbench.inputs.problem import Where
from workbench.inputs.read import decode_utf8, parse_json, read_bytes, read_json
from workbench.inputs.sets import CARD, MANIFEST, check_card, check_utterance
from workbench.inputs.sets import FIX as SET_FIX
from workbench.speech.audio import load_flac, write_flac
from workbench.speech.integrity import content_hash, index_files, recard_hint, refuse_link, verify_content
from workbench.speech.records import Clip, Skipped, Utterance
from workbench.workspace import area_path

CARD_MD = "card.md"
HIST_BIN_S = 0.5


_REBUILD = "rebuild or re-import it (python -m workbench data build / data import)"


@dataclass
class SpeechSet:
    """A stored set: its folder, card and utterance records."""

    path: Path
    card: dict[str, Any]
    utterances: list[Utterance]

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def content_hash(self) -> str:
        return str(self.card["content_hash"])

    def audio(self, utt: Utterance) -> np.ndarray:
        """The clip's samples; a clip file that is gone or unreadable is a user error naming it and the set."""
        path = self.path / utt.audio
        if not path.is_file():
            raise WorkbenchError(
                f"set {self.path}: the audio of utterance {utt.id} ({utt.audio}) is missing; the set changed "
                f"since it was written: {_REBUILD}"
            )
        try:
            return load_flac(path)
        except (OSError, RuntimeError, ValueError) as exc:  # soundfile's errors derive from these
            raise WorkbenchError(
                f"set {self.path}: the audio of utterance {utt.id} ({utt.audio}) cannot be read ({exc}); {_REBUILD}"
            ) from exc

    def iter_audio(self):
        for utt in self.utterances:
            yield utt, self.audio(utt)


def set_path(name_or_path: str | Path, root: Path | None = None) -> Path:
    """A set's folder: ``name_or_path`` itself when it is a path, else that name under ``root`` (default: the
    workspace's calib_sets/)."""
    path = Path(name_or_path)
    if path.exists() or path.is_absolute() or "/" in str(name_or_path):
        return path
    return area_path("calib_sets", root) / str(name_or_path)


def duration_histogram(durations: list[float]) -> dict[str, int]:
    counts = Counter(int(d // HIST_BIN_S) for d in durations)
    return {f"{k * HIST_BIN_S:.1f}-{(k + 1) * HIST_BIN_S:.1f}": counts[k] for k in sorted(counts)}


def strata_counts(utts: list[Utterance]) -> dict[str, dict[str, int]]:
    table: dict[str, dict[str, int]] = {}
    for u in utts:
        table.setdefault(u.condition, {}).setdefault(u.bucket or "-", 0)
        table[u.condition][u.bucket or "-"] += 1
    return {c: dict(sorted(b.items())) for c, b in sorted(table.items())}


def made_record(
    role: str, source: str, config: dict[str, Any], extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The card's "how it was made": role, source, configuration, versions and command line."""
    return {
        "role": role,
        "source": source,
        "config": json.loads(json.dumps(config, default=str)),  # paths as text, as the card stores them
        "workbench": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "command": " ".join(sys.argv),
        **(extra or {}),
    }


# the noise label of a noisy utterance whose manifest names no noise kind (noise recorded with the speech)
UNSTATED_NOISE = "recorded (kind not stated)"


def noise_label(utt: Utterance) -> str:
    """What a card counts for ``utt``'s noise: its kind; for a noisy condition with no kind stated (an imported
    manifest's ``"condition": "noisy"``), ``UNSTATED_NOISE``; else ``none``."""
    if utt.noise_kind:
        return utt.noise_kind
    return UNSTATED_NOISE if utt.condition in (NOISY_CONDITION, REVERBERANT_CONDITION) else "none"


def build_card(
    utts: list[Utterance],
    chash: str,
    made: dict[str, Any],
    skipped: list[Skipped],
    checks: dict[str, Any],
    profile: dict[str, Any] | None = None,
) -> dict[str, Any]:
    snrs = [u.snr_db for u in utts if u.snr_db is not None]
    return {
        "format": "workbench-speech-set/1",
        "content_hash": chash,
        "utterances": len(utts),
        "total_duration_s": round(sum(u.duration_s for u in utts), 2),
        "strata": strata_counts(utts),
        "conditions": dict(Counter(u.condition for u in utts)),
        "accents": dict(sorted(Counter(u.accent for u in utts).items())),
        "noise_kinds": dict(sorted(Counter(noise_label(u) for u in utts).items())),
        "speakers": len({u.speaker for u in utts}),
        "profile": profile,
        "snr_db": {"min": min(snrs), "max": max(snrs), "mean": float(np.mean(snrs))} if snrs else None,
        "duration_histogram": duration_histogram([u.duration_s for u in utts]),
        "fixed": sum(1 for u in utts if u.fixes),
        "skipped": [{"item": s.item, "reason": s.reason} for s in skipped],
        "checks": checks,
        "made": made,
    }


def render_card_markdown(name: str, card: dict[str, Any]) -> str:
    lines = [
        f"# Speech set `{name}`",
        "",
        f"- content hash: `{card['content_hash']}`",
        f"- utterances: {card['utterances']} ({card['total_duration_s']:.0f} s), speakers: {card['speakers']}",
        f"- engine profile: {_profile_line(card.get('profile'))}",
        "",
        "## Balance (condition x duration bucket)",
        "",
        balance_table(card),
        "",
        "## Duration histogram (s)",
        "",
    ]
    peak = max(card["duration_histogram"].values(), default=1)
    for label, count in card["duration_histogram"].items():
        lines.append(f"    {label:>9} | {'#' * max(1, round(40 * count / peak))} {count}")
    lines += ["", "## Accents", ""] + [f"- {a}: {n}" for a, n in card["accents"].items()]
    lines += ["", "## Noise kinds", ""] + [f"- {k}: {n}" for k, n in card["noise_kinds"].items()]
    lines += ["", "## Checks", "", "```", json.dumps(card["checks"], indent=2), "```"]
    lines += ["", f"## Skipped inputs ({len(card['skipped'])})", ""]
    lines += [f"- {s['item']}: {s['reason']}" for s in card["skipped"][:200]]
    lines += ["", "## How it was made", "", "```", json.dumps(card["made"], indent=2), "```", ""]
    return "\n".join(lines)


def _profile_line(profile: dict[str, Any] | None) -> str:
    if not profile:
        return "not recorded"
    return f"{profile['min_s']:g} / {profile['opt_s']:g} / {profile['max_s']:g} s (min/opt/max), {profile['how']}"


def balance_table(card: dict[str, Any]) -> str:
    strata: dict[str, dict[str, int]] = card["strata"]
    present = {b for row in strata.values() for b in row}
    profile_order = [name for name, _, _ in EngineProfile().buckets()]  # short before long
    buckets = [b for b in profile_order if b in present] + sorted(present - set(profile_order))
    header = f"| condition | {' | '.join(buckets)} | total |"
    rule = "|---" * (len(buckets) + 2) + "|"
    rows = [header, rule]
    order = [c for c in CONDITIONS if c in strata] + [c for c in strata if c not in CONDITIONS]
    for cond in order:
        row = strata[cond]
        rows.append(f"| {cond} | {' | '.join(str(row.get(b, 0)) for b in buckets)} | {sum(row.values())} |")
    totals = [sum(strata[c].get(b, 0) for c in strata) for b in buckets]
    rows.append(f"| total | {' | '.join(map(str, totals))} | {sum(totals)} |")
    return "\n".join(rows)


def write_clip_audio(folder: Path, clip: Clip) -> str:
    """Write one clip's FLAC into a set folder being made; sets ``record.audio``, returns the file's hash."""
    rel = f"audio/{clip.utterance.id}.flac"
    write_flac(folder / rel, clip.audio)
    clip.utterance.audio = rel
    return sha256_file(folder / rel)


def start_set(tmp: Path) -> None:
    """Prepare a (temporary) folder to receive a set's files."""
    tmp.chmod(
        shared_mode(folder=True)
    )  # a set is an ordinary shared artifact: the umask decides, as for mkdir
    (tmp / "audio").mkdir(exist_ok=True)


def finish_set(
    tmp: Path,
    name: str,
    utts: list[Utterance],
    audio_hashes: list[str],
    made: dict[str, Any],
    skipped: list[Skipped],
    checks: dict[str, Any],
    profile: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write the manifest and card of a set whose audio is in ``tmp``; returns the card."""
    lines = [json.dumps(u.to_json(), sort_keys=True) for u in utts]
    manifest = ("\n".join(lines) + "\n").encode()
    (tmp / MANIFEST).write_bytes(manifest)
    index_files(tmp, {u.audio: h for u, h in zip(utts, audio_hashes)})
    card = build_card(utts, content_hash(manifest, audio_hashes), made, skipped, checks, profile)
    write_json_atomic(tmp / CARD, card)
    (tmp / CARD_MD).write_text(render_card_markdown(name, card), encoding="utf-8")
    return card


def _write_contents(tmp: Path, spec: SetSpec) -> dict[str, Any]:
    """Write audio, manifest and card of one set into the (temporary) folder ``tmp``; returns the card."""
    start_set(tmp)
    hashes = [write_clip_audio(tmp, clip) for clip in spec.clips]
    journal.step(f"wrote the audio of {spec.final.name}")  # a kill here leaves a half-written set
    return finish_set(
        tmp,
        spec.final.name,
        [c.utterance for c in spec.clips],
        hashes,
        spec.made,
        spec.skipped,
        spec.checks,
        spec.profile,
    )


@dataclass
class SetSpec:
    """What ``write_sets`` writes for one set: its final folder and contents."""

    final: Path
    clips: list[Clip]
    made: dict[str, Any]
    skipped: list[Skipped]
    checks: dict[str, Any]
    profile: dict[str, Any] | None = None


def write_sets(specs: list[SetSpec]) -> list[SpeechSet]:
    """Write several sets (a calibration/evaluation pair, siblings in one folder) so that they are replaced together.

    Every set is written into one temporary parent first; only when all of them are complete are they moved
    into place, under a journal that the next run completes if this one is killed (``workbench.journal``).
    Any failure while writing leaves every existing set untouched.
    """
    for spec in specs:
        if not spec.clips:
            raise WorkbenchError(
                f"no usable utterances for {spec.final.name}; nothing written "
                f"({len(spec.skipped)} inputs skipped)"
            )
    root = specs[0].final.parent
    if any(spec.final.parent != root for spec in specs):
        raise ValueError("sets written together must be siblings")
    cards: list[dict[str, Any]] = []
    with journal.folders_together(root, [spec.final.name for spec in specs], specs[0].final.name) as folders:
        for spec in specs:
            cards.append(_write_contents(folders[spec.final.name], spec))
            journal.step(f"wrote {spec.final.name}")
    return [
        SpeechSet(spec.final, card, [c.utterance for c in spec.clips]) for spec, card in zip(specs, cards)
    ]


def write_set(
    final: Path, clips: list[Clip], made: dict[str, Any], skipped: list[Skipped], checks: dict[str, Any]
) -> SpeechSet:
    """Write a set atomically; an existing set at ``final`` survives any failure."""
    return write_sets([SetSpec(Path(final), clips, made, skipped, checks)])[0]


def set_names(root: Path) -> list[str]:
    """Folders under ``root`` holding a set (hidden temporary folders are never listed)."""
    root = Path(root)
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if not p.name.startswith(".") and (p / CARD).is_file())


def load_set(name_or_path: str | Path, root: Path | None = None, verify: bool = True) -> SpeechSet:
    """Load a stored set by name (under ``root``, default the workspace's calib_sets/) or path, its card and
    manifest checked (``workbench.inputs.sets``); a missing, incomplete or damaged set is a user error, and so
    is a link (the folder, card, manifest or audio) or an utterance listed twice. With ``verify`` (the default)
    the files must hash to the card's content hash (``workbench.speech.integrity``). A set write that was
    killed is completed or discarded first (``workbench.journal.recover``)."""
    root = area_path("calib_sets", root)
    path = set_path(name_or_path, root)
    if path.parent.is_dir():
        journal.recover(path.parent)
    refuse_link(path, "speech set folder")
    for part in (CARD, MANIFEST):
        refuse_link(path / part, f"set {path.name}:")
    if not (path / MANIFEST).is_file() or not (path / CARD).is_file():
        raise WorkbenchError(
            f"no speech set at {path} (need {MANIFEST} and {CARD}). "
            f"Known sets: {', '.join(set_names(root)) or 'none'}; build one with "
            "'python -m workbench data build'."
        )
    card_where = Where(f"speech set card {path / CARD}", SET_FIX)
    card = check_card(read_json(path / CARD, card_where), card_where)
    where = Where(f"speech set manifest {path / MANIFEST}", SET_FIX)
    labelled = card["made"].get("role") != "unlabelled"  # an unlabelled set's texts are empty
    utts = []
    first_line: dict[str, int] = {}
    raw = read_bytes(path / MANIFEST, where)
    text = decode_utf8(raw, where)
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            at = where.line(number)
            utt = Utterance.from_json(check_utterance(parse_json(line, at, name_line=False), at, labelled))
            if utt.id in first_line:
                raise WorkbenchError(
                    f"set {path.name}: utterance {utt.id} is listed twice in {MANIFEST} (lines "
                    f"{first_line[utt.id]} and {number}); remove the repeated line, then "
                    f"{recard_hint(path.name)}"
                )
            first_line[utt.id] = number
            utts.append(utt)
    speech_set = SpeechSet(path, card, utts)
    if verify:
        verify_set(speech_set, raw)
    return speech_set


def repeats(first: SpeechSet, second: SpeechSet) -> str | None:
    """How ``second`` repeats ``first`` (the same folder, a copy of its content, or shared utterances), or None."""
    if first.path.resolve() == second.path.resolve():
        return "they are the same folder"
    if first.content_hash == second.content_hash:
        return f"they hold the same content (hash {first.content_hash[:12]}: a copy)"
    shared = sorted({u.id for u in first.utterances} & {u.id for u in second.utterances})
    if shared:
        return f"they share {len(shared)} utterance(s) (ids such as {shared[0]})"
    return None


def verify_set(speech_set: SpeechSet, manifest: bytes | None = None) -> str:
    """The set's content hash recomputed from its files (``manifest``: its manifest's bytes, when already
    read); refuses, with one line, a set whose files are not what its card says."""
    if manifest is None:
        manifest = (speech_set.path / MANIFEST).read_bytes()
    return verify_content(
        speech_set.path, manifest, [u.audio for u in speech_set.utterances], speech_set.content_hash
    )

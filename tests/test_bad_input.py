"""Bad-input matrix (issue 20): every class of bad file or fault against the real CLI, in a copy of real artifacts.

Each row plants one bad input into a private workspace (a copy of the dashboard fixture's artifacts, made by
the real code: sets, a tiny model's calibration, a sign-off record) plus a folder outside it, runs one verb
through ``workbench.cli.main`` and asserts either

- an error: exit status 1, exactly one stderr line starting ``error:`` that contains the expected text, and
  every file and folder inside and outside the workspace byte-identical afterwards; or
- a recorded fix (exit 0, the expected line on stdout): the damaged artifact is rewritten and the workspace
  is back to what it was before the damage, byte for byte (histogram sidecars, whose zip headers carry a
  time stamp, compared by content).

Model checks before export (a config without a CTC head, BERT folders) belong to issue 20 item 5 and are
tested with the model loader (helper ``models``), not here. The set-pair kill test, the prune-through-symlink
and the record-path leak regressions follow the matrix. See docs/bad-input.md.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest
import soundfile as sf
from dashkit import copy_artifacts
from killkit import Zygote
from onnx import TensorProto, helper

from workbench.artifacts import sha256_file
from workbench.calibration import cache as cache_mod
from workbench.calibration import histograms
from workbench.cli import main
from workbench.report.record import record_digest
from workbench.speech.integrity import INDEX
from workbench.workspace import ENV_VAR

WORDS = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
    "mike",
    "november",
    "oscar",
]
SPEAKERS = {"ann": "us", "bob": "us", "cat": "us", "dan": "us", "eve": "scottish", "fay": "scottish"}


# ------------------------------------------------------------------------------------------------ workspace


@dataclass
class Workspace:
    """A private copy of real artifacts (``root``), a folder outside it, and the paths the rows use."""

    root: Path
    outside: Path
    model: Path
    calib: Path
    eval: Path
    run: Path  # engines/<model hash 12>/
    fp32: Path
    cache: Path
    record: Path

    @property
    def sets(self) -> Path:
        return self.root / "calib_sets"

    @property
    def engines(self) -> Path:
        return self.root / "engines"

    def user(self, name: str) -> Path:
        """A file the user hands the workbench (inside the workspace, so it is checked unchanged too)."""
        path = self.root / "user" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def signoff(
        self,
        *extra: str,
        eval_set: str | None = None,
        calib_set: str | None = None,
        candidate: Path | None = None,
    ) -> list[str]:
        return [
            "signoff",
            "--eval-set",
            eval_set or str(self.eval),
            "--calib-set",
            calib_set or str(self.calib),
            "--candidate",
            f"fp32={candidate or self.fp32}",
            "--no-latency",
            "--threads",
            "1",
            "--resamples",
            "100",
            "--root",
            str(self.sets),
            "--out",
            str(self.root / "reports" / "new"),
            "--model",
            str(self.model),
            *extra,
        ]

    def calibrate(self) -> list[str]:
        return [
            "calibrate",
            "--model",
            str(self.model),
            "--set",
            str(self.calib),
            "--engines",
            str(self.engines),
            "--method",
            "entropy",  # the recipe the artifacts were calibrated with (dashkit)
            "--no-recovery",
        ]


@pytest.fixture
def ws(dash_artifacts, tmp_path, monkeypatch) -> Workspace:
    return make_workspace(dash_artifacts, tmp_path, monkeypatch)


def make_workspace(dash_artifacts, tmp_path: Path, monkeypatch) -> Workspace:
    """A private copy of the session's artifacts under ``tmp_path`` (the workspace ``$WORKBENCH_WORKSPACE`` names)."""
    root = copy_artifacts(dash_artifacts.root, tmp_path / "ws")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("not for the workbench\n")
    monkeypatch.setenv(ENV_VAR, str(root))
    src = dash_artifacts.root

    def moved(path: Path) -> Path:
        return root / Path(path).relative_to(src)

    c = dash_artifacts.calibrated
    return Workspace(
        root,
        outside,
        moved(dash_artifacts.model),
        moved(dash_artifacts.calib.path),
        moved(dash_artifacts.eval.path),
        moved(c.fp32_onnx).parent,
        moved(c.fp32_onnx),
        moved(c.cache),
        root / "reports" / "unit-signoff" / "report.json",
    )


def snapshot(*roots: Path) -> dict[str, str]:
    """Every entry under ``roots`` (links not followed): file -> sha256, link -> its target, folder -> 'dir'.

    A set's ``index.json`` (the stat fields of its verified files) is left out: a copied set's files have new
    inodes, so the first step that verifies the copy hashes it again and rewrites its index."""
    out: dict[str, str] = {}
    for root in roots:
        for folder, dirs, files in os.walk(root, followlinks=False):
            for name in dirs + files:
                path = Path(folder) / name
                key = f"{root.name}/{path.relative_to(root).as_posix()}"
                if name == INDEX and (path.parent / "manifest.jsonl").exists():
                    continue
                if path.is_symlink():
                    out[key] = "link:" + os.readlink(path)
                elif path.is_dir():
                    out[key] = "dir"
                else:
                    out[key] = sha256_file(path)
    return out


def rewrite_record(path: Path, change: Callable[[dict], None]) -> None:
    """Edit a record and re-digest it, as someone forging a record would."""
    record = json.loads(path.read_text())
    change(record)
    record["record_sha256"] = record_digest(record)
    path.write_text(json.dumps(record))


def write_manifest(folder: Path, lines: list[str] | None = None) -> Path:
    """A manifest of 24 short clips (6 speakers, 2 Scottish) that ``data build`` can balance; or given lines."""
    rows = []
    for i in range(24):
        speaker = list(SPEAKERS)[i // 4]
        rel = f"{speaker}/{i:02d}.wav"
        (folder / speaker).mkdir(parents=True, exist_ok=True)
        seconds = (1.5, 2.5, 4.5, 6.0)[i % 4]
        from conftest import _speech_like

        sf.write(str(folder / rel), _speech_like(seconds, seed=i), 16_000, subtype="PCM_16")
        text = " ".join(WORDS[(i + k * 7) % len(WORDS)] for k in range(3)) + " x" * (i + 1)
        rows.append(json.dumps({"audio": rel, "text": text, "speaker": speaker, "accent": SPEAKERS[speaker]}))
    path = folder / "data.jsonl"
    path.write_text("\n".join(lines if lines is not None else rows) + "\n")
    return path


def build_args(
    manifest: Path, root: Path, name: str = "pair", seed: int = 0, replace: bool = False
) -> list[str]:
    return [
        "data",
        "build",
        "--source",
        "manifest",
        "--path",
        str(manifest),
        "--name",
        name,
        "--root",
        str(root),
        "--calib-per-condition",
        "2",
        "--eval-per-condition",
        "2",
        "--workers",
        "1",
        "--seed",
        str(seed),
        *(["--replace"] if replace else []),
    ]


def tiny_onnx(path: Path, input_name: str = "input_values", rank: int = 2, out_rank: int = 3) -> Path:
    """A valid ONNX file that is not the speech model the workbench runs (wrong input name or ranks)."""
    x = helper.make_tensor_value_info(input_name, TensorProto.FLOAT, ["d"] * rank)
    y = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["d"] * out_rank)
    graph = helper.make_graph([helper.make_node("Identity", [input_name], ["logits"])], "g", [x], [y])
    onnx.save(helper.make_model(graph), str(path))
    return path


# ------------------------------------------------------------------------------------------------ the matrix


@dataclass(frozen=True)
class Case:
    """One row: ``plant`` damages the workspace and returns the argv; ``expect`` is in the one error line, or on
    stdout when ``fix`` (exit 0). ``repairs``: the verb rewrites the damaged cache files (calibrate)."""

    id: str
    klass: str
    plant: Callable[[Workspace], list[str]]
    expect: str
    fix: bool = False
    repairs: bool = False


def _gate(ws: Workspace, text: str, suffix: str = ".json") -> list[str]:
    path = ws.user(f"gates{suffix}")
    path.write_text(text)
    return ws.signoff("--gates", str(path))


def _copy_set(ws: Workspace, name: str) -> Path:
    target = ws.sets / name
    shutil.copytree(ws.calib, target)
    return target


def _overlapping_set(ws: Workspace) -> list[str]:
    """An evaluation set written by the store that reuses two calibration utterances (same ids and audio)."""
    from workbench.speech.records import Clip
    from workbench.speech.store import load_set, write_set

    calib, evaluation = load_set(ws.calib), load_set(ws.eval)
    clips = [Clip(u, calib.audio(u)) for u in calib.utterances[:2]] + [
        Clip(u, evaluation.audio(u)) for u in evaluation.utterances
    ]
    write_set(ws.sets / "leaky-eval", clips, {"how": "test"}, [], {})
    return ws.signoff(eval_set=str(ws.sets / "leaky-eval"))


def _cache_from_eval(ws: Workspace) -> list[str]:
    from workbench.speech.store import load_set

    cache = cache_mod.CalibrationCache.from_amax(
        {"t": 1.0}, {"calibration_set": load_set(ws.eval).content_hash}
    )
    cache.save(ws.run / "calib-from-eval.cache")
    return ws.signoff("--cache", str(ws.run / "calib-from-eval.cache"))


def _damage_cache_scale(ws: Workspace) -> None:
    lines = ws.cache.read_text().splitlines()
    name, _, _ = lines[1].rpartition(": ")
    lines[1] = f"{name}: zz00zz00"
    ws.cache.write_text("\n".join(lines) + "\n")


def _truncate_sidecar(ws: Workspace) -> None:
    side = cache_mod.sidecar(ws.cache)
    side.write_bytes(side.read_bytes()[:40])


def _prune_link(ws: Workspace, yes: bool) -> list[str]:
    """A folder outside with a cache the prune would call stale, linked into engines/."""
    victim = ws.outside / "system-cache"
    victim.mkdir()
    (victim / "fontconfig.cache").write_text("TRT-100300-EntropyCalibration2\n")  # no sidecar: 'unusable'
    (ws.engines / "linked").symlink_to(victim, target_is_directory=True)
    return ["cache", "--root", str(ws.engines), "prune"] + (["--yes"] if yes else [])


def _linked_cache_file(ws: Workspace) -> list[str]:
    (ws.outside / "evil.cache").write_text("TRT-100300-EntropyCalibration2\n")
    (ws.run / "evil.cache").symlink_to(ws.outside / "evil.cache")
    return ["cache", "--root", str(ws.engines), "prune", "--yes"]


def _linked_sidecar(ws: Workspace) -> list[str]:
    """A second cache whose sidecar is a link to a valid copy outside: it must not be read (or listed as usable)."""
    copy = ws.run / "calib-copy-entropy.cache"
    shutil.copy(ws.cache, copy)
    shutil.copy(cache_mod.sidecar(ws.cache), ws.outside / "sidecar.json")
    cache_mod.sidecar(copy).symlink_to(ws.outside / "sidecar.json")
    return ["cache", "--root", str(ws.engines), "list"]


def _record_points(ws: Workspace, role: str, path: str) -> list[str]:
    def change(record: dict) -> None:
        for entry in record["provenance"]["artifacts"]:
            if entry["role"] == role:
                entry["path"] = path

    rewrite_record(ws.record, change)
    return ["report", "--record", str(ws.record)]


def _leftover_pending(ws: Workspace) -> list[str]:
    half = ws.sets / ".unit-calib.k1ll3d.pending" / "new" / "unit-calib"
    half.mkdir(parents=True)
    (half / "card.json").write_text("{}")
    (half.parent.parent / "writer.lock").write_text("")
    return ["data", "list", "--root", str(ws.sets)]


def _stored_manifest(ws: Workspace, edit: Callable[[dict], None]) -> list[str]:
    evil = _copy_set(ws, "evil")
    lines = (evil / "manifest.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    edit(first)
    (evil / "manifest.jsonl").write_text("\n".join([json.dumps(first)] + lines[1:]) + "\n")
    return ["data", "show", str(evil)]


def _calibrate_set(ws: Workspace, path: Path) -> list[str]:
    return [
        "calibrate",
        "--model",
        str(ws.model),
        "--set",
        str(path),
        "--engines",
        str(ws.engines),
        "--no-recovery",
    ]


def _changed_set(ws: Workspace, change: Callable[[Path], object]) -> list[str]:
    """A copy of the calibration set, verified once (its index written), then changed; calibrate uses it."""
    from workbench.speech.store import load_set

    evil = _copy_set(ws, "evil")
    load_set(evil)
    change(evil)
    return _calibrate_set(ws, evil)


def _edit_first_line(folder: Path, edit: Callable[[dict], None]) -> None:
    lines = (folder / "manifest.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    edit(first)
    (folder / "manifest.jsonl").write_text("\n".join([json.dumps(first, sort_keys=True)] + lines[1:]) + "\n")


def _repeat_first_line(folder: Path) -> None:
    lines = (folder / "manifest.jsonl").read_text().splitlines()
    (folder / "manifest.jsonl").write_text("\n".join(lines + lines[:1]) + "\n")


def _first_audio(folder: Path) -> Path:
    return folder / json.loads((folder / "manifest.jsonl").read_text().splitlines()[0])["audio"]


def _swap_first_audio(folder: Path) -> None:
    """Another clip's FLAC copied over the first, its modification time kept (cp -p)."""
    lines = (folder / "manifest.jsonl").read_text().splitlines()
    shutil.copy2(folder / json.loads(lines[1])["audio"], _first_audio(folder))


def _link_first_audio(folder: Path, outside: Path) -> None:
    audio = _first_audio(folder)
    shutil.move(audio, outside / audio.name)
    audio.symlink_to(outside / audio.name)


def _folder_source(ws: Workspace, transcript: bytes, table: bytes | None = None) -> list[str]:
    from conftest import _speech_like

    folder = ws.root / "user" / "folder"
    folder.mkdir(parents=True)
    sf.write(str(folder / "a.wav"), _speech_like(2.0), 16_000)
    sf.write(str(folder / "b.wav"), _speech_like(2.0, seed=1), 16_000)
    (folder / "a.txt").write_bytes(transcript)
    if table is not None:
        (folder / "transcripts.tsv").write_bytes(table)
    return [
        "data",
        "build",
        "--source",
        "folder",
        "--path",
        str(folder),
        "--root",
        str(ws.sets),
        "--name",
        "f",
    ]


def _manifest_lines(ws: Workspace, data: bytes) -> list[str]:
    path = ws.user("m.jsonl")
    path.write_bytes(data)
    return build_args(path, ws.sets)


CASES = [
    # --- damage and leaks: nothing outside the workspace is deleted, read or hashed
    Case(
        "prune-dry-run-through-symlinked-folder",
        "leak",
        lambda ws: _prune_link(ws, yes=False),
        "nothing to prune",
        fix=True,
    ),
    Case(
        "prune-yes-through-symlinked-folder",
        "leak",
        lambda ws: _prune_link(ws, yes=True),
        "nothing to prune",
        fix=True,
    ),
    Case("prune-symlinked-cache-file", "leak", _linked_cache_file, "nothing to prune", fix=True),
    Case("list-sidecar-linked-outside", "leak", _linked_sidecar, "leads outside", fix=True),
    Case(
        "record-names-a-file-outside",
        "leak",
        lambda ws: _record_points(ws, "candidate fp16", str(ws.outside / "secret.txt")),
        "lies outside the workspace",
    ),
    Case(
        "record-names-a-folder-outside",
        "leak",
        lambda ws: _record_points(ws, "evaluation set", str(ws.outside)),
        "lies outside the workspace",
    ),
    Case(
        "record-names-proc-environ",
        "leak",
        lambda ws: _record_points(ws, "model", "/proc/self/environ"),
        "lies outside the workspace",
    ),
    Case(
        "record-path-escapes-with-dotdot",
        "leak",
        lambda ws: _record_points(
            ws, "calibration cache", str(ws.engines / ".." / ".." / "outside" / "secret.txt")
        ),
        "lies outside the workspace",
    ),
    # --- paired writes: a killed build's leftovers are cleaned and never listed (kill test below)
    Case(
        "leftover-half-set-from-a-killed-build",
        "pair",
        _leftover_pending,
        "removed the unfinished write .unit-calib.k1ll3d.pending",
        fix=True,
    ),
    # --- silent wrong results
    Case(
        "eval-set-is-calib-set-by-name",
        "silent",
        lambda ws: ws.signoff(eval_set=str(ws.calib)),
        "calibration set unit-calib and evaluation set unit-calib share",
    ),
    Case(
        "eval-set-is-a-copy-of-calib-set",
        "silent",
        lambda ws: ws.signoff(eval_set=str(_copy_set(ws, "copy-eval"))),
        "and evaluation set copy-eval share",
    ),
    Case("eval-set-shares-utterances", "silent", _overlapping_set, "and evaluation set leaky-eval share"),
    Case("cache-made-from-the-eval-set", "silent", _cache_from_eval, "was made from the evaluation set"),
    Case(
        "gate-nan",
        "silent",
        lambda ws: _gate(ws, '{"max_wer_delta_points": NaN}'),
        "key 'max_wer_delta_points': must be a finite number > 0, found nan",
    ),
    Case(
        "gate-infinite-toml",
        "silent",
        lambda ws: _gate(ws, "max_condition_wer_delta_points = inf\n", ".toml"),
        "key 'max_condition_wer_delta_points': must be a finite number > 0, found inf",
    ),
    Case("gate-negative", "silent", lambda ws: _gate(ws, '{"max_wer_delta_points": -0.5}'), "found -0.5"),
    Case(
        "gate-zero-latency",
        "silent",
        lambda ws: _gate(ws, '{"max_latency_ms": 0}'),
        "key 'max_latency_ms': must be a finite number > 0",
    ),
    Case(
        "gate-string-number",
        "silent",
        lambda ws: _gate(ws, '{"max_wer_delta_points": "0.3"}'),
        "found '0.3' (a string)",
    ),
    Case(
        "gate-bool-batch",
        "silent",
        lambda ws: _gate(ws, '{"latency_batch": true}'),
        "key 'latency_batch': must be an integer >= 1, found True",
    ),
    Case(
        "gate-float-batch",
        "silent",
        lambda ws: _gate(ws, '{"latency_batch": 1.5}'),
        "must be an integer >= 1",
    ),
    Case(
        "gate-unknown-percentile",
        "silent",
        lambda ws: _gate(ws, '{"latency_percentile": "p95"}'),
        "must be one of p50, p90, p99",
    ),
    Case(
        "gate-unknown-key",
        "silent",
        lambda ws: _gate(ws, '{"max_wer_delta": 0.3}'),
        "unknown keys ['max_wer_delta']",
    ),
    Case(
        "gate-file-is-a-folder",
        "silent",
        lambda ws: ws.signoff("--gates", str(ws.outside)),
        "not a regular file",
    ),
    Case(
        "histograms-deleted",
        "silent",
        lambda ws: (histograms.histogram_path(ws.cache).unlink(), ws.calibrate())[1],
        "histograms are not usable",
        fix=True,
        repairs=True,
    ),
    Case(
        "histograms-truncated",
        "silent",
        lambda ws: (histograms.histogram_path(ws.cache).write_bytes(b"PK\x03\x04"), ws.calibrate())[1],
        "histograms are not usable",
        fix=True,
        repairs=True,
    ),
    # --- one error line instead of a traceback
    Case(
        "manifest-not-utf8",
        "traceback",
        lambda ws: _manifest_lines(ws, b'{"audio": "a.wav", "text": "caf\xe9"}\n'),
        "line 1: not UTF-8 (byte 0xe9",
    ),
    Case(
        "manifest-lines-not-records",
        "traceback",
        lambda ws: _manifest_lines(ws, b'[1, 2]\n5\n{"audio": 5, "text": "x"}\n"text"\n'),
        "has no usable line (line 1: must be an object",
    ),
    Case("manifest-empty", "traceback", lambda ws: _manifest_lines(ws, b"\n\n"), "has no usable line"),
    Case(
        "transcript-not-utf8",
        "traceback",
        lambda ws: _folder_source(ws, b"caf\xe9 au lait\n"),
        "a.txt, line 1: not UTF-8",
    ),
    Case(
        "transcript-table-not-utf8",
        "traceback",
        lambda ws: _folder_source(ws, b"hello\n", b"b.wav\tgood\nb.wav\tna\xefve\n"),
        "transcripts.tsv, line 2: not UTF-8",
    ),
    Case(
        "candidate-not-onnx",
        "traceback",
        lambda ws: (ws.user("model.onnx").write_text("hello"), ws.signoff(candidate=ws.user("model.onnx")))[
            1
        ],
        "is not an ONNX model",
    ),
    Case(
        "candidate-other-onnx-model",
        "traceback",
        lambda ws: ws.signoff(candidate=tiny_onnx(ws.user("image.onnx"), input_name="pixel_values", rank=4)),
        "has inputs ['pixel_values'], not 'input_values'",
    ),
    Case(
        "candidate-wrong-rank",
        "traceback",
        lambda ws: ws.signoff(candidate=tiny_onnx(ws.user("r.onnx"), rank=3, out_rank=3)),
        "key 'input_values': must be a float tensor [batch, samples]",
    ),
    Case(
        "record-not-utf8",
        "traceback",
        lambda ws: (ws.record.write_bytes(b"\xff\xfe{}"), ["report", "--record", str(ws.record)])[1],
        "not UTF-8",
    ),
    Case(
        "record-wrong-shape",
        "traceback",
        lambda ws: (
            rewrite_record(ws.record, lambda r: r.update(candidates="fp32")),
            ["report", "--record", str(ws.record)],
        )[1],
        "key 'candidates': must be a list",
    ),
    Case(
        "record-gate-nan",
        "traceback",
        lambda ws: (
            rewrite_record(ws.record, lambda r: r["gates"].update(max_wer_delta_points=float("nan"))),
            ["report", "--record", str(ws.record)],
        )[1],
        "key 'gates' key 'max_wer_delta_points'",
    ),
    Case(
        "plan-not-utf8",
        "traceback",
        lambda ws: (
            ws.user("plan.json").write_bytes(b'{"name": "p\xe9"}'),
            [
                "compare",
                "--model",
                str(ws.model),
                "--calib-set",
                str(ws.calib),
                "--engines",
                str(ws.engines),
                "--plan",
                str(ws.user("plan.json")),
            ],
        )[1],
        "plan.json, line 1: not UTF-8",
    ),
    Case(
        "plan-unknown-precision",
        "traceback",
        lambda ws: (
            ws.user("plan.json").write_text('{"name": "p", "overrides": {"/MatMul": "int4"}}'),
            [
                "compare",
                "--model",
                str(ws.model),
                "--calib-set",
                str(ws.calib),
                "--engines",
                str(ws.engines),
                "--plan",
                str(ws.user("plan.json")),
            ],
        )[1],
        "key 'overrides' key '/MatMul': must be one of",
    ),
    Case(
        "stored-manifest-audio-escapes-set",
        "traceback",
        lambda ws: _stored_manifest(ws, lambda u: u.update(audio="../../outside/secret.txt")),
        "key 'audio': must be a path inside the set's folder",
    ),
    Case(
        "stored-manifest-duration-string",
        "traceback",
        lambda ws: _stored_manifest(ws, lambda u: u.update(duration_s="long")),
        "key 'duration_s': must be a finite number > 0",
    ),
    Case(
        "stored-set-edited-transcript",
        "changed-set",
        lambda ws: _changed_set(ws, lambda s: _edit_first_line(s, lambda u: u.update(text="SOMETHING ELSE"))),
        "set evil changed after it was carded",
    ),
    Case(
        "stored-set-repeated-row",
        "changed-set",
        lambda ws: _changed_set(ws, lambda s: _repeat_first_line(s)),
        "is listed twice in manifest.jsonl",
    ),
    Case(
        "stored-set-swapped-audio",
        "changed-set",
        lambda ws: _changed_set(ws, lambda s: _swap_first_audio(s)),
        "set evil changed after it was carded",
    ),
    Case(
        "stored-set-deleted-audio",
        "changed-set",
        lambda ws: _changed_set(ws, lambda s: _first_audio(s).unlink()),
        "listed in its manifest is missing",
    ),
    Case(
        "stored-set-audio-link",
        "link",
        lambda ws: _changed_set(ws, lambda s: _link_first_audio(s, ws.outside)),
        "is a link",
    ),
    Case(
        "stored-set-folder-link",
        "link",
        lambda ws: (
            shutil.copytree(ws.calib, ws.outside / "elsewhere"),
            (ws.sets / "evil").symlink_to(ws.outside / "elsewhere"),
            _calibrate_set(ws, ws.sets / "evil"),
        )[2],
        "speech set folder",
    ),
    Case(
        "plan-named-like-a-built-variant",
        "collision",
        lambda ws: (
            ws.user("plan.json").write_text('{"name": "INT8", "default": "fp16"}'),
            [
                "compare",
                "--model",
                str(ws.model),
                "--calib-set",
                str(ws.calib),
                "--engines",
                str(ws.engines),
                "--plan",
                str(ws.user("plan.json")),
            ],
        )[1],
        "the plan's name 'INT8' is reserved",
    ),
    Case(
        "sensitivity-not-an-object",
        "traceback",
        lambda ws: (
            ws.user("sens.json").write_text("[1, 2]"),
            ws.signoff("--sensitivity", str(ws.user("sens.json"))),
        )[1],
        "is not a sensitivity file",
    ),
]


# a damaged cache or sidecar, against each verb that reads caches: reported (list, prune), recalibrated (calibrate)
DAMAGE = {
    "cache-non-hex-scale": (_damage_cache_scale, "UNUSABLE: calibration cache "),
    "sidecar-truncated": (_truncate_sidecar, "UNUSABLE: calibration cache sidecar"),
}
VERBS: dict[str, tuple[Callable[[Workspace], list[str]], str, bool]] = {
    "list": (lambda ws: ["cache", "--root", str(ws.engines), "list"], "", False),
    "prune": (lambda ws: ["cache", "--root", str(ws.engines), "prune"], "would delete", False),
    "calibrate": (Workspace.calibrate, "previous cache not used", True),
}
CASES += [
    Case(
        f"{damage}-{verb}",
        "traceback",
        lambda ws, d=plant, a=argv: (d(ws), a(ws))[1],
        expect or listed,
        fix=True,
        repairs=repairs,
    )
    for damage, (plant, listed) in DAMAGE.items()
    for verb, (argv, expect, repairs) in VERBS.items()
]
# ------------------------------------------------------------------------------------------------ issue 32 item 5


def _external_data_candidate(ws: Workspace, truncate: bool) -> list[str]:
    """The FP32 candidate saved with its weights in a file beside it, then that file deleted or cut short."""
    model = onnx.load(str(ws.fp32))
    target = ws.user("ext") / "model.onnx"
    target.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(target), save_as_external_data=True, location="weights.bin", size_threshold=0)
    weights = target.parent / "weights.bin"
    if truncate:
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    else:
        weights.unlink()
    return ws.signoff(candidate=target)


def _failing_candidate(ws: Workspace) -> list[str]:
    """An ONNX model of the right shape that ONNX Runtime cannot run on the evaluation clips (reshape to 7 rows)."""
    x = helper.make_tensor_value_info("input_values", TensorProto.FLOAT, ["batch", "samples"])
    y = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 7, "frames"])
    shape = helper.make_tensor("shape", TensorProto.INT64, [3], [1, 7, -1])
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["input_values", "shape"], ["logits"])], "g", [x], [y], [shape]
    )
    path = ws.user("fails.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return ws.signoff(candidate=path)


def _truncated_safetensors(ws: Workspace) -> list[str]:
    """A copy of the model whose weights file lost its last bytes (the header still names them)."""
    model = ws.root / "models" / "cut"
    shutil.copytree(ws.model, model)
    weights = model / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-64])
    return [
        "calibrate",
        "--model",
        str(model),
        "--set",
        str(ws.calib),
        "--engines",
        str(ws.engines),
        "--no-recovery",
    ]


def _deleted_audio(ws: Workspace) -> list[str]:
    next((ws.eval / "audio").iterdir()).unlink()
    return ws.signoff("--limit", "6")


def _out_is_a_file(ws: Workspace, verb: str) -> list[str]:
    out = ws.user("taken.txt")
    out.write_text("a file the user keeps\n")
    if verb == "report":
        return ["report", "--record", str(ws.record), "--out", str(out)]
    if verb == "compare":
        return [
            "compare",
            "--model",
            str(ws.model),
            "--calib-set",
            str(ws.calib),
            "--engines",
            str(ws.engines),
        ] + [
            "--out",
            str(out),
        ]
    return [a if a != str(ws.root / "reports" / "new") else str(out) for a in ws.signoff()]


CASES += [
    Case(
        "candidate-external-data-missing",
        "traceback",
        lambda ws: _external_data_candidate(ws, False),
        "missing beside it",
    ),
    Case(
        "candidate-external-data-truncated",
        "traceback",
        lambda ws: _external_data_candidate(ws, True),
        "is truncated",
    ),
    Case("candidate-fails-at-run-time", "traceback", _failing_candidate, "ONNX Runtime failed running it"),
    Case(
        "model-safetensors-offsets-past-the-end",
        "traceback",
        _truncated_safetensors,
        "runs past the end of the file",
    ),
    Case("set-audio-deleted", "traceback", _deleted_audio, "listed in its manifest is missing; restore it"),
    Case(
        "report-out-is-a-file",
        "traceback",
        lambda ws: _out_is_a_file(ws, "report"),
        "is a file, not a folder",
    ),
    Case(
        "compare-out-is-a-file",
        "traceback",
        lambda ws: _out_is_a_file(ws, "compare"),
        "is a file, not a folder",
    ),
    Case(
        "signoff-out-is-a-file",
        "traceback",
        lambda ws: _out_is_a_file(ws, "signoff"),
        "is a file, not a folder",
    ),
    Case(
        "report-out-unwritable",
        "traceback",
        lambda ws: ["report", "--record", str(ws.record), "--out", "/sys/workbench-report"],
        "cannot be written",
    ),
]


CASES.append(
    Case(
        "cache-non-hex-scale-show",
        "traceback",
        lambda ws: (_damage_cache_scale(ws), ["cache", "show", str(ws.cache)])[1],
        "line 2: is not 'name: 8 hex digits'",
    )
)


def _same_histograms(a: Path, b: Path) -> bool:
    """The same tensors with the same counts and maxima (the order of tensors in the file may differ between runs)."""
    x, y = histograms.load(a), histograms.load(b)
    return sorted(x.names) == sorted(y.names) and all(
        np.array_equal(x.counts[x.index(n)], y.counts[y.index(n)])
        and x.amax[x.index(n)] == y.amax[y.index(n)]
        for n in x.names
    )


@pytest.mark.parametrize("case", CASES, ids=[f"{c.klass}:{c.id}" for c in CASES])
def test_bad_input(case: Case, ws: Workspace, capsys) -> None:
    pristine = snapshot(ws.root, ws.outside)
    pristine_hist = ws.root.parent / "pristine.hist.npz"
    shutil.copy(histograms.histogram_path(ws.cache), pristine_hist)
    argv = case.plant(ws)
    planted = snapshot(ws.root, ws.outside)
    capsys.readouterr()
    status = main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    if not case.fix:
        lines = err.strip().splitlines()
        assert status == 1, (out, err)
        assert len(lines) == 1 and lines[0].startswith("error: "), err
        assert case.expect in lines[0], lines[0]
        assert snapshot(ws.root, ws.outside) == planted  # nothing inside or outside changed
        return
    assert status == 0, err
    assert case.expect in out, out
    after = snapshot(ws.root, ws.outside)
    if not case.repairs:  # reported, nothing changed (a killed build's hidden leftover is removed)
        assert after == {k: v for k, v in planted.items() if ".pending" not in k}
        return
    # calibrate rewrote the damaged cache and its sidecars: every file is back to the pristine bytes (histograms,
    # whose zip entries carry a time stamp, by content)
    hist = f"ws/{histograms.histogram_path(ws.cache).relative_to(ws.root).as_posix()}"
    assert {k: v for k, v in after.items() if k != hist} == {k: v for k, v in pristine.items() if k != hist}
    assert _same_histograms(histograms.histogram_path(ws.cache), pristine_hist)


# ------------------------------------------------------------------------------------------------ regressions


def test_prune_yes_never_deletes_through_a_symlinked_folder(ws: Workspace, capsys) -> None:
    """Regression: ``cache prune --yes`` followed engines/<link>/ and deleted a stale-looking cache outside."""
    victim = ws.outside / "elsewhere"
    victim.mkdir()
    (victim / "x.cache").write_text("TRT-100300-EntropyCalibration2\n")
    (ws.engines / "link").symlink_to(victim, target_is_directory=True)
    stale = ws.run / "calib-stale-entropy.cache"  # a genuinely unusable cache inside: it is deleted
    stale.write_text("TRT-100300-EntropyCalibration2\n")
    assert main(["cache", "--root", str(ws.engines), "prune"]) == 0
    dry = capsys.readouterr().out
    assert "would delete" in dry and str(stale) in dry and "link" not in dry and "x.cache" not in dry
    assert main(["cache", "--root", str(ws.engines), "prune", "--yes"]) == 0
    assert not stale.exists() and (victim / "x.cache").is_file() and (ws.engines / "link").is_symlink()


def test_record_paths_are_not_hashed_outside_the_workspace(ws: Workspace, capsys) -> None:
    """Regression: the Sign-off page hashed any path a report.json named and showed the hash prefix."""
    from workbench.artifact_paths import artifact_roots
    from workbench.dashboard.data.reports import input_problems, load_report

    secret = ws.outside / "secret.txt"
    _record_points(ws, "candidate fp16", str(secret))
    view = load_report("unit-signoff", artifact_roots())
    problems = input_problems(view)
    assert any("candidate fp16" in p and "outside the workspace" in p for p in problems)
    assert sha256_file(secret)[:12] not in " ".join(problems)
    assert main(["report", "--record", str(ws.record)]) == 1
    assert sha256_file(secret)[:12] not in capsys.readouterr().err


def test_a_record_of_the_embedded_model_re_renders_and_is_still_checked(ws: Workspace, capsys) -> None:
    """A sign-off of the embedded default model records the package's own model folder: ``report`` re-renders
    it (it was refused as outside the workspace), still refuses it when that folder's hash is not the recorded
    one, and any other folder of the package stays outside."""
    from workbench.report.record import artifact_entry
    from workbench.resources import demo_model_dir

    shipped = artifact_entry("model", demo_model_dir(), "model")
    again = ["report", "--record", str(ws.record), "--out", str(ws.root / "reports" / "again")]

    def model_entry(entry: dict) -> None:
        def change(record: dict) -> None:
            for item in record["provenance"]["artifacts"]:
                if item["role"] == "model":
                    item.update(entry)

        rewrite_record(ws.record, change)

    model_entry(shipped)
    assert main(again) == 0, capsys.readouterr().err
    assert "verdict:" in capsys.readouterr().out
    model_entry({**shipped, "sha256": "0" * 64})
    assert main(again) == 1
    assert f"model: {shipped['path']} changed" in capsys.readouterr().err
    model_entry({**shipped, "path": str(demo_model_dir().parent)})
    assert main(again) == 1
    assert "lies outside the workspace" in capsys.readouterr().err


def test_search_record_paths_outside_the_model_folder_are_ignored(ws: Workspace) -> None:
    """A search JSON naming a plan ONNX outside its model's folder is not offered (nor hashed) to the sign-off."""
    from workbench.search.found import matching_search

    search = next((ws.run / "compare").glob("search-*.json"))
    data = json.loads(search.read_text())
    plan_onnx = ws.run / Path(data["found"]["onnx_path"]).name
    assert matching_search(ws.fp32, ws.cache) is None  # the copy's search still names the original's files
    data["found"]["onnx_path"] = str(plan_onnx)
    data["sensitivity_path"] = str(ws.run / "compare" / Path(data["sensitivity_path"]).name)
    search.write_text(json.dumps(data))
    found = matching_search(ws.fp32, ws.cache)
    assert found is not None and found.onnx == plan_onnx and found.sensitivity is not None
    outside_copy = ws.outside / "plan.onnx"
    shutil.copy(plan_onnx, outside_copy)  # same bytes, same hash: only the place differs
    data["found"]["onnx_path"] = str(outside_copy)
    search.write_text(json.dumps(data))
    assert matching_search(ws.fp32, ws.cache) is None


def test_recovery_leaves_a_live_writer_and_foreign_folders_alone(tmp_path) -> None:
    import fcntl

    from workbench import journal

    parent = tmp_path / ".pair-calib.live.pending"
    (parent / "new" / "pair-calib").mkdir(parents=True)
    fd = os.open(parent / journal.WRITER_LOCK, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        assert journal.recover(tmp_path) == [] and parent.is_dir()
    finally:
        os.close(fd)
    assert journal.recover(tmp_path) == ["removed the unfinished write .pair-calib.live.pending"]
    assert not parent.exists()
    users_own = tmp_path / ".notes.pending"  # a hidden folder that is not a journal parent: never touched
    (users_own / "new").mkdir(parents=True)
    damaged = tmp_path / ".pair-eval.dmg.pending"  # a parent whose journal names a path: left alone, reported
    (damaged / "new").mkdir(parents=True)
    (damaged / journal.WRITER_LOCK).write_text("")
    (damaged / journal.JOURNAL).write_text('{"names": ["../../elsewhere"]}')
    assert journal.recover(tmp_path) == [
        "left .pair-eval.dmg.pending alone: its journal is damaged; remove it by hand"
    ]
    assert users_own.is_dir() and damaged.is_dir()


# ------------------------------------------------------------------------------------------------ kill test


def _pair_hashes(root: Path) -> tuple[str, str]:
    from workbench.speech.store import load_set, verify_set

    return verify_set(load_set(root / "pair-calib")), verify_set(load_set(root / "pair-eval"))


@pytest.mark.slow
def test_killed_pair_write_is_completed_or_rolled_back_at_every_step(tmp_path, capsys, request) -> None:
    """SIGKILL ``data build`` after each step of the pair write (``WORKBENCH_KILL_AT_STEP``); the next run sees the
    old pair or the new pair, never a mix, no hidden folder is left or listed, and a bystander set is untouched."""
    from workbench import journal

    manifest = write_manifest(tmp_path / "audio")
    reference = tmp_path / "reference"  # the new pair, built without a kill
    assert main(build_args(manifest, reference, seed=1)) == 0
    new = _pair_hashes(reference)
    pristine = tmp_path / "pristine"
    assert main(build_args(manifest, pristine, seed=0)) == 0
    assert main(build_args(manifest, pristine, name="bystander", seed=2)) == 0
    old = _pair_hashes(pristine)
    assert old[0] != new[0] and old[1] != new[1]
    bystander = snapshot(pristine / "bystander-calib", pristine / "bystander-eval")
    capsys.readouterr()
    # each build in a fresh process forked from one helper that imported the sets job once
    zygote = Zygote(tmp_path / "zygote", preload=("workbench.jobs.sets",))
    request.addfinalizer(zygote.close)
    steps: list[str] = []
    for k in range(1, 40):
        root = tmp_path / f"run{k}"
        shutil.copytree(pristine, root)
        status, out, _ = zygote.run(
            build_args(manifest, root, seed=1, replace=True), root, env={journal.KILL_ENV: str(k)}
        )
        if status == 0:  # ran past the last step
            assert _pair_hashes(root) == new
            break
        assert status == -9, out[-3000:]
        (killed,) = [line for line in out.splitlines() if line.startswith("killed at step ")]
        steps.append(killed)
        # the next run of the verb (data list) finishes or discards the write; nothing hidden is listed or left
        assert main(["data", "list", "--root", str(root)]) == 0
        listed = capsys.readouterr().out
        assert [line.split()[0] for line in listed.splitlines() if " utts " in line] == [
            "bystander-calib",
            "bystander-eval",
            "pair-calib",
            "pair-eval",
        ]
        assert sorted(p.name for p in root.iterdir()) == [
            "bystander-calib",
            "bystander-eval",
            "pair-calib",
            "pair-eval",
        ]
        assert _pair_hashes(root) in (old, new), steps[-1]
        assert snapshot(root / "bystander-calib", root / "bystander-eval") == bystander
        committed = any("journal" in s for s in steps)
        assert _pair_hashes(root) == (new if committed else old), steps[-1]
        if steps[-1].endswith(
            "renamed the temporary parent for removal"
        ):  # killed while removing the old pair
            assert "left by an interrupted clean-up" in listed, listed
        elif not steps[-1].endswith("removed the temporary parent"):
            assert (
                "completed the interrupted write of pair-calib, pair-eval"
                if committed
                else "removed the unfinished write .pair-calib."
            ) in listed, listed
        shutil.rmtree(root)
    else:
        pytest.fail("the build never finished")
    labels = [s.split(": ", 1)[1] for s in steps]
    assert labels == [
        "made the temporary folders",
        "wrote the audio of pair-calib",
        "wrote pair-calib",
        "wrote the audio of pair-eval",
        "wrote pair-eval",
        "wrote every folder",
        "wrote the journal",
        "moved old pair-calib aside",
        "moved new pair-calib into place",
        "moved old pair-eval aside",
        "moved new pair-eval into place",
        "renamed the temporary parent for removal",
        "removed the temporary parent",
    ]

"""Artifacts for the dashboard tests, made by the real code paths under one temporary artifact root:
two small speech sets (the store's writer), a tiny random Wav2Vec2ForCTC, its calibration (export,
entropy cache + histogram sidecar, INT8 variant) and FP16 variant, a sign-off record of the three, and the
``compare`` (layer table, sensitivity ranking) and ``search`` outputs, made by those verbs in this process.

``serve`` starts a real Streamlit server (``streamlit run`` or ``python -m workbench dashboard``) as a
subprocess in its own session, waits for its health endpoint and always kills its process group."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from workbench.speech.store import SpeechSet


CALIB_TEXTS = [
    "THE CAT SAT",
    "A DOG RAN HOME",
    "RED SKY AT NIGHT",
    "OPEN THE DOOR",
    "SMALL BIRDS SING",
    "COLD WATER",
]
EVAL_TEXTS = ["HELLO WORLD", "GOOD MORNING", "THE SUN IS UP", "READ THE BOOK", "WARM BREAD", "BLUE SEA"]


def write_unit_set(
    folder: Path,
    texts: list[str],
    speech_like: Callable[..., np.ndarray],
    seed: int = 0,
    seconds: tuple[float, float] = (1.2, 4.5),
) -> SpeechSet:
    """A stored set (the store's own writer) whose records carry SNR, level, noise kind and accent like a
    built set's, so every Sets-page chart has data; conditions and buckets (clip lengths ``seconds``: short,
    long) cycle deterministically."""
    from workbench.speech.records import Clip, Utterance
    from workbench.speech.store import write_set

    conditions, accents = ("quiet", "noisy", "accented"), {"quiet": "us", "noisy": "us", "accented": "gb"}
    clips = []
    for i, text in enumerate(texts):
        cond = conditions[i % 3]
        length = seconds[0] if (i // 3) % 2 == 0 else seconds[1]
        snr = 35.0 + i if cond != "noisy" else 5.0 + 2 * i
        utt = Utterance(
            id=f"{folder.name}-{i:03d}",
            text=text,
            speaker=f"spk{seed}{i % 4}",
            voice=f"voice{i % 4}",
            accent=accents[cond] if i % 5 else "scottish" * (cond == "accented") or accents[cond],
            condition=cond,
            duration_s=length,
            source="unit",
            snr_db=snr,
            requested_snr_db=round(snr),
            noise_kind="pink" if cond == "noisy" else None,
            level_dbfs=-30.0 + i,
            bucket="short" if length == seconds[0] else "long",
        )
        clips.append(Clip(utt, speech_like(length, seed=seed * 100 + i)))
    return write_set(folder, clips, {"how": "dashboard test fixture", "seed": seed}, [], {})


@dataclass
class DashArtifacts:
    root: Path
    calib: Any  # SpeechSet
    eval: Any
    model: Path
    calibrated: Any  # CalibrateResult
    fp16: Path
    record: dict
    report_dir: Path


def build_artifacts(root: Path, speech_like: Callable[..., np.ndarray]) -> DashArtifacts:
    from workbench.calibration.methods import MethodSpec
    from workbench.cli import main
    from workbench.config import EvidenceConfig
    from workbench.evaluate.gates import GateConfig
    from workbench.evaluate.latency import LatencyConfig
    from workbench.jobs import calibrate
    from workbench.jobs.signoff import SignoffInputs
    from workbench.jobs.signoff import run as run_signoff
    from workbench.model.synthetic import save_random_wav2vec2

    root = Path(root)
    for area in ("calib_sets", "engines", "reports", "models"):
        (root / area).mkdir(parents=True, exist_ok=True)
    calib = write_unit_set(root / "calib_sets" / "unit-calib", CALIB_TEXTS, speech_like, seed=0)
    evaluation = write_unit_set(root / "calib_sets" / "unit-eval", EVAL_TEXTS, speech_like, seed=1)
    model = save_random_wav2vec2(root / "models" / "tiny", "tiny", seed=0)
    calibrated = calibrate.run(
        calibrate.CalibrateInputs(
            model, str(calib.path), MethodSpec("entropy"), engines=root / "engines", parity_clips=2
        )
    )
    fp16 = calibrated.fp16_onnx
    report_dir = root / "reports" / "unit-signoff"
    inputs = SignoffInputs(
        candidates=[("fp32", calibrated.fp32_onnx), ("fp16", fp16), ("int8-entropy", calibrated.int8_onnx)],
        eval_set=evaluation,
        out_dir=report_dir,
        model=calibrated.model,
        calib_set=calib,
        cache=calibrated.cache,
        latency=LatencyConfig((1,), 0, 2),
        threads=1,
        resamples=200,
        gates=GateConfig(max_latency_ms=10_000.0),  # a latency gate every candidate meets
        evidence=EvidenceConfig(min_speakers=0, min_reference_words=0),  # a unit-sized set
        target="ort-cpu",
        as_given=True,  # these files, not the CPU flavours (tests/test_cpu_target.py judges those)
    )  # timed on the target: the verdict ships a winner
    record = run_signoff(inputs).record
    common = [
        "--model",
        str(model),
        "--calib-set",
        str(calib.path),
        "--method",
        "entropy",  # the cache calibrated above (no accuracy recovery)
        "--no-recovery",
        "--engines",
        str(root / "engines"),
        "--per-condition",
        "1",
        "--no-progress",
        "--threads",
        "1",
    ]
    if main(["compare", *common]) != 0 or main(["search", *common, "--resamples", "200"]) != 0:
        raise RuntimeError("compare/search failed on the dashboard fixture")
    return DashArtifacts(root, calib, evaluation, model, calibrated, fp16, record, report_dir)


def copy_artifacts(src: Path, root: Path, edit: Callable[[dict], None] | None = None) -> Path:
    """A private copy of the fixture artifacts whose record points at the copy (re-digested like signoff does);
    ``edit`` may change each provenance entry of the copy's record."""
    import json
    import shutil

    from workbench.report.record import record_digest

    shutil.copytree(src, root, symlinks=True)
    record_path = root / "reports" / "unit-signoff" / "report.json"
    record = json.loads(record_path.read_text())
    for entry in record["provenance"]["artifacts"]:
        entry["path"] = entry["path"].replace(str(src), str(root))
        if edit is not None:
            edit(entry)
    record["record_sha256"] = record_digest(record)
    record_path.write_text(json.dumps(record))
    return root


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM the server's whole process group, SIGKILL it if it lingers."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    except ProcessLookupError:
        pass


@dataclass
class Server:
    proc: subprocess.Popen
    url: str
    log: Path


@contextlib.contextmanager
def serve(
    argv: list[str], port: int, cwd: Path, env: dict[str, str], log: Path, timeout_s: float = 90
) -> Iterator[Server]:
    """Run ``argv`` (a Streamlit server on ``port``) until its health endpoint answers; kill it afterwards.

    The health check goes to 127.0.0.1, so it only succeeds for a server that listens there.
    """
    handle = open(log, "wb")  # noqa: SIM115 (closed after the server stops)
    proc = subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                handle.flush()
                raise RuntimeError("streamlit did not start:\n" + log.read_text()[-3000:])
            time.sleep(0.3)
        yield Server(proc, url, log)
    finally:
        stop(proc)
        handle.close()

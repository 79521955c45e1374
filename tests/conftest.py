"""Shared pytest fixtures for the workbench's test suite.

Fixtures (reuse them in later test files instead of building your own sets):

- ``tiny_config`` (session): a ``SetBuildConfig`` named ``tiny`` with 4 calibration and 2 evaluation
  utterances per condition (so 2 and 1 per condition x duration bucket), seed 0, 2 workers.
- ``tiny_sets`` (session): ``BuiltSets`` made once from synthetic speech (espeak-ng / flite /
  festival) with ``tiny_config`` under a session temporary folder; ``tiny_sets.calib`` and
  ``tiny_sets.eval`` are stored ``SpeechSet`` objects (``.path``, ``.card``, ``.utterances``,
  ``.iter_audio()``), ``tiny_sets.checks`` holds the disjointness report. Treat it as read-only;
  copy the folder (``shutil.copytree``) before modifying anything.
- ``tiny_root`` (session): the folder holding ``tiny-calib`` and ``tiny-eval``.
- ``write_wav`` (function): ``write_wav(path, samples, rate=16000, subtype="PCM_16")`` writes an
  audio file with soundfile (format from the suffix) and returns the path.
- ``demo_onnx`` (session): the shipped demo model exported once to FP32 ONNX (its description in the metadata,
  as ``export_onnx`` writes it), for tests that run the demo model's graph; skips when the demo model is absent.
  Read-only.
- ``speech_like`` (function): ``speech_like(seconds, rate=16000, seed=0)`` returns a float32
  signal with a speech-like spectrum and envelope (harmonics of a gliding pitch, amplitude bursts),
  for sources and conditions that need non-silent audio without running TTS.

Tests that need TTS voices skip with a clear reason when no engine is installed (``./setup.sh``
installs them); everything else runs with the Python dependencies alone.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from workbench.config import SetBuildConfig


@pytest.fixture(scope="session")
def tiny_config() -> SetBuildConfig:
    return SetBuildConfig(name="tiny", calib_per_condition=4, eval_per_condition=2, seed=0, workers=2)


@pytest.fixture(scope="session")
def tiny_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("calib_sets")


@pytest.fixture(scope="session")
def tiny_sets(tiny_config: SetBuildConfig, tiny_root: Path):
    from workbench.speech.builder import build_synthetic_sets
    from workbench.speech.tts import available_voices

    if not available_voices():
        pytest.skip("no TTS engine installed (run ./setup.sh)")
    return build_synthetic_sets(tiny_config, root=tiny_root)


def _speech_like(seconds: float, rate: int = 16_000, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(int(round(seconds * rate))) / rate
    f0 = 120 + 30 * np.sin(2 * np.pi * 0.7 * t + rng.uniform(0, 6.28))
    phase = 2 * np.pi * np.cumsum(f0) / rate
    voiced = sum((0.7**k) * np.sin((k + 1) * phase) for k in range(8))
    envelope = 0.5 + 0.5 * np.sin(2 * np.pi * 3.0 * t + rng.uniform(0, 6.28)) ** 2
    signal = voiced * envelope + 0.05 * rng.standard_normal(len(t))
    return (0.3 * signal / np.max(np.abs(signal))).astype(np.float32)


@pytest.fixture
def speech_like() -> Callable[..., np.ndarray]:
    return _speech_like


@pytest.fixture
def write_wav() -> Callable[..., Path]:
    def write(path: Path, samples: np.ndarray, rate: int = 16_000, subtype: str = "PCM_16") -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        sf.write(str(path), samples, rate, subtype=subtype)
        return path

    return write


@pytest.fixture(scope="session")
def demo_onnx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from workbench.model.description import describe_model
    from workbench.model.export import export_onnx
    from workbench.model.loading import load_model
    from workbench.resources import demo_model_dir

    if not (demo_model_dir() / "config.json").exists():
        pytest.skip(f"demo model not present in {demo_model_dir()}")
    model = describe_model(demo_model_dir())
    return export_onnx(load_model(model), tmp_path_factory.mktemp("demo_onnx") / "demo.onnx", model)


@pytest.fixture(scope="session")
def dash_artifacts(tmp_path_factory: pytest.TempPathFactory):
    """Dashboard artifacts under one root (``tests/dashkit.py``): two small sets, a tiny model's calibration
    (cache + histograms, FP32/FP16/INT8 ONNX) and a sign-off record of the three. Read-only."""
    from dashkit import build_artifacts

    return build_artifacts(tmp_path_factory.mktemp("artifacts"), _speech_like)

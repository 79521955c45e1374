"""The GPU sign-off benchmark's model choice (benchmarks/gpu_signoff.py --model) and its scale comparison."""

from __future__ import annotations

import json
from pathlib import Path

from benchkit import load_benchmark


def load_script():
    return load_benchmark("gpu_signoff.py", "gpu_signoff_benchmark")


def test_a_size_builds_a_random_model_once_and_says_its_weights_are_random(tmp_path: Path) -> None:
    bench = load_script()
    folder, line = bench.model_folder("tiny", tmp_path)
    assert folder == tmp_path / "models" / "tiny-random"
    assert json.loads((folder / "config.json").read_text())["hidden_size"] == 64
    assert "RANDOM weights" in line and "not recognition quality" in line
    stamp = (folder / "model.safetensors").stat().st_mtime_ns
    assert bench.model_folder("tiny", tmp_path)[0] == folder
    assert (folder / "model.safetensors").stat().st_mtime_ns == stamp  # reused, not rebuilt


def test_demo_is_the_shipped_model(tmp_path: Path) -> None:
    from workbench.resources import demo_model_dir

    bench = load_script()
    folder, line = bench.model_folder("demo", tmp_path)
    assert folder == demo_model_dir() and "trained" in line
    assert not (tmp_path / "models").exists()


def test_scale_comparison_flags_a_max_scale_past_the_relative_tolerance() -> None:
    bench = load_script()
    cpu = {"a": 1.0, "b": 0.065602}
    gpu = {"a": 1.0005, "b": 0.065509}  # b: 1.4e-3 relative, the base-size run's outlier
    result = bench.compare_scales(cpu, gpu, cpu, "max")
    assert result["within_tolerance"] == 1 and [r["tensor"] for r in result["outside"]] == ["b"]

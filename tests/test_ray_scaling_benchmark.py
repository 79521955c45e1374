"""The Ray scaling benchmark's own parts (benchmarks/ray_scaling.py): every function it times exists under the name it
wraps (a renamed job function would fail every configuration at start, on a lent machine), and its arithmetic."""

from __future__ import annotations

import subprocess
import sys

import pytest
from benchkit import BENCHMARKS, load_benchmark


def test_every_timed_function_exists_under_the_name_the_benchmark_wraps() -> None:
    # in a child process: instrument() replaces the job modules' functions for the rest of the process
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('ray_scaling_bench', {str(BENCHMARKS / 'ray_scaling.py')!r})\n"
        "m = importlib.util.module_from_spec(spec); sys.modules[spec.name] = m; spec.loader.exec_module(m)\n"
        "m.instrument(m.Clock()); print('instrumented')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "instrumented" in done.stdout, done.stderr[-2000:]


def test_speed_up_efficiency_and_the_sharded_part() -> None:
    bench = load_benchmark("ray_scaling.py", "ray_scaling_bench")
    serial = {"wall_s": 100.0, "seconds": {"work": 80.0}}
    spread = {"wall_s": 25.0, "seconds": {"sharded": 12.5}}
    row = bench.derived(serial, spread, 8)
    assert row["speedup"] == 4.0 and row["efficiency"] == 0.5
    assert row["sharded_speedup"] == pytest.approx(6.4) and row["sharded_efficiency"] == pytest.approx(0.8)
    assert row["serial_fraction_kept"] == 0.5 and row["serial_run_outside_work"] == 0.2
    assert "sharded_speedup" not in bench.derived(serial, {"wall_s": 25.0, "seconds": {}}, 8)

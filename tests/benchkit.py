"""Load a script under benchmarks/ as a module, so tests can call its pure parts and its main()."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load_benchmark(script: str, module_name: str) -> ModuleType:
    """``benchmarks/<script>`` imported under ``module_name`` (registered in ``sys.modules`` first:
    dataclasses resolve their annotations through it)."""
    spec = importlib.util.spec_from_file_location(module_name, BENCHMARKS / script)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module

"""ModelOpt's own virtual environment: ``python -m venv --system-site-packages`` (it sees the project's packages)
and ``pip install "nvidia-modelopt[onnx]"`` into it, never into the project's environment (its ONNX extra pins
other onnx / onnxruntime versions). A venv whose check import already works is reused. When it cannot be made
the result says why, and the benchmark writes a skipped row with that reason."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REQUIREMENT = "nvidia-modelopt[onnx]"
CHECK = (
    "import json, importlib.metadata as m, modelopt.onnx.quantization; "
    "print(json.dumps({p: m.version(p) for p in ('nvidia-modelopt', 'onnx', 'onnxruntime-gpu', 'onnxruntime') "
    "if any(d.metadata['Name'] == p for d in m.distributions())}))"
)


@dataclass(frozen=True)
class Venv:
    """The venv's python when usable (``reason`` None), else the reason; the versions it resolved."""

    python: Path | None
    reason: str | None = None
    versions: str | None = None
    installed_s: float | None = None


def _tail(text: str, lines: int = 3) -> str:
    kept = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return " | ".join(kept[-lines:]) or "(no output)"


def _check(python: Path, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), "-c", CHECK], capture_output=True, text=True, timeout=timeout)


def ensure_venv(
    folder: Path, requirement: str = REQUIREMENT, pip_args: tuple[str, ...] = (), timeout: float = 1800.0
) -> Venv:
    """A venv at ``folder`` in which ``modelopt.onnx.quantization`` imports, or the reason there is none.

    The venv is made without its own pip (``--without-pip``): the project's pip, visible through the system
    site-packages, installs into the venv's prefix when run by the venv's python."""
    import time

    python = folder / "bin" / "python"
    started = time.perf_counter()
    try:
        if python.exists() and (done := _check(python, 300)).returncode == 0:
            return Venv(python, versions=done.stdout.strip())
        made = subprocess.run(
            [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(folder)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if made.returncode != 0:
            return Venv(None, f"could not create the venv {folder}: {_tail(made.stderr)}")
        pip = subprocess.run(
            [str(python), "-m", "pip", "install", "--disable-pip-version-check", *pip_args, requirement],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if pip.returncode != 0:
            return Venv(
                None, f"pip install {requirement!r} into {folder} failed: {_tail(pip.stderr or pip.stdout)}"
            )
        done = _check(python, 300)
        if done.returncode != 0:
            return Venv(
                None,
                f"{requirement} installed but modelopt.onnx.quantization does not import: "
                f"{_tail(done.stderr)}",
            )
    except subprocess.TimeoutExpired as exc:
        return Venv(None, f"{' '.join(map(str, exc.cmd[:4]))} ... timed out after {exc.timeout:.0f} s")
    except OSError as exc:
        return Venv(None, f"could not run the venv's python: {exc}")
    return Venv(python, versions=done.stdout.strip(), installed_s=round(time.perf_counter() - started, 1))

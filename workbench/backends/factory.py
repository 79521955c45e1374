"""One way to get a runner for a backend name: ``ort-cpu``, ``ort-cuda`` or ``tensorrt``.

Every job that runs a model (calibrate, compare, search, signoff) takes ``--backend`` and asks this module for
its runner or its ONNX Runtime providers, so all of them share one runner life cycle (activate, infer,
deactivate, last inference time; ``workbench.backends.base``) and every record says which backend and device
produced its numbers (``Runner.describe``: ``backend_name`` and ``device``). ``check_backend`` refuses a backend
this machine cannot run with one ``error:`` line that says what to install or use instead, before any work.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from workbench.backends.base import Runner
from workbench.backends.devices import cuda_device
from workbench.config import BACKENDS, DEFAULT_BACKEND
from workbench.errors import WorkbenchError
from workbench.optional import try_import

if TYPE_CHECKING:
    from workbench.backends.tensorrt.builder import BuildSettings

ORT_PROVIDERS: dict[str, tuple[str, ...]] = {
    "ort-cpu": ("CPUExecutionProvider",),
    "ort-cuda": ("CUDAExecutionProvider", "CPUExecutionProvider"),  # CPU takes the ops CUDA lacks
}
# TensorRT-RTX runs on GeForce/RTX-class GPUs; its runtime refuses data-centre Hopper (checked on an H200)
RTX_REFUSED_CAPABILITIES: tuple[tuple[int, int], ...] = ((9, 0),)
CUDA_HINT = (
    "install onnxruntime-gpu (pip install 'workbench[gpu]', CUDA 12/13 build matching the driver) on a "
    "machine with an NVIDIA GPU, or use --backend ort-cpu"
)


def _known(name: str) -> str:
    if name not in BACKENDS:
        raise WorkbenchError(f"unknown backend {name!r}: use one of {', '.join(BACKENDS)}")
    return name


def ort_providers(name: str = DEFAULT_BACKEND) -> list[str]:
    """The ONNX Runtime execution providers of an ONNX Runtime backend (checked to exist here)."""
    check_backend(name)
    if name not in ORT_PROVIDERS:
        raise WorkbenchError(
            f"backend {name} does not run ONNX Runtime sessions; this step needs --backend "
            f"{' or '.join(ORT_PROVIDERS)} (TensorRT engines expose no intermediate tensors)"
        )
    return list(ORT_PROVIDERS[name])


def check_backend(name: str) -> None:
    """Refuse, with what to do, a backend that cannot run on this machine."""
    _known(name)
    if name in ORT_PROVIDERS:
        ort, why = try_import("onnxruntime")
        if ort is None:
            raise WorkbenchError(
                f"--backend {name} needs onnxruntime, which is {why}: pip install onnxruntime"
            )
        available = ort.get_available_providers()
        missing = [p for p in ORT_PROVIDERS[name] if p not in available]
        if missing:
            raise WorkbenchError(
                f"--backend {name} needs ONNX Runtime's {missing[0]}, which this onnxruntime "
                f"{ort.__version__} lacks (it has {', '.join(available)}): {CUDA_HINT}"
            )
        return
    from workbench.backends.tensorrt.loader import load_tensorrt

    trt = load_tensorrt()
    has_gpu, device = cuda_device()
    if not has_gpu:
        raise WorkbenchError(
            f"--backend tensorrt runs engines on an NVIDIA GPU, and here {device}; {trt.flavour} "
            f"{trt.version} can still build engines without one (python -m workbench build); "
            "judge them with --backend ort-cpu/ort-cuda here, or run on a GPU machine"
        )
    if trt.is_rtx:
        import torch

        capability = torch.cuda.get_device_capability(0)
        if tuple(capability) in RTX_REFUSED_CAPABILITIES:
            raise WorkbenchError(
                f"--backend tensorrt: only {trt.flavour} {trt.version} is installed and its runtime "
                f"refuses {device}; install full TensorRT (10.x or 11.x) for this GPU, or use "
                "--backend ort-cuda"
            )


@dataclass(frozen=True)
class RunnerFactory:
    """Makes the runners of one backend. ``tensorrt`` builds (or reuses) an engine per ONNX file first, with
    ``build`` (a ``BuildSettings``; profile from the evaluation set's durations) into ``engines``."""

    backend: str = DEFAULT_BACKEND
    threads: int | None = None
    engines: Path | None = None
    build: BuildSettings | None = None
    built: dict = field(default_factory=dict, compare=False)  # ONNX path -> BuildResult (tensorrt)

    def __post_init__(self) -> None:
        _known(self.backend)

    def check(self) -> None:
        check_backend(self.backend)

    def engine_of(self, model: Path) -> Path:
        """The engine built for ``model`` (tensorrt; after ``runner``)."""
        return self.built[str(Path(model).resolve())].engine_path

    def runner(self, model: Path, name: str) -> Runner:
        """A runner for ``model`` (an ONNX file); not yet activated."""
        if self.backend in ORT_PROVIDERS:
            from workbench.backends.onnxruntime import OnnxRuntimeRunner

            return OnnxRuntimeRunner(
                Path(model),
                providers=ORT_PROVIDERS[self.backend],
                threads=self.threads,
                name=name,
                backend_name=self.backend,
            )
        from workbench.backends.tensorrt.builder import BuildSettings, build_engine
        from workbench.backends.tensorrt.runner import TensorRTRunner

        key = str(Path(model).resolve())
        if key not in self.built:
            self.built[key] = build_engine(Path(model), self.build or BuildSettings(), self.engines)
        return TensorRTRunner(self.built[key].engine_path, name=name)

"""ONNX Runtime runner: CPU by default, CUDA when onnxruntime-gpu is installed and asked for."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from workbench.backends.base import Runner
from workbench.errors import WorkbenchError


def session_options(threads: int | None = None, optimization: str = "all"):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    levels = {
        "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }
    opts.graph_optimization_level = levels[optimization]
    if threads:
        opts.intra_op_num_threads = threads
    opts.log_severity_level = 3
    return opts


class OnnxRuntimeRunner(Runner):
    backend = "onnxruntime"

    def __init__(self, model: Path | bytes, providers: Sequence[str] = ("CPUExecutionProvider",),
                 threads: int | None = None, optimization: str = "all", name: str | None = None) -> None:
        super().__init__()
        self.model = model
        self.providers = list(providers)
        self.threads = threads
        self.optimization = optimization
        self.name = name or (Path(model).name if not isinstance(model, bytes) else "onnx-model")
        self.session = None

    def activate_impl(self) -> None:
        import onnxruntime as ort

        available = ort.get_available_providers()
        missing = [p for p in self.providers if p not in available]
        if missing:
            raise WorkbenchError(f"ONNX Runtime providers {missing} are not available here (have {available}); "
                                 "for CUDA install onnxruntime-gpu: pip install 'workbench[gpu]'")
        src = self.model if isinstance(self.model, bytes) else str(self.model)
        self.session = ort.InferenceSession(src, session_options(self.threads, self.optimization),
                                            providers=self.providers)

    def infer_impl(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        assert self.session is not None
        names = [o.name for o in self.session.get_outputs()]
        values = self.session.run(names, dict(feeds))
        return dict(zip(names, values))

    def deactivate_impl(self) -> None:
        self.session = None

    @property
    def input_names(self) -> list[str]:
        assert self.session is not None
        return [i.name for i in self.session.get_inputs()]

    def describe(self) -> dict[str, str]:
        import onnxruntime as ort

        return {"runner": self.name, "backend": self.backend, "providers": ",".join(self.providers),
                "onnxruntime": ort.__version__, "optimization": self.optimization,
                "threads": str(self.threads or "default")}

"""ONNX Runtime runner: CPU by default, CUDA when onnxruntime-gpu is installed and asked for; and a CPU session
that also returns any intermediate tensors (``session_with_outputs``: calibration, float statistics, checks)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from workbench.backends.base import Runner
from workbench.errors import WorkbenchError

if TYPE_CHECKING:
    import onnx


def session_options(threads: int | None = None, optimization: str = "all", exact_int8: bool = True):
    """ORT session options; ``exact_int8``: on a CPU whose U8S8 GEMMs saturate (x86 without VNNI), int8 weights
    of the fused integer nodes become uint8 at load (``cpu_int8.PRECISION_MODE_KEY``), so a Q/DQ graph with
    int8 weights computes what it says; False keeps ORT's default (the faster, saturating kernels)."""
    import onnxruntime as ort

    from workbench.backends.cpu_int8 import PRECISION_MODE_KEY, u8s8_exact

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
    if exact_int8 and not u8s8_exact()[0]:
        opts.add_session_config_entry(PRECISION_MODE_KEY, "1")
    return opts


def session_with_outputs(model: onnx.ModelProto, names: list[str], options=None):
    """An ONNX Runtime CPU session of ``model`` that returns the tensors ``names`` (its graph outputs replaced).

    The outputs are swapped in place for serialisation and restored (a deep copy would hold the weights twice
    more); ``options`` default to basic optimisation, so that every asked-for tensor survives.
    """
    import onnx
    import onnxruntime as ort

    options = options or session_options(optimization="basic")
    original = [onnx.ValueInfoProto.FromString(o.SerializeToString()) for o in model.graph.output]
    del model.graph.output[:]
    model.graph.output.extend(onnx.ValueInfoProto(name=name) for name in names)
    try:
        data = model.SerializeToString()
    finally:
        del model.graph.output[:]
        model.graph.output.extend(original)
    session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    del data
    return session


class OnnxRuntimeRunner(Runner):
    backend = "onnxruntime"

    def __init__(
        self,
        model: Path | bytes,
        providers: Sequence[str] = ("CPUExecutionProvider",),
        threads: int | None = None,
        optimization: str = "all",
        name: str | None = None,
        exact_int8: bool = True,
        backend_name: str | None = None,
    ) -> None:
        super().__init__()
        self.model = model
        self.providers = list(providers)
        self.threads = threads
        self.optimization = optimization
        self.exact_int8 = exact_int8
        self.name = name or (Path(model).name if not isinstance(model, bytes) else "onnx-model")
        self.session = None
        self.backend_name = backend_name or (
            "ort-cuda" if "CUDAExecutionProvider" in self.providers else "ort-cpu"
        )

    def activate_impl(self) -> None:
        import onnxruntime as ort

        available = ort.get_available_providers()
        missing = [p for p in self.providers if p not in available]
        if missing:
            raise WorkbenchError(
                f"ONNX Runtime providers {missing} are not available here (have {available}); "
                "for CUDA install onnxruntime-gpu: pip install 'workbench[gpu]'"
            )
        src = self.model if isinstance(self.model, bytes) else str(self.model)
        options = session_options(self.threads, self.optimization, self.exact_int8)
        self.session = ort.InferenceSession(src, options, providers=self.providers)

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

    def graph_inputs(self) -> list[str]:
        return self.input_names if self.session is not None else []

    def describe(self) -> dict[str, str]:
        import onnxruntime as ort

        from workbench.backends.factory import device_of

        return {
            "runner": self.name,
            "backend": self.backend,
            "backend_name": self.backend_name,
            "device": device_of(self.backend_name),
            "providers": ",".join(self.providers),
            "onnxruntime": ort.__version__,
            "optimization": self.optimization,
            "threads": str(self.threads or "default"),
            "int8_gemm": int8_gemm(self.exact_int8),
        }


def int8_gemm(exact_int8: bool) -> str:
    """How this CPU's ORT sessions compute integer GEMMs with int8 weights (recorded with every timing)."""
    from workbench.backends.cpu_int8 import u8s8_exact

    exact, why = u8s8_exact()
    if exact:
        return f"U8S8 exact: {why}"
    if exact_int8:
        return f"int8 weights made uint8 at load (U8U8, exact): {why}"
    return f"U8S8 as ORT defaults, saturating: {why}"

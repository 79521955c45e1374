"""TensorRT runner: torch CUDA tensors as device buffers, latency from CUDA events.

Same life cycle as every runner (activate, infer, deactivate, last_inference_time). Needs a GPU
that the installed TensorRT flavour supports (TensorRT-RTX refuses compute capability 9.0).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from workbench.backends.base import Runner
from workbench.backends.devices import device_of
from workbench.backends.tensorrt.loader import TensorRT, load_tensorrt
from workbench.errors import WorkbenchError

_TORCH_DTYPES = {
    "FLOAT": "float32",
    "HALF": "float16",
    "INT8": "int8",
    "INT32": "int32",
    "INT64": "int64",
    "BOOL": "bool",
    "BF16": "bfloat16",
    "UINT8": "uint8",
}


class TensorRTRunner(Runner):
    backend = "tensorrt"

    def __init__(self, engine_path: Path, trt: TensorRT | None = None, name: str | None = None) -> None:
        super().__init__()
        self.engine_path = Path(engine_path)
        self.name = name or self.engine_path.name
        self._trt = trt
        self._engine: Any = None
        self._context: Any = None
        self._stream: Any = None
        self._events: tuple[Any, Any] | None = None

    def activate_impl(self) -> None:
        import torch

        if not torch.cuda.is_available():
            raise WorkbenchError("the TensorRT runner needs a CUDA GPU; none is visible to torch here")
        self._trt = self._trt or load_tensorrt()
        t = self._trt.module
        runtime = t.Runtime(t.Logger(t.Logger.ERROR))
        self._engine = runtime.deserialize_cuda_engine(self.engine_path.read_bytes())
        if self._engine is None:
            raise WorkbenchError(
                f"{self._trt.flavour} {self._trt.version} could not load {self.engine_path} "
                "(built by another version, or this GPU is not supported); rebuild it here"
            )
        self._context = self._engine.create_execution_context()
        self._stream = torch.cuda.Stream()
        self._events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))

    def infer_impl(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        import torch

        t = self._trt.module  # type: ignore[union-attr]
        names = [self._engine.get_tensor_name(i) for i in range(self._engine.num_io_tensors)]
        inputs = [n for n in names if self._engine.get_tensor_mode(n) == t.TensorIOMode.INPUT]
        missing = [n for n in inputs if n not in feeds]
        if missing:
            raise WorkbenchError(f"{self.name}: missing inputs {missing} (engine inputs: {inputs})")
        keep: dict[str, torch.Tensor] = {}
        for n in inputs:
            tensor = torch.from_numpy(np.ascontiguousarray(feeds[n])).cuda()
            self._context.set_input_shape(n, tuple(tensor.shape))
            keep[n] = tensor
            self._context.set_tensor_address(n, tensor.data_ptr())
        outputs: dict[str, torch.Tensor] = {}
        for n in names:
            if n in keep:
                continue
            dtype = getattr(torch, _TORCH_DTYPES[self._engine.get_tensor_dtype(n).name])
            outputs[n] = torch.empty(tuple(self._context.get_tensor_shape(n)), dtype=dtype, device="cuda")
            self._context.set_tensor_address(n, outputs[n].data_ptr())
        start, end = self._events  # type: ignore[misc]
        torch.cuda.current_stream().synchronize()  # inputs copied before the engine reads them
        start.record(self._stream)
        if not self._context.execute_async_v3(self._stream.cuda_stream):
            raise WorkbenchError(f"{self.name}: TensorRT execution failed")
        end.record(self._stream)
        self._stream.synchronize()
        return {n: v.cpu().numpy() for n, v in outputs.items()}

    def _inputs(self) -> list[str]:
        t = self._trt.module  # type: ignore[union-attr]
        names = [self._engine.get_tensor_name(i) for i in range(self._engine.num_io_tensors)]
        return [n for n in names if self._engine.get_tensor_mode(n) == t.TensorIOMode.INPUT]

    def graph_inputs(self) -> list[str]:
        return self._inputs() if self._engine is not None else []

    def batch_limit(self) -> int | None:
        """The batch axis' max in the engine's first optimisation profile (the engine refuses more)."""
        if self._engine is None:
            return None
        limits = [int(self._engine.get_tensor_profile_shape(n, 0)[2][0]) for n in self._inputs()]
        return min(limits) if limits else None

    def device_time_of_last_call(self) -> float | None:
        if self._events is None:
            return None
        start, end = self._events
        return start.elapsed_time(end) / 1000.0

    def deactivate_impl(self) -> None:
        self._context = None
        self._engine = None
        self._stream = None
        self._events = None

    def describe(self) -> dict[str, str]:
        info = {
            "runner": self.name,
            "backend": self.backend,
            "backend_name": "tensorrt",
            "device": device_of("tensorrt"),
            "engine": str(self.engine_path),
        }
        if self._trt is not None:
            info.update({"tensorrt_" + k: v for k, v in self._trt.describe().items()})
        return info

"""ONNX Runtime's dynamic INT8 quantization of an FP32 model: the usual CPU baseline a sign-off sets beside ours.

``onnxruntime.quantization.quantize_dynamic`` stores the weights of every MatMul as 8-bit integers and
quantizes each activation at run time from its own min/max (``DynamicQuantizeLinear``), so it needs no
calibration set; ORT fuses the result into ``DynamicQuantizeMatMul`` / ``MatMulIntegerToFloat`` on the CPU.
Only MatMul nodes are quantized (``OP_TYPES``): ORT's dynamic Conv is a ``ConvInteger`` that runs several
times slower than the float Conv on x86 (``workbench.quantize.ort_cpu`` notes the same for Q/DQ graphs).

The weight type follows the CPU like the workbench's own CPU flavour (``workbench.backends.cpu_int8``):
uint8 where ORT's U8S8 GEMMs saturate (x86 without VNNI), int8 where they are exact. The written file
keeps the FP32 model's metadata (the model description) and records how it was made (``workbench.quantize.metadata``: the
FP32 file's hash, the tool and its version, the settings), so a sign-off record can say what it judged.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import onnx

from workbench.artifacts import sha256_file, write_bytes_atomic
from workbench.quantize.metadata import provenance, set_metadata

OP_TYPES: tuple[str, ...] = ("MatMul",)


def quantizable_count(model: onnx.ModelProto) -> int:
    """Nodes dynamic quantization would quantize: ``OP_TYPES`` nodes with a constant second input (weights)."""
    inits = {i.name for i in model.graph.initializer}
    return sum(n.op_type in OP_TYPES and len(n.input) > 1 and n.input[1] in inits for n in model.graph.node)


def settings(weights: str, reason: str, quantized_nodes: int) -> dict:
    """How ``build_dynamic`` quantizes (written into the file's metadata; a file made alike is reused)."""
    import onnxruntime

    return {
        "tool": "onnxruntime.quantization.quantize_dynamic",
        "onnxruntime": onnxruntime.__version__,
        "op_types_to_quantize": list(OP_TYPES),
        "weight_type": "QUInt8" if weights == "u8" else "QInt8",
        "per_channel": False,
        "reduce_range": False,
        "weights_reason": reason,
        "quantized_nodes": quantized_nodes,
    }


def build_dynamic(fp32_path: Path, out_path: Path, weights: str = "u8", reason: str = "") -> Path:
    """Write ONNX Runtime's dynamic INT8 quantization of ``fp32_path`` to ``out_path`` (atomically);
    ``weights`` "u8" or "s8" (``workbench.backends.cpu_int8.int8_weight_type``), ``reason`` why."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    if weights not in ("u8", "s8"):
        raise ValueError(f"weights must be u8 or s8, got {weights!r}")
    source = onnx.load(str(fp32_path))
    with tempfile.TemporaryDirectory(prefix="dynamic-int8-") as tmp:
        written = Path(tmp) / "dynamic.onnx"
        logging.disable(logging.WARNING)  # its advice to run ORT's pre-processing script, on every call
        # it logs through the root logger, whose first call installs a root handler (an implicit basicConfig)
        # that would print every workbench progress line a second time as INFO:workbench...: removed after
        root_handlers = logging.getLogger().handlers[:]
        try:
            quantize_dynamic(
                source,
                written,
                op_types_to_quantize=list(OP_TYPES),
                weight_type=QuantType.QUInt8 if weights == "u8" else QuantType.QInt8,
            )
        finally:
            logging.disable(logging.NOTSET)
            logging.getLogger().handlers[:] = root_handlers
        model = onnx.load(str(written))
    how = settings(weights, reason, quantizable_count(source))
    set_metadata(
        model,
        {**{p.key: p.value for p in source.metadata_props}, **provenance(sha256_file(Path(fp32_path)), how)},
    )
    write_bytes_atomic(Path(out_path), model.SerializeToString())
    return Path(out_path)

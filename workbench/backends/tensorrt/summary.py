"""Layer-by-layer precision summary of a parsed TensorRT network (works on any flavour's objects).

For every layer: name, type and the dtype of each input and output tensor. Compute layers
(convolution, matrix multiply) also get an effective precision: ``int8`` when both operands (data and
weight; a separate bias input, as HuBERT's and Data2VecAudio's biased convs get, stays float) arrive
through a DequantizeLinear of an INT8 tensor (explicit Q/DQ, which TensorRT fuses into an INT8
kernel; reshapes in between are looked through), ``int8-partial`` when only one does, else the dtype of their
inputs (``fp16``/``fp32``...).
Every other layer is counted by the float type it computes in (``layer_precisions``): its first float
output's dtype (else its first float input's; ``none`` when it has no float tensor: shape arithmetic);
Q/DQ, Cast and Constant layers are counted apart, as ``qdq``, ``cast`` and ``constant``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

COMPUTE_TYPES = ("CONVOLUTION", "DECONVOLUTION", "MATRIX_MULTIPLY")
# layers that only move data; TensorRT propagates Q/DQ across them (traced back through input 0)
DATA_MOVEMENT_TYPES = ("SHUFFLE", "SQUEEZE", "UNSQUEEZE")
FLOAT_NAMES = ("fp32", "fp16", "bf16", "fp8")
APART = {"QUANTIZE": "qdq", "DEQUANTIZE": "qdq", "CAST": "cast", "CONSTANT": "constant"}
DTYPE_NAMES = {
    "FLOAT": "fp32",
    "HALF": "fp16",
    "BF16": "bf16",
    "INT8": "int8",
    "INT32": "int32",
    "INT64": "int64",
    "BOOL": "bool",
    "UINT8": "uint8",
    "FP8": "fp8",
    "INT4": "int4",
}


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: str


@dataclass(frozen=True)
class LayerInfo:
    index: int
    name: str
    type: str
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    precision: str | None = None  # effective precision, compute layers only


@dataclass
class PrecisionSummary:
    """What TensorRT parsed: one entry per layer plus counts."""

    layers: list[LayerInfo] = field(default_factory=list)

    def compute_precisions(self) -> dict[str, int]:
        return dict(sorted(Counter(l.precision for l in self.layers if l.precision).items()))

    def layer_precisions(self) -> dict[str, int]:
        """Non-compute layers by the float type they compute in; Q/DQ, Cast and Constant layers apart."""
        return dict(sorted(Counter(_other_precision(l) for l in self.layers if not l.precision).items()))

    def layer_types(self) -> dict[str, int]:
        return dict(sorted(Counter(l.type for l in self.layers).items()))

    def by_name(self, name: str) -> LayerInfo:
        """The layer called ``name`` (TensorRT names parsed layers after their ONNX node)."""
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise KeyError(name)

    def to_json(self) -> dict[str, Any]:
        return {
            "compute_precisions": self.compute_precisions(),
            "layer_precisions": self.layer_precisions(),
            "layer_types": self.layer_types(),
            "num_layers": len(self.layers),
            "layers": [asdict(l) for l in self.layers],
        }

    def counts_line(self) -> str:
        compute = ", ".join(f"{k} {v}" for k, v in self.compute_precisions().items()) or "none"
        other = self.layer_precisions()
        floats = ", ".join(f"{k} {other[k]}" for k in other if k in FLOAT_NAMES) or "none"
        types = self.layer_types()
        return (
            f"{len(self.layers)} layers; compute layers: {compute}; other layers: {floats}, no float "
            f"{other.get('none', 0)}; quantize {types.get('QUANTIZE', 0)}, "
            f"dequantize {types.get('DEQUANTIZE', 0)}, cast {types.get('CAST', 0)}, "
            f"constant {types.get('CONSTANT', 0)}"
        )


def _other_precision(layer: LayerInfo) -> str:
    if layer.type in APART:
        return APART[layer.type]
    for tensor in [*layer.outputs, *layer.inputs]:
        if tensor.dtype in FLOAT_NAMES:
            return tensor.dtype
    return "none"


def _enum_name(value: Any) -> str:
    return getattr(value, "name", str(value).rsplit(".", 1)[-1])


def dtype_name(dtype: Any) -> str:
    name = _enum_name(dtype)
    return DTYPE_NAMES.get(name, name.lower())


def summarise_network(network: Any) -> PrecisionSummary:
    """Walk ``network`` (an INetworkDefinition) and describe each layer's tensor types."""
    producers: dict[str, Any] = {}
    raw = [network.get_layer(i) for i in range(network.num_layers)]
    for layer in raw:
        for j in range(layer.num_outputs):
            producers[layer.get_output(j).name] = layer
    summary = PrecisionSummary()
    for index, layer in enumerate(raw):
        inputs = [layer.get_input(j) for j in range(layer.num_inputs)]
        inputs = [t for t in inputs if t is not None]
        ltype = _enum_name(layer.type)
        precision = None
        if ltype in COMPUTE_TYPES and inputs:
            precision = _compute_precision(inputs[:2], producers)  # data and weight; a bias stays float
        summary.layers.append(
            LayerInfo(
                index=index,
                name=layer.name,
                type=ltype,
                inputs=[TensorInfo(t.name, dtype_name(t.dtype)) for t in inputs],
                outputs=[
                    TensorInfo(layer.get_output(j).name, dtype_name(layer.get_output(j).dtype))
                    for j in range(layer.num_outputs)
                ],
                precision=precision,
            )
        )
    return summary


def _compute_precision(inputs: list[Any], producers: dict[str, Any]) -> str:
    from_int8 = []
    for tensor in inputs:
        producer = producers.get(tensor.name)
        hops = 0
        while producer is not None and _enum_name(producer.type) in DATA_MOVEMENT_TYPES and hops < 8:
            source = producer.get_input(0)  # the parser's reshapes sit between DQ and conv/matmul
            producer = producers.get(source.name) if source is not None else None
            hops += 1
        dq = producer is not None and _enum_name(producer.type) == "DEQUANTIZE"
        quantized = producer.get_input(0) if dq and producer is not None else None
        from_int8.append(quantized is not None and dtype_name(quantized.dtype) == "int8")
    if all(from_int8):
        return "int8"
    if any(from_int8):
        return "int8-partial"
    return dtype_name(inputs[0].dtype)


def summary_from_json(obj: dict[str, Any]) -> PrecisionSummary:
    """Rebuild a summary saved by ``PrecisionSummary.to_json`` (engine cache hits)."""
    layers = []
    for raw in obj.get("layers", []):
        layers.append(
            LayerInfo(
                index=raw["index"],
                name=raw["name"],
                type=raw["type"],
                inputs=[TensorInfo(**t) for t in raw["inputs"]],
                outputs=[TensorInfo(**t) for t in raw["outputs"]],
                precision=raw.get("precision"),
            )
        )
    return PrecisionSummary(layers)

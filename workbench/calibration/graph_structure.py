"""Read an ONNX file's graph structure (nodes, initializer names) without parsing its weights.

The calibration pass needs only which tensors feed MatMul/Gemm/Conv and which of those are
initializers. ``onnx.load`` parses and copies every weight (about 0.4 s for Wav2Vec2-base's 377 MB
on an idle core, several seconds on a busy one). Here the protobuf wire format is walked over a
memory map instead: the graph's fields other than its initializers are parsed as usual, and of each
initializer only the fields before and after its data are read (name, type, dims, data location);
the weight bytes are skipped, never copied. The result is an ``onnx.ModelProto`` whose initializers
carry no data: enough for ``activation_tensors`` and for telling whether weights live in external files.
"""

from __future__ import annotations

import mmap
from pathlib import Path

import onnx

# field numbers (onnx.proto3)
_MODEL_GRAPH = 7
_GRAPH_INITIALIZER = 5
_TENSOR_KEEP = {1, 2, 8, 14}  # dims, data_type, name, data_location
_LENGTH_DELIMITED, _VARINT, _FIXED64, _FIXED32 = 2, 0, 1, 5


def _varint(buffer, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buffer[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _fields(buffer, start: int, end: int):
    """(field number, wire type, field start, value start, value end) of each field in [start, end)."""
    pos = start
    while pos < end:
        first = pos
        key, pos = _varint(buffer, pos)
        number, wire = key >> 3, key & 7
        if wire == _VARINT:
            _, after = _varint(buffer, pos)
        elif wire == _LENGTH_DELIMITED:
            length, pos = _varint(buffer, pos)
            after = pos + length
        elif wire == _FIXED64:
            after = pos + 8
        elif wire == _FIXED32:
            after = pos + 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire} at byte {first}")
        if after > end:
            raise ValueError(f"truncated protobuf field at byte {first}")
        yield number, wire, first, pos, after
        pos = after


def read_structure(path: Path) -> onnx.ModelProto:
    """The model at ``path`` with every initializer's data left out (see the module docstring)."""
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as view:
        model_rest = bytearray()
        graph_rest = bytearray()
        initializers: list[bytes] = []
        for number, wire, first, start, end in _fields(view, 0, len(view)):
            if number != _MODEL_GRAPH or wire != _LENGTH_DELIMITED:
                model_rest += view[first:end]
                continue
            for g_number, g_wire, g_first, g_start, g_end in _fields(view, start, end):
                if g_number != _GRAPH_INITIALIZER or g_wire != _LENGTH_DELIMITED:
                    graph_rest += view[g_first:g_end]
                    continue
                initializers.append(b"".join(view[f:e] for n, _, f, _, e in _fields(view, g_start, g_end)
                                             if n in _TENSOR_KEEP))
    model = onnx.ModelProto.FromString(bytes(model_rest))
    graph = onnx.GraphProto.FromString(bytes(graph_rest))
    graph.initializer.extend(onnx.TensorProto.FromString(t) for t in initializers)
    model.graph.CopyFrom(graph)
    return model

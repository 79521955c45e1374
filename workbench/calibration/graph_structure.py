"""What calibration needs of an ONNX graph, read from the file's bytes without parsing its weights.

The calibration pass needs only which tensors feed MatMul/Gemm/Conv and which of those are
initializers. ``onnx.load`` parses and copies every weight (about 0.4 s for Wav2Vec2-base's 377 MB
on an idle core, seconds on a busy one), and importing ``onnx`` itself costs about a second of CPU.
Here the protobuf wire format is walked over a memory map instead: of each node its op type,
inputs and outputs are decoded, of each initializer its name and data location; the weight bytes
are skipped, never copied. ``outputs_fragment`` encodes the bytes that add graph outputs to a
serialised model (see ``runner.calibration_session``), also without ``onnx``.

Field numbers are those of onnx.proto3: ModelProto.graph = 7; GraphProto.node = 1, initializer = 5,
output = 12, sparse_initializer = 15; NodeProto.input = 1, output = 2, op_type = 4;
TensorProto.name = 8, data_location = 14 (1 = EXTERNAL); SparseTensorProto.values = 1;
ValueInfoProto.name = 1.
"""

from __future__ import annotations

import mmap
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:
    import onnx

_LENGTH_DELIMITED, _VARINT, _FIXED64, _FIXED32 = 2, 0, 1, 5
_EXTERNAL = 1


@dataclass(frozen=True)
class Node:
    op_type: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


@dataclass(frozen=True)
class GraphSummary:
    """The top-level graph's nodes (in order), its initializer names, and whether weights are external."""

    nodes: tuple[Node, ...]
    initializers: frozenset[str]
    external_data: bool

    @classmethod
    def of_model(cls, model: "onnx.ModelProto") -> "GraphSummary":
        graph = model.graph
        nodes = tuple(Node(n.op_type, tuple(n.input), tuple(n.output)) for n in graph.node)
        inits = {t.name for t in graph.initializer} | {s.values.name for s in graph.sparse_initializer}
        external = any(t.data_location == _EXTERNAL for t in graph.initializer)
        return cls(nodes, frozenset(inits), external)


def _varint(buffer, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buffer[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _fields(buffer, start: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """(field number, wire type, value start, value end) of each field in ``buffer[start:end]``;
    for a varint field the value itself is the start."""
    pos = start
    while pos < end:
        key, pos = _varint(buffer, pos)
        number, wire = key >> 3, key & 7
        if wire == _VARINT:
            value, after = _varint(buffer, pos)
            yield number, wire, value, after
        else:
            if wire == _LENGTH_DELIMITED:
                length, pos = _varint(buffer, pos)
                after = pos + length
            elif wire == _FIXED64:
                after = pos + 8
            elif wire == _FIXED32:
                after = pos + 4
            else:
                raise ValueError(f"not an ONNX protobuf: wire type {wire} at byte {pos}")
            if after > end:
                raise ValueError(f"not an ONNX protobuf: a field at byte {pos} runs past its message")
            yield number, wire, pos, after
        pos = after


def _text(buffer, start: int, end: int) -> str:
    return bytes(buffer[start:end]).decode("utf-8")


def _node(buffer, start: int, end: int) -> Node:
    inputs, outputs, op_type = [], [], ""
    for number, wire, a, b in _fields(buffer, start, end):
        if wire != _LENGTH_DELIMITED:
            continue
        if number == 1:
            inputs.append(_text(buffer, a, b))
        elif number == 2:
            outputs.append(_text(buffer, a, b))
        elif number == 4:
            op_type = _text(buffer, a, b)
    return Node(op_type, tuple(inputs), tuple(outputs))


def _tensor(buffer, start: int, end: int) -> tuple[str, bool]:
    name, external = "", False
    for number, wire, a, b in _fields(buffer, start, end):
        if number == 8 and wire == _LENGTH_DELIMITED:
            name = _text(buffer, a, b)
        elif number == 14 and wire == _VARINT:
            external = a == _EXTERNAL
    return name, external


def read_structure(path: Path) -> GraphSummary:
    """The summary of the model at ``path`` (see the module docstring)."""
    nodes: list[Node] = []
    inits: set[str] = set()
    external = False
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as view:
        for number, wire, start, end in _fields(view, 0, len(view)):
            if number != 7 or wire != _LENGTH_DELIMITED:
                continue
            for g_number, g_wire, a, b in _fields(view, start, end):
                if g_wire != _LENGTH_DELIMITED:
                    continue
                if g_number == 1:
                    nodes.append(_node(view, a, b))
                elif g_number == 5:
                    name, is_external = _tensor(view, a, b)
                    inits.add(name)
                    external = external or is_external
                elif g_number == 15:
                    for s_number, s_wire, c, d in _fields(view, a, b):
                        if s_number == 1 and s_wire == _LENGTH_DELIMITED:
                            inits.add(_tensor(view, c, d)[0])
    return GraphSummary(tuple(nodes), frozenset(inits), external)


def _length_delimited(number: int, payload: bytes) -> bytes:
    out = bytearray()
    for value in ((number << 3) | _LENGTH_DELIMITED, len(payload)):
        while value >= 0x80:
            out.append((value & 0x7F) | 0x80)
            value >>= 7
        out.append(value)
    return bytes(out) + payload


def outputs_fragment(names: list[str]) -> bytes:
    """Serialised ModelProto holding only a graph with ``names`` as outputs.

    Protobuf merges a repeated occurrence of an embedded message field, so appending these bytes to a
    serialised model adds ``names`` to its graph outputs without parsing or re-serialising its weights.
    """
    outputs = b"".join(_length_delimited(12, _length_delimited(1, name.encode("utf-8"))) for name in names)
    return _length_delimited(7, outputs)

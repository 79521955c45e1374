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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

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
    def of_model(cls, model: onnx.ModelProto) -> GraphSummary:
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
    for number, wire, a, b, _ in _fields_at(buffer, start, end):
        yield number, wire, a, b


def _fields_at(buffer, start: int, end: int) -> Iterator[tuple[int, int, int, int, int]]:
    """Like ``_fields``, plus where each field's key begins (so a field can be copied verbatim)."""
    pos = start
    while pos < end:
        begin = pos
        key, pos = _varint(buffer, pos)
        number, wire = key >> 3, key & 7
        if wire == _VARINT:
            value, after = _varint(buffer, pos)
            yield number, wire, value, after, begin
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
            yield number, wire, pos, after, begin
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


def _varint_bytes(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _length_delimited(number: int, payload: bytes) -> bytes:
    return _varint_bytes((number << 3) | _LENGTH_DELIMITED) + _varint_bytes(len(payload)) + payload


def _output_fields(names: list[str]) -> bytes:
    """GraphProto.output entries (ValueInfoProto with only a name) for ``names``."""
    return b"".join(_length_delimited(12, _length_delimited(1, name.encode("utf-8"))) for name in names)


def outputs_fragment(names: list[str]) -> bytes:
    """Serialised ModelProto holding only a graph with ``names`` as outputs.

    Protobuf merges a repeated occurrence of an embedded message field, so appending these bytes to a
    serialised model adds ``names`` to its graph outputs without parsing or re-serialising its weights.
    """
    return _length_delimited(7, _output_fields(names))


# weights smaller than this stay inline (external data has a per-tensor cost in ONNX Runtime)
EXTERNAL_MIN_BYTES = 4096


def _externalised_tensor(buffer, start: int, end: int, location: str) -> bytes:
    """The TensorProto at ``buffer[start:end]`` with its raw_data (field 9) replaced by a reference
    to the same bytes in ``location`` (external_data = 13: location, offset, length; data_location = 14)."""
    fields = list(_fields_at(buffer, start, end))
    raw = [(a, b) for number, wire, a, b, _ in fields if number == 9 and wire == _LENGTH_DELIMITED]
    if len(raw) != 1 or raw[0][1] - raw[0][0] < EXTERNAL_MIN_BYTES:
        return bytes(buffer[start:end])
    kept = b"".join(bytes(buffer[begin:b]) for number, _, _, b, begin in fields if number not in (9, 13, 14))
    entries = b"".join(
        _length_delimited(13, _length_delimited(1, key.encode()) + _length_delimited(2, value.encode()))
        for key, value in (
            ("location", location),
            ("offset", str(raw[0][0])),
            ("length", str(raw[0][1] - raw[0][0])),
        )
    )
    return kept + entries + bytes([14 << 3 | _VARINT]) + _varint_bytes(_EXTERNAL)


def write_with_external_weights(source: Path, target: Path, location: str, outputs: list[str]) -> None:
    """Write ``target``: the model at ``source`` with ``outputs`` added to its graph outputs and every
    large weight read from ``location`` (a file beside ``target`` holding ``source``'s bytes, e.g. a
    link to it) at the offset where it lies in ``source``, so no weight byte is copied or parsed.
    Only for models whose weights are inline (``GraphSummary.external_data`` False)."""
    with open(source, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as view:
        model = bytearray()
        for number, wire, start, end, begin in _fields_at(view, 0, len(view)):
            if number != 7 or wire != _LENGTH_DELIMITED:
                model += view[begin:end]
                continue
            graph = bytearray()
            for g_number, g_wire, a, b, g_begin in _fields_at(view, start, end):
                if g_number == 5 and g_wire == _LENGTH_DELIMITED:
                    graph += _length_delimited(5, _externalised_tensor(view, a, b, location))
                else:
                    graph += view[g_begin:b]
            graph += _output_fields(outputs)
            model += _length_delimited(7, bytes(graph))
    Path(target).write_bytes(bytes(model))

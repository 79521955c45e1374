"""Candidate ONNX files (``signoff --candidate``, ``compare --candidate``): the speech model the workbench runs.

Checked before any evaluation: a regular file that parses as an ONNX model (external data is not
loaded, but every external-data file it names must be beside it and long enough), with a float ``input_values`` input of rank 2 ([batch, samples]) and a rank-3 logits output
([batch, frames, vocabulary]) named ``logits`` or the only one, as ``python -m workbench calibrate``
writes them.
"""

from __future__ import annotations

from pathlib import Path

from workbench.inputs.problem import Where
from workbench.inputs.read import read_bytes

INPUT_NAME = "input_values"
OUTPUT_NAME = "logits"
FIX = (
    "give an ONNX export of a Wav2Vec2-style CTC model (input_values [batch, samples] -> logits "
    "[batch, frames, vocab]), e.g. engines/<model>/model.fp32.onnx written by python -m workbench calibrate"
)


def _rank_and_type(value) -> tuple[int | None, int]:
    tensor = value.type.tensor_type
    rank = len(tensor.shape.dim) if tensor.HasField("shape") else None
    return rank, tensor.elem_type


def check_candidate(label: str, path: Path) -> None:
    """Raise ``BadInput`` naming ``label`` (e.g. ``candidate int8``) unless ``path`` is such an ONNX model."""
    import onnx
    from google.protobuf.message import DecodeError

    where = Where(f"{label} {path}", FIX)
    data = read_bytes(Path(path), where)
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except (DecodeError, ValueError, RuntimeError) as exc:
        raise where.fail(f"is not an ONNX model ({type(exc).__name__})") from exc
    if not model.HasField("graph") or not model.graph.node:
        raise where.fail("is not an ONNX model (no graph)")
    initialisers = {i.name for i in model.graph.initializer}
    inputs = {i.name: i for i in model.graph.input if i.name not in initialisers}
    if INPUT_NAME not in inputs:
        raise where.fail(f"has inputs {sorted(inputs)}, not {INPUT_NAME!r}")
    rank, elem = _rank_and_type(inputs[INPUT_NAME])
    if elem not in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16) or rank not in (None, 2):
        raise where.key(INPUT_NAME).fail(
            f"must be a float tensor [batch, samples], found {onnx.TensorProto.DataType.Name(elem)} of rank {rank}"
        )
    outputs = {o.name: o for o in model.graph.output}
    logits = outputs.get(OUTPUT_NAME) or (next(iter(outputs.values())) if len(outputs) == 1 else None)
    if logits is None:
        raise where.fail(f"has outputs {sorted(outputs)}; need {OUTPUT_NAME!r} or exactly one output")
    rank, _ = _rank_and_type(logits)
    if rank not in (None, 3):
        raise where.key(logits.name).fail(f"must be logits [batch, frames, vocab], found rank {rank}")
    _check_external_data(model, Path(path), where)


def _check_external_data(model, path: Path, where: Where) -> None:
    """Every initialiser stored outside the file names a regular file beside the model (inside its folder) that
    holds the bytes it claims; nothing is read but the files' sizes."""
    import onnx

    folder = path.parent.resolve()
    for tensor in model.graph.initializer:
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        info = {entry.key: entry.value for entry in tensor.external_data}
        location = info.get("location", "")
        data = (folder / location).resolve()
        if not location or not data.is_relative_to(folder):
            raise where.fail(f"stores {tensor.name} in {location!r}, not in a file beside it")
        if not data.is_file():
            raise where.fail(
                f"keeps its weights in {location}, which is missing beside it (external data {tensor.name}); "
                "copy that file next to the model, or export the model again"
            )
        try:
            end = int(info.get("offset", 0)) + int(info.get("length", 0))
        except ValueError as exc:
            raise where.fail(f"names a bad offset or length for {tensor.name}'s external data") from exc
        if end > data.stat().st_size:
            raise where.fail(
                f"keeps {tensor.name} in {location}, which is shorter than the model says ({data.stat().st_size} "
                f"of {end} bytes): the file is truncated; copy it again or export the model again"
            )

"""A user's candidate that ONNX Runtime refuses with the exact-U8S8 session option (its own ``quantize_static``
QDQ output, ONNX Runtime 1.32, x86 without VNNI) is run without the option, and the sign-off says why."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from modelkit import ENGLISH_TEXTS, unit_set

from workbench.backends.cpu_int8 import u8s8_exact
from workbench.backends.onnxruntime import OnnxRuntimeRunner, session_with_outputs
from workbench.cli import main

pytestmark = pytest.mark.skipif(
    u8s8_exact()[0], reason="this CPU's U8S8 GEMMs are exact: the workbench sets no exact-U8S8 option here"
)


@pytest.fixture(scope="module")
def ort_quantized(tmp_path_factory) -> tuple[Path, Path, Path]:
    """A tiny random Wav2Vec2's FP32 export and ONNX Runtime's own ``quantize_static`` QDQ model of it."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    from workbench.model.description import describe_model
    from workbench.model.export import export_onnx
    from workbench.model.loading import load_model
    from workbench.model.synthetic import save_random_wav2vec2

    root = tmp_path_factory.mktemp("ortq")
    folder = save_random_wav2vec2(root / "model")
    description = describe_model(folder)
    fp32 = export_onnx(load_model(description), root / "fp32.onnx", description)
    rng = np.random.default_rng(0)

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.items = iter([rng.standard_normal((1, 16_000)).astype(np.float32) for _ in range(2)])

        def get_next(self):
            audio = next(self.items, None)
            return None if audio is None else {"input_values": audio}

    quantized = root / "ort.onnx"
    quantize_static(
        str(fp32),
        str(quantized),
        Reader(),
        quant_format=QuantFormat.QDQ,
        per_channel=True,
        activation_type=QuantType.QInt8,
        weight_type=QuantType.QInt8,
        extra_options={"ActivationSymmetric": True, "WeightSymmetric": True},
    )
    return folder, fp32, quantized


def test_refused_option_is_dropped_and_said(ort_quantized) -> None:
    import onnx
    import onnxruntime as ort

    from workbench.backends.onnxruntime import session_options

    _, fp32, quantized = ort_quantized
    with pytest.raises(Exception, match="replace the existing tensor"):  # what a plain session with it does
        ort.InferenceSession(str(quantized), session_options(), providers=["CPUExecutionProvider"])
    runner = OnnxRuntimeRunner(quantized, name="ort")
    with runner:
        out = runner.infer({"input_values": np.zeros((1, 16_000), np.float32)})
        described = runner.describe()
    assert out["logits"].shape[0] == 1
    assert (
        "ort: ONNX Runtime refused it with the exact-U8S8 option session.x64quantprecision"
        in runner.session_note
    )
    assert "replace the existing tensor" in runner.session_note and "saturating" in described["int8_gemm"]
    assert described["session_note"] == runner.session_note
    with OnnxRuntimeRunner(fp32) as plain:  # a model it accepts keeps the option
        assert plain.session_note is None and "exact" in plain.describe()["int8_gemm"]
    model = onnx.load(str(quantized))
    session = session_with_outputs(model, [model.graph.output[0].name])
    assert session.get_outputs()[0].name == "logits"


def test_signoff_of_such_a_candidate_records_why(ort_quantized, tmp_path, speech_like, capsys) -> None:
    folder, fp32, quantized = ort_quantized
    evaluation = unit_set(tmp_path / "eval", ENGLISH_TEXTS[:3], speech_like, seed=1)
    calib = unit_set(tmp_path / "calib", ["THE CAT SAT", "RED SKY AT NIGHT"], speech_like, seed=5)
    out = tmp_path / "report"
    argv = [
        "signoff",
        "--model",
        str(folder),
        "--candidate",
        f"fp32={fp32}",
        "--candidate",
        f"ort={quantized}",
        "--calib-set",  # the overflow check runs every candidate too
        str(calib.path),
    ]
    code = main(
        [*argv, "--eval-set", str(evaluation.path), "--no-latency", "--resamples", "100", "--out", str(out)]
    )
    assert code == 0, capsys.readouterr().err[-2000:]
    record = json.loads((out / "report.json").read_text())
    said = [n for n in record["notes"] if "session.x64quantprecision" in n]
    assert len(said) == 1 and said[0].startswith("ort: ")
    assert any(n.startswith("ort: ") and "inf/NaN" in n for n in record["notes"]), record["notes"]
    assert "session.x64quantprecision" in (out / "report.md").read_text()
    assert "session.x64quantprecision" in (out / "report.html").read_text()

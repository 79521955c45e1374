"""Parts of ``benchmarks/anchors.py``, one job each: ``venv`` (ModelOpt's own virtual environment, or the reason
it cannot be had), ``tools`` (the calibration child jobs: ONNX Runtime, ModelOpt, the workbench), ``rows``
(a sign-off record + the tools' runs -> table rows) and ``agreement`` (the random-weight base model's judging:
each quantized model against the FP32 model's own output)."""

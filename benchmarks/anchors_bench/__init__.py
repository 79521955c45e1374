"""Parts of ``benchmarks/anchors.py``, one job each: ``venv`` (ModelOpt's own virtual environment, or the reason
it cannot be had), ``tools`` (the calibration child jobs: ONNX Runtime, ModelOpt, the workbench) and ``rows``
(a sign-off record + the tools' runs -> table rows)."""

"""FP32 vs quantized analysis: per-layer comparison (Polygraphy), sensitivity ranking, mixed-precision search.

Modules, one job each: ``metrics`` (tensor error metrics and their streaming accumulation),
``groups`` (which MatMul/Gemm/Conv nodes form a layer group), ``clips`` (a few clips per condition),
``layers`` (Polygraphy layer-by-layer comparison), ``sensitivity`` (quantize one group at a time),
``evaluator`` (full WER evaluation of a plan on a dev set), ``search`` (ranking + bisection for the plan
with the most INT8 within a WER budget), ``outputs`` (JSON/CSV files and provenance), ``setup``
(FP32 ONNX + calibration cache for a model and calibration set).
"""

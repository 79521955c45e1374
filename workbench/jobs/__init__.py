"""Jobs: what a CLI verb, the demo and the dashboard's Run page actually run.

One module per job, each with a typed input dataclass, a ``run(inputs)`` that returns a typed result
dataclass, and the result's ``lines()`` (what a person reads after the job):
``sets`` (build balanced calibration/evaluation speech sets), ``import_set`` (a whole source as one
evaluation- or calibration-only set), ``calibrate`` (export or reuse the FP32
ONNX, calibrate or reuse a matching cache, write the INT8 Q/DQ variant), ``prepare`` (FP32 ONNX +
a checked cache for the analyses), ``compare`` (layer table and sensitivity ranking), ``search``
(mixed INT8/FP16 plan within the WER budget), ``signoff`` (judge candidates, write the report) and
``build`` (a cached TensorRT engine). Jobs call the library packages and each other, never the CLI.
"""

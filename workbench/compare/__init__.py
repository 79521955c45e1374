"""FP32 vs quantized analysis: per-layer comparison (Polygraphy) and the per-group sensitivity ranking.

Modules, one job each: ``metrics`` (tensor error metrics and their streaming accumulation),
``groups`` (which MatMul/Gemm/Conv nodes form a layer group), ``layers`` (Polygraphy layer-by-layer
comparison), ``sensitivity`` (quantize one group at a time; ``VariantRunner`` builds and runs variants
in memory), ``outputs`` (file names, headers, JSON and CSV). The mixed-precision search that uses the
ranking is ``workbench.search``; the job that runs both is ``workbench.jobs.compare``.
"""

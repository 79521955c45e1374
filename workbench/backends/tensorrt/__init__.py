"""TensorRT back-end: the only code in the workbench that imports TensorRT.

``loader`` picks ``tensorrt`` (10.x with the STRONGLY_TYPED network flag, or 11.x) or else
``tensorrt_rtx_bindings`` (TensorRT-RTX, builds engines with no GPU). ``profile`` derives the
optimisation profile, ``builder`` builds and caches engines, ``summary`` describes the parsed
network's precisions, ``runner`` executes engines and ``calibrator`` serves a legacy INT8 cache to
TensorRT <= 10. Importing this package imports no TensorRT module; only calling into it does.
"""

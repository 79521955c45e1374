"""Precision sign-off workbench for Wav2Vec2-style CTC speech models.

The package builds balanced calibration/evaluation speech sets, calibrates activation ranges,
writes Q/DQ ONNX variants and TensorRT engines, measures WER and latency, and writes sign-off
reports. Entry points: the ``workbench`` console script, same as ``python -m workbench``; artifacts go
under the workspace (``workbench.workspace``), the demo model is package data (``workbench.resources``).
"""

__version__ = "0.1.0"

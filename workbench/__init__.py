"""Precision sign-off workbench for Wav2Vec2-style CTC speech models.

The package builds balanced calibration/evaluation speech sets, calibrates activation ranges,
writes Q/DQ ONNX variants and TensorRT engines, measures WER and latency, and writes sign-off
reports. Entry point: ``python -m workbench``.
"""

__version__ = "0.1.0"

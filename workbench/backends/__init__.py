"""Inference back-ends with one runner life cycle (activate, infer, deactivate, last inference time).

``onnxruntime`` (CPU; CUDA when onnxruntime-gpu is installed), ``tensorrt`` (TensorRT or
TensorRT-RTX; the only code that imports TensorRT) and ``torch_reference`` (the PyTorch model).
"""

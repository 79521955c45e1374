"""Precision plans and the one function that turns FP32 ONNX + ranges + plan into a variant."""

"""Model access: the model description (supported CTC architectures, vocabulary, features, text rules, error
unit), loading, ONNX export and parity check, published configs and look-alike models for tests."""

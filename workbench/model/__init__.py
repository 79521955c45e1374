"""Model access: load Hugging Face Wav2Vec2ForCTC models, export ONNX, check parity."""

"""Parts of ``benchmarks/inference.py``, one job each: ``prep`` (clips and precision variants), ``child`` (the
timing child process and its protocol), ``gpu`` (NVML memory and device-resident timing), ``interleaved``
(robust ratios in one process), ``accuracy`` (logits and WER of the variants), ``report`` (rows, table,
speed-ups)."""

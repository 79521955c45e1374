"""Evaluation: text normalisation, WER with bootstrap intervals, transcription, latency, gates.

The core accuracy entry point is :func:`workbench.evaluate.accuracy.compare_accuracy`, which returns
one rich :class:`~workbench.evaluate.accuracy.AccuracyComparison`; everything else reads its fields.
"""

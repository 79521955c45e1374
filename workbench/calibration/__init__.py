"""Activation-range calibration: streaming statistics, range methods and the calibration cache."""

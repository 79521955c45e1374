"""Speech data: sources, conditions (quiet, noisy, accented) and the calibration/eval set builder."""

"""The numba-compiled counting loop (imported only through ``workbench.calibration.kernels``)."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(nogil=True, cache=True, boundscheck=False)
def count_into(values, inverse, limit, counts):  # pragma: no cover - compiled
    """Add trunc(|v| * inverse) of every value to ``counts``; (max |v|, values counted).

    At a value with ``|v| * inverse >= limit`` (or a NaN) the counts made so far are taken back and
    the index of that value is returned as the count, so ``counted < values.size`` means "not done".
    """
    top = np.float32(0.0)
    for k in range(values.size):
        magnitude = abs(values[k])
        if magnitude > top:
            top = magnitude
        scaled = magnitude * inverse
        if not scaled < limit:
            for j in range(k):
                counts[np.int64(abs(values[j]) * inverse)] -= 1
            return top, k
        counts[np.int64(scaled)] += 1
    return top, values.size

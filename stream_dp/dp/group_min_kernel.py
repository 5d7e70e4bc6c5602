"""Compiled (numba) minimum per group: what ``np.minimum.at(out, group, values)`` computes,
in one linear pass (``ufunc.at`` is unbuffered and slow on a window's ~10^6 readings).

Used for the spans' first windows (docs/math.md §13.3): per pair the earliest reading, per
cell the earliest window of its pairs. Exact (a minimum rounds nothing); a NaN propagates
as in ``np.minimum``.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def minimum_at(
    out: np.ndarray, group: np.ndarray, values: np.ndarray
) -> None:  # pragma: no cover - compiled
    """``out[g] = min(out[g], values[i])`` for every ``i`` with ``group[i] == g``."""
    for i in range(len(group)):
        g = group[i]
        v = values[i]
        if v < out[g] or v != v:
            out[g] = v

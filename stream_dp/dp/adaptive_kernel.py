"""Compiled (numba) scan for :func:`stream_dp.dp.adaptive_cells.best_cap_mean_error`."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def best_cap_scan(
    unit: np.ndarray,
    count: np.ndarray,
    n_units: int,
    upper: float,
    mean_epsilon: np.ndarray,
    prefix_limit: int,
    noise_factor: float,
) -> np.ndarray:  # pragma: no cover - compiled
    """Per unit, the least ``U (1 - S(c)/M) + noise_factor U c / (S(c) eps_u)`` (``eps_u``:
    ``mean_epsilon[u]``) over the caps
    ``c`` that are one of the unit's counts or ``prefix_limit`` (< 0: none), within
    [min, max] and with ``c <= C`` or ``c = max``. Entries sorted by (unit, count)."""
    out = np.full(n_units, np.inf)
    n = len(unit)
    a = 0
    while a < n:
        u = unit[a]
        b = a
        total = 0
        while b < n and unit[b] == u:
            total += count[b]
            b += 1
        lowest, highest = count[a], count[b - 1]
        total_f = float(total)
        best = np.inf
        below = 0  # sum of the counts <= the cap
        i = a
        at_c_done = prefix_limit < 0 or not (lowest <= prefix_limit <= highest)
        while i < b:
            c = count[i]
            if not at_c_done and prefix_limit < c:  # the cap C lies between counts
                kept = float(below + prefix_limit * (b - i))
                value = (
                    upper * (1.0 - kept / total_f)
                    + noise_factor * (upper * prefix_limit / kept) / mean_epsilon[u]
                )
                best = min(best, value)
                at_c_done = True
            j = i
            while j < b and count[j] == c:
                below += c
                j += 1
            if prefix_limit < 0 or c <= prefix_limit or c == highest:
                kept = float(below + c * (b - j))
                value = (
                    upper * (1.0 - kept / total_f)
                    + noise_factor * (upper * c / kept) / mean_epsilon[u]
                )
                best = min(best, value)
            i = j
        out[u] = best
        a = b
    return out

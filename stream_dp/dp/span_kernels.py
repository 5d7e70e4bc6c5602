"""Compiled (numba) steps of the spans (docs/math.md §13.3) over a window's ~10^6 logged
readings, each one linear pass where numpy needs several (or an unbuffered ``ufunc.at``):

- :func:`minimum_at`: ``np.minimum.at(out, group, values)``, for per pair the earliest
  reading and per cell the earliest window of its pairs (exact; a NaN propagates as in
  ``np.minimum``);
- :func:`earliest_of_groups`: per group of pairs (a released cell's), its earliest reading;
- :func:`take_readings`: the logged readings of the pairs a carry keeps, renumbered.
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


@njit(cache=True, nogil=True)
def earliest_of_groups(
    reading_pair: np.ndarray, reading_ts: np.ndarray, group_of_pair: np.ndarray, n_groups: int
) -> tuple[np.ndarray, bool]:  # pragma: no cover - compiled
    """Per group of pairs (``group_of_pair``, -1: none), the earliest time of its pairs'
    readings (+inf: none), in one pass over the log into an array of ``n_groups``; and
    whether every time read was finite (else the caller takes the per-pair way, whose
    NaN and infinities leave a pair out instead)."""
    out = np.full(n_groups, np.inf)
    finite = True
    for i in range(len(reading_pair)):
        g = group_of_pair[reading_pair[i]]
        if g >= 0:
            t = reading_ts[i]
            if not np.isfinite(t):
                finite = False
            elif t < out[g]:
                out[g] = t
    return out, finite


@njit(cache=True, nogil=True)
def take_readings(
    reading_pair: np.ndarray, pair_map: np.ndarray, ts: np.ndarray, value: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """The readings whose pair maps to ``pair_map[pair] >= 0``, in log order: their new pair
    numbers, times and values (``live = pair_map[reading_pair] >= 0`` and the three columns
    at ``live``)."""
    n = 0
    for i in range(len(reading_pair)):
        if pair_map[reading_pair[i]] >= 0:
            n += 1
    pair = np.empty(n, dtype=np.int64)
    out_ts = np.empty(n, dtype=ts.dtype)
    out_value = np.empty(n, dtype=value.dtype)
    k = 0
    for i in range(len(reading_pair)):
        p = pair_map[reading_pair[i]]
        if p >= 0:
            pair[k], out_ts[k], out_value[k] = p, ts[i], value[i]
            k += 1
    return pair, out_ts, out_value

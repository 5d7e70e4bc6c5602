"""Compiled (numba) array steps of the release path that numpy can only do by sorting.

- :func:`stable_order_by`: a counting sort (O(n + keys)) for small integer keys, so ordering
  a window's pairs by (cell, vehicle) is two linear passes instead of an O(n log n) sort;
  :func:`order_by_pair` orders by two such keys, in one pass when their product is small;
- :func:`first_readings_sums`: per pair, the sum and sum of squares of its first ``need``
  stored readings in (event time, value) order — the kept readings of a capped pair
  (pseudo-user step, composition paper Sec. V-B3) — without sorting the whole reading log.

Both are exact (no floating-point reassociation: sums run in event-time order) and checked
against numpy in the tests.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def stable_order_by(keys: np.ndarray, n_keys: int) -> np.ndarray:  # pragma: no cover - compiled
    """The stable order of ``keys`` (integers in ``[0, n_keys)``): ``keys[order]`` ascends
    and equal keys keep their relative order."""
    start = np.zeros(n_keys + 1, dtype=np.int64)
    for k in keys:
        start[k + 1] += 1
    for k in range(n_keys):
        start[k + 1] += start[k]
    order = np.empty(len(keys), dtype=np.int64)
    for i in range(len(keys)):
        k = keys[i]
        order[start[k]] = i
        start[k] += 1
    return order


def order_by_pair(major: np.ndarray, minor: np.ndarray, n_major: int, n_minor: int) -> np.ndarray:
    """The stable order by ``(major, minor)`` (integers in ``[0, n_major)``, ``[0, n_minor)``),
    i.e. ``np.lexsort((minor, major))``: one counting sort of ``major * n_minor + minor`` when
    that key range is at most a few times the length, else two (minor first, then major)."""
    n = len(major)
    if n_major * n_minor <= 4 * n + 65_536:
        key = major.astype(np.int64) * n_minor + minor
        return stable_order_by(key, n_major * n_minor)
    by_minor = stable_order_by(minor.astype(np.int64, copy=False), n_minor)
    return by_minor[stable_order_by(major[by_minor].astype(np.int64, copy=False), n_major)]


@njit(cache=True)
def first_readings_sums(
    reading_pair: np.ndarray,
    reading_ts: np.ndarray,
    reading_value: np.ndarray,
    need: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """For every pair ``p`` with ``need[p] > 0``: the sum and the sum of squares of its first
    ``need[p]`` logged readings by ``(ts, value)``, and how many readings it has logged
    (the caller checks that this is at least ``need[p]``)."""
    n_pairs = len(need)
    start = np.zeros(n_pairs + 1, dtype=np.int64)
    for p in reading_pair:
        if need[p] > 0:
            start[p + 1] += 1
    for p in range(n_pairs):
        start[p + 1] += start[p]
    fill = start[:-1].copy()
    ts = np.empty(start[n_pairs], dtype=np.float64)
    value = np.empty(start[n_pairs], dtype=np.float64)
    for i in range(len(reading_pair)):
        p = reading_pair[i]
        if need[p] > 0:
            j = fill[p]
            ts[j] = reading_ts[i]
            value[j] = reading_value[i]
            fill[p] = j + 1
    total = np.zeros(n_pairs, dtype=np.float64)
    total_sq = np.zeros(n_pairs, dtype=np.float64)
    stored = start[1:] - start[:-1]
    for p in range(n_pairs):
        a, b = start[p], start[p + 1]
        if need[p] <= 0 or a == b:
            continue
        for j in range(a + 1, b):  # insertion sort by (ts, value): segments are short
            t, v = ts[j], value[j]
            k = j - 1
            while k >= a and (ts[k] > t or (ts[k] == t and value[k] > v)):
                ts[k + 1] = ts[k]
                value[k + 1] = value[k]
                k -= 1
            ts[k + 1] = t
            value[k + 1] = v
        s = 0.0
        sq = 0.0
        for j in range(a, min(b, a + need[p])):
            s += value[j]
            sq += value[j] * value[j]
        total[p] = s
        total_sq[p] = sq
    return total, total_sq, stored

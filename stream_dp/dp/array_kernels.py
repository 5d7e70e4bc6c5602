"""Compiled (numba) array steps of the release path that numpy can only do by sorting.

- :func:`stable_order_by`: a counting sort (O(n + keys)) for small integer keys, so ordering
  a window's pairs by (cell, vehicle) is two linear passes instead of an O(n log n) sort;
  :func:`order_by_pair` orders by two such keys, in one pass when their product is small;
- :func:`entry_reading_sums`: per chosen pair, its totals and the running sums and sums of
  squares of its stored readings in (event time, value) order, laid out in entry order, from
  which :func:`kept_entry_sums` reads the kept readings of a capped pair (pseudo-user step,
  composition paper Sec. V-B3) in one sequential pass, without sorting the whole reading log;
- :func:`kept_cell_totals`: per-cell totals of the kept readings in one pass.

All are exact (no floating-point reassociation: sums run in event-time, resp. entry, order)
and checked against numpy / Python in the tests.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
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


def counting_sort_fits(n: int, n_keys: int) -> bool:
    """Whether a counting sort of ``n`` items over ``n_keys`` keys is linear in ``n`` (its
    count array is at most a few times the input)."""
    return n_keys <= 4 * n + 65_536


def order_by_pair(major: np.ndarray, minor: np.ndarray, n_major: int, n_minor: int) -> np.ndarray:
    """The stable order by ``(major, minor)`` (integers in ``[0, n_major)``, ``[0, n_minor)``),
    i.e. ``np.lexsort((minor, major))``: one counting sort of ``major * n_minor + minor`` when
    that key range is small, else two (minor first, then major), else ``lexsort`` itself."""
    n = len(major)
    if counting_sort_fits(n, n_major * n_minor):
        key = major.astype(np.int64) * n_minor + minor
        return stable_order_by(key, n_major * n_minor)
    if not (counting_sort_fits(n, n_major) and counting_sort_fits(n, n_minor)):
        return np.lexsort((minor, major))
    by_minor = stable_order_by(minor.astype(np.int64, copy=False), n_minor)
    major_by_minor = np.take(major, by_minor).astype(np.int64, copy=False)
    return np.take(by_minor, stable_order_by(major_by_minor, n_major))


@njit(cache=True, nogil=True)
def entry_reading_sums(
    entries: np.ndarray,
    n_pairs: int,
    total: np.ndarray,
    total_sq: np.ndarray,
    reading_pair: np.ndarray,
    reading_ts: np.ndarray,
    reading_value: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover
    """Everything the kept sums read, laid out in entry order (entry ``i`` is pair
    ``entries[i]`` of ``n_pairs``), so that reading it is one sequential pass.

    Returns ``(entry_total, entry_total_sq, start, sums, sums_sq)``: the pair's totals, and
    its logged readings in ``(ts, value)`` order as running sums: they occupy
    ``start[i]:start[i+1]`` and ``sums[start[i] + j]`` is the sum of the first ``j + 1``
    values (summed in that order, so a prefix of length ``k`` is exactly ``s = 0.0; s += v``
    over the first ``k``), likewise ``sums_sq`` for the squares. Readings of pairs that are
    not entries are skipped. Releases the GIL: the release runs it on the background thread
    while CLIP-USER runs, which is where the random reads over the window's pairs and
    readings go.
    """
    n = len(entries)
    entry_of_pair = np.full(n_pairs, -1, dtype=np.int64)
    entry_total = np.empty(n, dtype=np.float64)
    entry_total_sq = np.empty(n, dtype=np.float64)
    for i in range(n):
        p = entries[i]
        entry_of_pair[p] = i
        entry_total[i] = total[p]
        entry_total_sq[i] = total_sq[p]
    start = np.zeros(n + 1, dtype=np.int64)
    for r in range(len(reading_pair)):
        e = entry_of_pair[reading_pair[r]]
        if e >= 0:
            start[e + 1] += 1
    for i in range(n):
        start[i + 1] += start[i]
    fill = start[:-1].copy()
    ts = np.empty(start[n], dtype=np.float64)
    value = np.empty(start[n], dtype=np.float64)
    for r in range(len(reading_pair)):
        e = entry_of_pair[reading_pair[r]]
        if e >= 0:
            j = fill[e]
            ts[j] = reading_ts[r]
            value[j] = reading_value[r]
            fill[e] = j + 1
    sums = np.empty(start[n], dtype=np.float64)
    sums_sq = np.empty(start[n], dtype=np.float64)
    for i in range(n):
        a, b = start[i], start[i + 1]
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
        for j in range(a, b):
            s += value[j]
            sq += value[j] * value[j]
            sums[j] = s
            sums_sq[j] = sq
    return entry_total, entry_total_sq, start, sums, sums_sq


@njit(cache=True, nogil=True)
def kept_entry_sums(
    kept_count: np.ndarray,
    count: np.ndarray,
    entry_total: np.ndarray,
    entry_total_sq: np.ndarray,
    start: np.ndarray,
    sums: np.ndarray,
    sums_sq: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, int]:  # pragma: no cover - compiled
    """Per entry ``i`` (``count[i]`` readings; :func:`entry_reading_sums` for the rest), the
    sum and sum of squares of its first ``kept_count[i]`` readings: its totals when all are
    kept, 0 when none, else its running sums. One sequential pass; the third value is the
    first entry whose kept readings go beyond its stored prefix, or -1."""
    n = len(kept_count)
    out = np.empty(n, dtype=np.float64)
    out_sq = np.empty(n, dtype=np.float64)
    for i in range(n):
        k = kept_count[i]
        if k == count[i]:
            out[i] = entry_total[i]
            out_sq[i] = entry_total_sq[i]
        elif k <= 0:
            out[i] = 0.0
            out_sq[i] = 0.0
        else:
            if start[i + 1] - start[i] < k:
                return out, out_sq, i
            out[i] = sums[start[i] + k - 1]
            out_sq[i] = sums_sq[start[i] + k - 1]
    return out, out_sq, -1


@njit(cache=True)
def kept_cell_totals(
    cell_index: np.ndarray,
    n_cells: int,
    kept_count: np.ndarray,
    total: np.ndarray,
    total_sq: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """Per cell, in one pass over the entries: kept readings, vehicles with a kept reading,
    and the sums of the entries' ``total`` and ``total_sq``, each accumulated in entry order
    from 0 (as ``np.bincount`` with weights does, so the float sums are the same)."""
    readings = np.zeros(n_cells, dtype=np.int64)
    vehicles = np.zeros(n_cells, dtype=np.int64)
    sums = np.zeros(n_cells, dtype=np.float64)
    sums_sq = np.zeros(n_cells, dtype=np.float64)
    for i in range(len(cell_index)):
        g = cell_index[i]
        k = kept_count[i]
        readings[g] += k
        if k > 0:
            vehicles[g] += 1
        sums[g] += total[i]
        sums_sq[g] += total_sq[i]
    return readings, vehicles, sums, sums_sq

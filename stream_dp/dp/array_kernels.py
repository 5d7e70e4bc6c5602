"""Compiled (numba) array steps of the release path that numpy can only do by sorting.

- :func:`stable_order_by`: a counting sort (O(n + keys)) for small integer keys, so grouping
  a window's pairs by cell is one linear pass instead of an O(n log n) sort (called through
  :mod:`stream_dp.dp.ordering`, which also orders by two such keys; :func:`grouped_by` moves
  the pairs' columns into that order in the same pass);
- :func:`pair_prefix_sums`: per pair, the running sums and sums of squares of its stored
  readings in (event time, value) order, from which the kept readings of a capped pair
  (pseudo-user step, composition paper Sec. V-B3) are read off without sorting the whole
  reading log (:func:`wanted_prefix_sums`: of the pairs a cap cuts alone).

Both are exact (no floating-point reassociation: sums run in event-time order) and checked
against numpy in the tests.
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


@njit(cache=True, nogil=True)
def grouped_by(
    keys: np.ndarray, n_keys: int, first: np.ndarray, second: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """``keys``, ``first`` and ``second`` (each as long as ``keys``) in the
    :func:`stable_order_by` of ``keys``: one counting pass and one scatter of the two
    columns (the sorted keys are written run by run), instead of the order and three
    gathers."""
    start = np.zeros(n_keys + 1, dtype=np.int64)
    for k in keys:
        start[k + 1] += 1
    for k in range(n_keys):
        start[k + 1] += start[k]
    n = len(keys)
    sorted_keys = np.empty(n, dtype=keys.dtype)
    for k in range(n_keys):
        sorted_keys[start[k] : start[k + 1]] = k
    sorted_first = np.empty(n, dtype=first.dtype)
    sorted_second = np.empty(n, dtype=second.dtype)
    for i in range(n):
        k = keys[i]
        j = start[k]
        sorted_first[j] = first[i]
        sorted_second[j] = second[i]
        start[k] = j + 1
    return sorted_keys, sorted_first, sorted_second


@njit(cache=True, nogil=True)
def pair_prefix_sums(
    reading_pair: np.ndarray,
    reading_ts: np.ndarray,
    reading_value: np.ndarray,
    n_pairs: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """Every pair's logged readings in ``(ts, value)`` order, as running sums.

    Returns ``(start, sums, sums_sq)``: pair ``p``'s readings occupy ``start[p]:start[p+1]``
    and ``sums[start[p] + j]`` is the sum of its first ``j + 1`` values (summed in that
    order, so a prefix of length ``k`` is exactly ``s = 0.0; s += v`` over the first ``k``),
    likewise ``sums_sq`` for the squares. Releases the GIL: the release computes it in a
    thread while CLIP-USER runs.
    """
    start = np.zeros(n_pairs + 1, dtype=np.int64)
    for p in reading_pair:
        start[p + 1] += 1
    for p in range(n_pairs):
        start[p + 1] += start[p]
    fill = start[:-1].copy()
    ts = np.empty(len(reading_pair), dtype=np.float64)
    value = np.empty(len(reading_pair), dtype=np.float64)
    for i in range(len(reading_pair)):
        p = reading_pair[i]
        j = fill[p]
        ts[j] = reading_ts[i]
        value[j] = reading_value[i]
        fill[p] = j + 1
    all_pairs = np.ones(n_pairs, dtype=np.bool_)
    sums, sums_sq = _running_sums(start, ts, value, all_pairs)
    return start, sums, sums_sq


@njit(cache=True, nogil=True)
def wanted_prefix_sums(
    reading_pair: np.ndarray,
    reading_ts: np.ndarray,
    reading_value: np.ndarray,
    wanted: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """:func:`pair_prefix_sums` of the ``wanted`` pairs alone (a bool per pair), in its
    layout: a wanted pair's segment holds exactly what the whole log's would (same order,
    same running sums, so the same floats); every other pair's segment is empty. One pass
    over the log picks the wanted readings: the release needs the running sums of the few
    pairs a cap cuts, not of the whole window (benchmarks/release.py)."""
    n_pairs = len(wanted)
    start = np.zeros(n_pairs + 1, dtype=np.int64)
    picked = np.empty(len(reading_pair), dtype=np.int64)  # the wanted readings, in log order
    n = 0
    for i in range(len(reading_pair)):
        p = reading_pair[i]
        if wanted[p]:
            start[p + 1] += 1
            picked[n] = i
            n += 1
    for p in range(n_pairs):
        start[p + 1] += start[p]
    fill = start[:-1].copy()
    ts = np.empty(n, dtype=np.float64)
    value = np.empty(n, dtype=np.float64)
    for i in picked[:n]:
        p = reading_pair[i]
        j = fill[p]
        ts[j] = reading_ts[i]
        value[j] = reading_value[i]
        fill[p] = j + 1
    sums, sums_sq = _running_sums(start, ts, value, wanted)
    return start, sums, sums_sq


@njit(cache=True, nogil=True)
def _running_sums(
    start: np.ndarray, ts: np.ndarray, value: np.ndarray, wanted: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """Each ``wanted`` pair's segment ``start[p]:start[p + 1]`` of ``ts`` and ``value``
    sorted by (ts, value) in place, and its running sums and sums of squares."""
    sums = np.empty(len(value), dtype=np.float64)
    sums_sq = np.empty(len(value), dtype=np.float64)
    for p in range(len(wanted)):
        if not wanted[p]:
            continue
        a, b = start[p], start[p + 1]
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
    return sums, sums_sq


@njit(cache=True, nogil=True)
def gather_pair_totals(
    entries: np.ndarray, total: np.ndarray, total_sq: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """``total[entries]`` and ``total_sq[entries]`` in one pass (releases the GIL: the
    release runs it on the background thread while CLIP-USER runs)."""
    n = len(entries)
    out = np.empty(n, dtype=np.float64)
    out_sq = np.empty(n, dtype=np.float64)
    for i in range(n):
        pair = entries[i]
        out[i] = total[pair]
        out_sq[i] = total_sq[pair]
    return out, out_sq


@njit(cache=True, nogil=True)
def kept_entry_sums(
    entries: np.ndarray,
    kept_count: np.ndarray,
    count: np.ndarray,
    entry_total: np.ndarray,
    entry_total_sq: np.ndarray,
    start: np.ndarray,
    sums: np.ndarray,
    sums_sq: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, int]:  # pragma: no cover - compiled
    """Per chosen entry ``i`` (pair ``entries[i]`` with ``count[i]`` readings summing to
    ``entry_total[i]``, squares ``entry_total_sq[i]``), the sum and sum of squares of its
    first ``kept_count[i]`` readings: the entry's totals when all are kept, 0 when none, else
    the pair's running sums of :func:`pair_prefix_sums` (``start, sums, sums_sq``; may be empty
    when no entry is partly kept). The partly kept entries are looked up in pair order (one
    sequential pass over the pairs: the running sums are laid out by pair). The third value
    is the first entry whose kept readings go beyond its stored prefix, or -1."""
    n = len(entries)
    n_pairs = len(start) - 1
    out = np.empty(n, dtype=np.float64)
    out_sq = np.empty(n, dtype=np.float64)
    beyond = n
    wanted = np.zeros(0, dtype=np.int64)
    entry_of_pair = np.zeros(0, dtype=np.int64)
    for i in range(n):
        k = kept_count[i]
        if k == count[i]:
            out[i] = entry_total[i]
            out_sq[i] = entry_total_sq[i]
        elif k <= 0:
            out[i] = 0.0
            out_sq[i] = 0.0
        else:
            pair = entries[i]
            if pair >= n_pairs:
                beyond = min(beyond, i)
                continue
            if len(wanted) == 0:
                wanted = np.zeros(n_pairs, dtype=np.int64)
                entry_of_pair = np.empty(n_pairs, dtype=np.int64)
            wanted[pair] = k
            entry_of_pair[pair] = i
    for pair in range(len(wanted)):
        k = wanted[pair]
        if k > 0:
            i = entry_of_pair[pair]
            first = start[pair]
            if start[pair + 1] - first < k:
                beyond = min(beyond, i)
            else:
                out[i] = sums[first + k - 1]
                out_sq[i] = sums_sq[first + k - 1]
    return out, out_sq, (beyond if beyond < n else -1)


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

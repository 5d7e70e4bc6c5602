"""Compiled (numba) array steps of the release path that numpy can only do by sorting.

- :func:`stable_order_by`: a counting sort (O(n + keys)) for small integer keys, so grouping
  a window's pairs by cell is one linear pass instead of an O(n log n) sort (called through
  :mod:`stream_dp.dp.ordering`, which also orders by two such keys; :func:`grouped_by` moves
  the pairs' columns into that order in the same pass);
- :func:`pair_prefix_sums`: per pair, the running sums and sums of squares of its stored
  readings in (event time, value) order, from which the kept readings of a capped pair
  (pseudo-user step, composition paper Sec. V-B3) are read off without sorting the whole
  reading log (:func:`wanted_prefix_sums`: of the pairs a cap cuts alone;
  :func:`kept_entry_sums_of_log`: their kept sums straight off the log).

Both are exact (no floating-point reassociation: sums run in event-time order) and checked
against numpy in the tests.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _key_starts(keys: np.ndarray, n_keys: int) -> np.ndarray:  # pragma: no cover - compiled
    """Per key ``k`` in ``[0, n_keys)``, where its run starts in the stable order of ``keys``
    (``start[n_keys]``: their number): a counting sort's offsets."""
    start = np.zeros(n_keys + 1, dtype=np.int64)
    for k in keys:
        start[k + 1] += 1
    for k in range(n_keys):
        start[k + 1] += start[k]
    return start


@njit(cache=True, nogil=True)
def stable_order_by(keys: np.ndarray, n_keys: int) -> np.ndarray:  # pragma: no cover - compiled
    """The stable order of ``keys`` (integers in ``[0, n_keys)``): ``keys[order]`` ascends
    and equal keys keep their relative order."""
    start = _key_starts(keys, n_keys)
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
    _, sorted_keys, sorted_first, sorted_second = _scatter_by(keys, n_keys, first, second, False)
    return sorted_keys, sorted_first, sorted_second


@njit(cache=True, nogil=True)
def order_and_gather_by(
    keys: np.ndarray, n_keys: int, first: np.ndarray, second: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """:func:`grouped_by` with the :func:`stable_order_by` of ``keys`` first, written in the
    same scatter (instead of the order and two gathers through it: an occupancy's entries
    grouped by cell, :func:`~stream_dp.release.selection.occupancy_of`)."""
    return _scatter_by(keys, n_keys, first, second, True)


@njit(cache=True, nogil=True)
def _scatter_by(
    keys: np.ndarray, n_keys: int, first: np.ndarray, second: np.ndarray, with_order: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """The stable order of ``keys`` (empty unless ``with_order``), the sorted keys, and
    ``first`` and ``second`` in that order (:func:`grouped_by`)."""
    start = _key_starts(keys, n_keys)
    n = len(keys)
    sorted_keys = np.empty(n, dtype=keys.dtype)
    for k in range(n_keys):
        sorted_keys[start[k] : start[k + 1]] = k
    order = np.empty(n if with_order else 0, dtype=np.int64)
    sorted_first = np.empty(n, dtype=first.dtype)
    sorted_second = np.empty(n, dtype=second.dtype)
    for i in range(n):
        k = keys[i]
        j = start[k]
        if with_order:
            order[j] = i
        sorted_first[j] = first[i]
        sorted_second[j] = second[i]
        start[k] = j + 1
    return order, sorted_keys, sorted_first, sorted_second


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
        _sort_by_time(ts, value, a, b)
        s = 0.0
        sq = 0.0
        for j in range(a, b):
            s += value[j]
            sq += value[j] * value[j]
            sums[j] = s
            sums_sq[j] = sq
    return sums, sums_sq


@njit(cache=True, nogil=True)
def _sort_by_time(
    ts: np.ndarray, value: np.ndarray, a: int, b: int
) -> None:  # pragma: no cover - compiled
    """``ts[a:b]`` and ``value[a:b]`` sorted by (ts, value) in place: an insertion sort, as a
    pair's segment is short."""
    for j in range(a + 1, b):
        t, v = ts[j], value[j]
        k = j - 1
        while k >= a and (ts[k] > t or (ts[k] == t and value[k] > v)):
            ts[k + 1] = ts[k]
            value[k + 1] = value[k]
            k -= 1
        ts[k + 1] = t
        value[k + 1] = v


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
def _whole_entries(
    entries: np.ndarray,
    kept_count: np.ndarray,
    count: np.ndarray,
    entry_total: np.ndarray,
    entry_total_sq: np.ndarray,
    n_pairs: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:  # pragma: no cover - compiled
    """The sums of the entries kept whole (their totals) or not at all (0) written, and the
    partly kept ones (indices, ascending) left for the caller; the first such entry whose
    pair is not among ``n_pairs`` (``beyond``, else ``len(entries)``)."""
    n = len(entries)
    out = np.empty(n, dtype=np.float64)
    out_sq = np.empty(n, dtype=np.float64)
    beyond = n
    cut = np.empty(n, dtype=np.int64)
    n_cut = 0
    for i in range(n):
        k = kept_count[i]
        if k == count[i]:
            out[i] = entry_total[i]
            out_sq[i] = entry_total_sq[i]
        elif k <= 0:
            out[i] = 0.0
            out_sq[i] = 0.0
        elif entries[i] >= n_pairs:
            beyond = min(beyond, i)
        else:
            cut[n_cut] = i
            n_cut += 1
    return out, out_sq, cut[:n_cut], beyond


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
    out, out_sq, cut, beyond = _whole_entries(
        entries, kept_count, count, entry_total, entry_total_sq, n_pairs
    )
    wanted = np.zeros(n_pairs if len(cut) else 0, dtype=np.int64)
    entry_of_pair = np.empty(len(wanted), dtype=np.int64)
    for i in cut:
        pair = entries[i]
        wanted[pair] = kept_count[i]
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
    cell_index: np.ndarray, n_cells: int, kept_count: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """Per cell, in one pass over the entries: kept readings and vehicles with a kept reading
    (the cells' float sums are accurate sums: :mod:`stream_dp.dp.accurate_sum`)."""
    readings = np.zeros(n_cells, dtype=np.int64)
    vehicles = np.zeros(n_cells, dtype=np.int64)
    for i in range(len(cell_index)):
        g = cell_index[i]
        k = kept_count[i]
        readings[g] += k
        if k > 0:
            vehicles[g] += 1
    return readings, vehicles


@njit(cache=True, nogil=True)
def kept_entry_sums_of_log(
    entries: np.ndarray,
    kept_count: np.ndarray,
    count: np.ndarray,
    entry_total: np.ndarray,
    entry_total_sq: np.ndarray,
    reading_pair: np.ndarray,
    reading_ts: np.ndarray,
    reading_value: np.ndarray,
    n_pairs: int,
) -> tuple[np.ndarray, np.ndarray, int]:  # pragma: no cover - compiled
    """:func:`kept_entry_sums` with the partly kept entries' sums read off the reading log
    directly (``n_pairs`` pairs): one pass over the log picks those entries' readings (a
    flag per pair), which are then laid out in short segments (in log order), each sorted
    by (ts, value) and its first ``kept_count`` summed from 0.0 in that order: the floats of
    :func:`wanted_prefix_sums`'s running sums, without its arrays as long as the pairs."""
    n = len(entries)
    out, out_sq, cut_entry, beyond = _whole_entries(
        entries, kept_count, count, entry_total, entry_total_sq, n_pairs
    )
    n_cut = len(cut_entry)
    is_cut = np.zeros(n_pairs, dtype=np.bool_)
    slot = np.empty(n_pairs, dtype=np.int32)  # read only where is_cut
    for s in range(n_cut):
        pair = entries[cut_entry[s]]
        is_cut[pair] = True
        slot[pair] = s
    if n_cut == 0:
        return out, out_sq, (beyond if beyond < n else -1)
    picked = np.empty(len(reading_pair), dtype=np.int64)  # their readings, in log order
    m = 0
    for i in range(len(reading_pair)):  # without a branch: ~1 in 10 readings is picked
        picked[m] = i
        m += np.int64(is_cut[reading_pair[i]])
    segment = np.empty(m, dtype=np.int64)  # each picked reading's entry slot
    for q in range(m):
        segment[q] = slot[reading_pair[picked[q]]]
    start = _key_starts(segment, n_cut)
    fill = start[:-1].copy()
    ts = np.empty(m, dtype=np.float64)
    value = np.empty(m, dtype=np.float64)
    for q in range(m):
        j = fill[segment[q]]
        ts[j] = reading_ts[picked[q]]
        value[j] = reading_value[picked[q]]
        fill[segment[q]] = j + 1
    for s in range(n_cut):
        i = cut_entry[s]
        a, b = start[s], start[s + 1]
        k = kept_count[i]
        if b - a < k:
            beyond = min(beyond, i)
            continue
        _sort_by_time(ts, value, a, b)
        total = 0.0
        total_sq = 0.0
        for j in range(a, a + k):
            total += value[j]
            total_sq += value[j] * value[j]
        out[i] = total
        out_sq[i] = total_sq
    return out, out_sq, (beyond if beyond < n else -1)

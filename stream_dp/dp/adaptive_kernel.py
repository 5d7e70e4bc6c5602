"""Compiled (numba) steps of the adaptive choice (:mod:`stream_dp.dp.adaptive_cells`): the
scan of :func:`~stream_dp.dp.adaptive_cells.best_cap_mean_error`, the (group, vehicle)
aggregation of a level's entries, the unit price's weighted quantile (§13.1) and the
regrouping's moves of pairs (:class:`~stream_dp.release.adaptive.PairMoves`)."""

from __future__ import annotations

import numpy as np
from numba import njit

from stream_dp.dp.array_kernels import stable_order_by


@njit(cache=True, nogil=True, inline="always")
def _cap_error(
    upper: float, cap: int, kept: float, total: float, mean_epsilon: float, noise_factor: float
) -> float:  # pragma: no cover - compiled
    """A unit's predicted error at ``cap`` with ``kept`` of its ``total`` readings kept:
    ``U (1 - S/M) + noise_factor U c / (S eps)``."""
    return upper * (1.0 - kept / total) + noise_factor * (upper * cap / kept) / mean_epsilon


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
                best = min(
                    best,
                    _cap_error(upper, prefix_limit, kept, total_f, mean_epsilon[u], noise_factor),
                )
                at_c_done = True
            j = i
            while j < b and count[j] == c:
                below += c
                j += 1
            if prefix_limit < 0 or c <= prefix_limit or c == highest:
                kept = float(below + c * (b - j))
                best = min(best, _cap_error(upper, c, kept, total_f, mean_epsilon[u], noise_factor))
            i = j
        out[u] = best
        a = b
    return out


@njit(cache=True, nogil=True)
def best_cap_by_counts(
    unit: np.ndarray,
    count: np.ndarray,
    n_units: int,
    width: int,
    upper: float,
    mean_epsilon: np.ndarray,
    prefix_limit: int,
    noise_factor: float,
) -> np.ndarray:  # pragma: no cover - compiled
    """:func:`best_cap_scan` of the entries in any order (counts below ``width``): each
    unit's counts tallied per value, then scanned in ascending order with the same integer
    sums and the same float steps, so the floats are the scan's."""
    tally = np.zeros(n_units * width, dtype=np.int64)
    for i in range(len(unit)):
        tally[unit[i] * width + count[i]] += 1
    out = np.full(n_units, np.inf)
    for u in range(n_units):
        base = u * width
        n, total, lowest, highest = 0, 0, -1, -1
        for c in range(width):
            h = tally[base + c]
            if h:
                n += h
                total += h * c
                if lowest < 0:
                    lowest = c
                highest = c
        if n == 0:
            continue
        total_f = float(total)
        best = np.inf
        below, seen = 0, 0  # the sum and number of the counts below the current one
        at_c_done = prefix_limit < 0 or not (lowest <= prefix_limit <= highest)
        for c in range(lowest, highest + 1):
            h = tally[base + c]
            if h == 0:
                continue
            if not at_c_done and prefix_limit < c:  # the cap C lies between counts
                kept = float(below + prefix_limit * (n - seen))
                best = min(
                    best,
                    _cap_error(upper, prefix_limit, kept, total_f, mean_epsilon[u], noise_factor),
                )
                at_c_done = True
            below += h * c
            seen += h
            if prefix_limit < 0 or c <= prefix_limit or c == highest:
                kept = float(below + c * (n - seen))
                best = min(best, _cap_error(upper, c, kept, total_f, mean_epsilon[u], noise_factor))
        out[u] = best
    return out


@njit(cache=True, nogil=True)
def aggregate_pairs(
    group: np.ndarray, vehicle: np.ndarray, count: np.ndarray, n_groups: int, n_vehicles: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """One entry per distinct ``(group, vehicle)``, counts added: groups ascending, within a
    group its vehicles in the order they first appear (not sorted: what the adaptive choice
    computes from a group's entries does not depend on their order). A stable counting pass
    by group, then one slot per vehicle (:func:`_aggregate_in_order`)."""
    order = stable_order_by(group, n_groups)
    return _aggregate_in_order(order, group, vehicle, count, n_vehicles)


@njit(cache=True, nogil=True)
def aggregate_selected_pairs(
    group: np.ndarray,
    vehicle: np.ndarray,
    count: np.ndarray,
    select: np.ndarray,
    n_groups: int,
    n_vehicles: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """:func:`aggregate_pairs` of the ``select``-ed entries alone (the same entries as of
    ``group[select]``, ... ), without copying them out first."""
    start = np.zeros(n_groups + 1, dtype=np.int64)
    n = 0
    for i in range(len(group)):
        if select[i]:
            start[group[i] + 1] += 1
            n += 1
    for k in range(n_groups):
        start[k + 1] += start[k]
    order = np.empty(n, dtype=np.int64)
    for i in range(len(group)):
        if select[i]:
            k = group[i]
            order[start[k]] = i
            start[k] += 1
    return _aggregate_in_order(order, group, vehicle, count, n_vehicles)


@njit(cache=True, nogil=True)
def _aggregate_in_order(
    order: np.ndarray, group: np.ndarray, vehicle: np.ndarray, count: np.ndarray, n_vehicles: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """The aggregation of the entries ``order`` lists (grouped by group, ascending): one slot
    per vehicle; a slot below the group's first entry is an earlier group's, so the vehicle
    is new to this one."""
    n = len(order)
    slot = np.full(n_vehicles, -1, dtype=np.int64)
    out_group = np.empty(n, dtype=np.int64)
    out_vehicle = np.empty(n, dtype=np.int64)
    out_count = np.empty(n, dtype=np.int64)
    m, first, current = 0, 0, -1
    for i in order:
        g, v = group[i], vehicle[i]
        if g != current:  # the group's first entry
            first, current = m, g
        at = slot[v]
        if at < first:
            slot[v] = m
            out_group[m] = g
            out_vehicle[m] = v
            out_count[m] = count[i]
            m += 1
        else:
            out_count[at] += count[i]
    return out_group[:m], out_vehicle[:m], out_count[:m]


@njit(cache=True, nogil=True)
def weighted_quantile(
    order: np.ndarray,
    group: np.ndarray,
    value: np.ndarray,
    weight: np.ndarray,
    n_groups: int,
    quantile: float,
) -> np.ndarray:  # pragma: no cover - compiled
    """Per group, the ``weight``-weighted ``quantile`` of its entries' ``value`` (0 for a
    group with no entry); ``order``: the entries by (group, value). The floats are numpy's
    (one running sum over all entries, a binary search in it)."""
    n = len(order)
    g = np.empty(n, dtype=np.int64)
    r = np.empty(n, dtype=np.float64)
    cum = np.empty(n, dtype=np.float64)
    running = 0.0
    for j in range(n):
        i = order[j]
        g[j] = group[i]
        r[j] = value[i]
        running += float(weight[i])
        cum[j] = running
    out = np.zeros(n_groups)
    j = 0
    while j < n:
        k, start = g[j], j
        while j < n and g[j] == k:
            j += 1
        base = cum[start - 1] if start > 0 else 0.0
        goal = base + quantile * (cum[j - 1] - base)
        at = np.searchsorted(cum, goal)
        out[k] = r[min(at, j - 1)]
    return out


@njit(cache=True, nogil=True)
def split_moves(
    unit: np.ndarray, merged_unit: np.ndarray, vehicle: np.ndarray, count: np.ndarray
) -> tuple[np.ndarray, ...]:  # pragma: no cover - compiled
    """The regrouping's pairs (``unit``: each pair's new cell, -1: dropped) in one pass: the
    indices of the pairs that stay alone and of those whose cell is a ``merged_unit``, each in
    order, and buffers of new cells, vehicles and counts (int64) whose first entries are the
    lone pairs' (room left for one merged pair per merged entry). Without branching on
    merged or not (mixed at random in a window's pairs): each kept pair is written as both,
    and only the index of its kind moves on (issue 25: 3.8 → 1.5 ms on 551,000 pairs)."""
    n = len(unit)
    single = np.empty(n, dtype=np.int64)
    merged = np.empty(n, dtype=np.int64)
    cell = np.empty(n, dtype=np.int64)
    vehicles = np.empty(n, dtype=np.int64)
    counts = np.empty(n, dtype=np.int64)
    a, b = 0, 0
    for i in range(n):
        u = unit[i]
        if u < 0:
            continue
        is_merged = np.int64(merged_unit[u])
        single[a], cell[a], vehicles[a], counts[a] = i, u, vehicle[i], count[i]
        merged[b] = i
        a += 1 - is_merged
        b += is_merged
    return single[:a], merged[:b], cell[: a + b], vehicles[: a + b], counts[: a + b]


@njit(cache=True, nogil=True)
def merged_groups(
    unit: np.ndarray,
    vehicle: np.ndarray,
    count: np.ndarray,
    merged: np.ndarray,
    n_units: int,
    n_vehicles: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """The distinct (unit, vehicle) of the ``merged`` pairs in ascending order, each merged
    pair's index among them, and their counts added: ``pair_groups`` of the merged pairs' units
    and vehicles and a ``bincount`` of their counts, in one call (two counting sorts, by
    vehicle then by unit, and one scan)."""
    m = len(merged)
    merged_unit = np.empty(m, dtype=np.int64)
    merged_vehicle = np.empty(m, dtype=np.int64)
    merged_count = np.empty(m, dtype=np.int64)
    for q in range(m):
        i = merged[q]
        merged_unit[q], merged_vehicle[q], merged_count[q] = unit[i], vehicle[i], count[i]
    by_vehicle = stable_order_by(merged_vehicle, n_vehicles)
    order = by_vehicle[stable_order_by(merged_unit[by_vehicle], n_units)]  # by (unit, vehicle)
    group_unit = np.empty(m, dtype=np.int64)
    group_vehicle = np.empty(m, dtype=np.int64)
    summed = np.zeros(m, dtype=np.int64)
    group = np.empty(m, dtype=np.int64)
    n = -1
    for q in order:
        u, v = merged_unit[q], merged_vehicle[q]
        if n < 0 or u != group_unit[n] or v != group_vehicle[n]:
            n += 1
            group_unit[n], group_vehicle[n] = u, v
        group[q] = n
        summed[n] += merged_count[q]
    n += 1
    return group_unit[:n], group_vehicle[:n], group, summed[:n]

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


@njit(cache=True, nogil=True)
def aggregate_pairs(
    group: np.ndarray, vehicle: np.ndarray, count: np.ndarray, n_groups: int, n_vehicles: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """One entry per distinct ``(group, vehicle)`` in ascending order, counts added: what
    :func:`stream_dp.dp.adaptive_cells.pair_groups` and a ``bincount`` give. The entries are
    visited by vehicle (a counting sort), so each group meets its vehicles in ascending order
    and a repeat is the group's latest pair; then the pairs are counted out by group."""
    n = len(group)
    start = np.zeros(n_vehicles + 1, dtype=np.int64)
    for v in vehicle:
        start[v + 1] += 1
    for v in range(n_vehicles):
        start[v + 1] += start[v]
    by_vehicle = np.empty(n, dtype=np.int64)
    for i in range(n):
        v = vehicle[i]
        by_vehicle[start[v]] = i
        start[v] += 1
    latest = np.full(n_groups, -1, dtype=np.int64)  # per group: its latest pair
    pair_group = np.empty(n, dtype=np.int64)
    pair_vehicle = np.empty(n, dtype=np.int64)
    pair_count = np.empty(n, dtype=np.int64)
    per_group = np.zeros(n_groups + 1, dtype=np.int64)
    m = 0
    for i in by_vehicle:
        g, v = group[i], vehicle[i]
        k = latest[g]
        if k >= 0 and pair_vehicle[k] == v:
            pair_count[k] += count[i]
        else:
            latest[g] = m
            pair_group[m] = g
            pair_vehicle[m] = v
            pair_count[m] = count[i]
            per_group[g + 1] += 1
            m += 1
    for g in range(n_groups):
        per_group[g + 1] += per_group[g]
    out_group = np.empty(m, dtype=np.int64)
    out_vehicle = np.empty(m, dtype=np.int64)
    out_count = np.empty(m, dtype=np.int64)
    for k in range(m):
        g = pair_group[k]
        j = per_group[g]
        out_group[j] = g
        out_vehicle[j] = pair_vehicle[k]
        out_count[j] = pair_count[k]
        per_group[g] += 1
    return out_group, out_vehicle, out_count

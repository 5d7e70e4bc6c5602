"""Compiled (numba) single passes over a vehicle-budget plan's entries (docs/math.md §13), for
the release's steps after the plan: its own check of the plan, the pairs CLIP-USER and the cap
would leave, and the window's per-vehicle charge. Each replaces a few numpy passes (boolean
indexing, gathers, weighted ``np.bincount``) over the ~5·10^5 entries of a large window.

Every result is the one numpy gives: integer counts, and per-vehicle ε summed in entry order
starting from 0.0, as ``np.bincount(vehicle, weights=...)`` sums (an entry numpy weighs 0.0
adds nothing to a sum of positive ε). ``release.budget`` and ``release.accounting`` keep the
numpy forms as the tests' oracle.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def read_payments(
    cell_index: np.ndarray,
    vehicle_index: np.ndarray,
    kept: np.ndarray,
    cell_read: np.ndarray,
    epsilon: np.ndarray,
    n_vehicles: int,
    with_entries: bool,
) -> tuple[np.ndarray, np.ndarray, int, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """Per vehicle, how many entries it is read in and their cells' summed ``epsilon``; how
    many read entries have an ε that is not finite; ``with_entries``: the read entries in
    entry order, each one's vehicle and its cell's ε (else both empty). An entry is read
    when ``kept`` and its cell is ``cell_read``."""
    cells = np.zeros(n_vehicles, dtype=np.int64)
    paid = np.zeros(n_vehicles, dtype=np.float64)
    unpriced = 0
    for e in range(len(cell_index)):
        g = cell_index[e]
        if kept[e] and cell_read[g]:
            v = vehicle_index[e]
            eps = epsilon[g]
            if not np.isfinite(eps):
                unpriced += 1
            cells[v] += 1
            paid[v] += eps
    n_read = cells.sum() if with_entries else 0
    vehicle = np.empty(n_read, dtype=vehicle_index.dtype)
    read_eps = np.empty(n_read, dtype=np.float64)
    i = 0
    for e in range(len(cell_index) if with_entries else 0):
        g = cell_index[e]
        if kept[e] and cell_read[g]:
            vehicle[i] = vehicle_index[e]
            read_eps[i] = epsilon[g]
            i += 1
    return cells, paid, unpriced, vehicle, read_eps


@njit(cache=True, nogil=True)
def planned_counts(
    cell_index: np.ndarray,
    vehicle_index: np.ndarray,
    count: np.ndarray,
    kept: np.ndarray,
    cap: np.ndarray,
    epsilon: np.ndarray,
    n_vehicles: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int]:  # pragma: no cover - compiled
    """``(kept_count, kept_sum, grids, g1, sat_out)``: per entry its readings kept under its
    cell's ``cap`` (0 unkept), per cell their sum, per vehicle its kept entries; the most
    entries of one vehicle; how many vehicles have an unkept entry in a cell of finite
    ``epsilon`` (sit out a cell the plan did not drop)."""
    n_cells = len(cap)
    kept_count = np.zeros(len(count), dtype=np.int64)
    kept_sum = np.zeros(n_cells, dtype=np.int64)
    grids = np.zeros(n_vehicles, dtype=np.int64)
    entries = np.zeros(n_vehicles, dtype=np.int64)
    sat = np.zeros(n_vehicles, dtype=np.bool_)
    for e in range(len(count)):
        g, v = cell_index[e], vehicle_index[e]
        entries[v] += 1
        if kept[e]:
            c = min(count[e], cap[g])
            kept_count[e] = c
            kept_sum[g] += c
            grids[v] += 1
        elif np.isfinite(epsilon[g]):
            sat[v] = True
    g1 = 0
    sat_out = 0
    for v in range(n_vehicles):
        g1 = max(g1, entries[v])
        sat_out += sat[v]
    return kept_count, kept_sum, grids, g1, sat_out

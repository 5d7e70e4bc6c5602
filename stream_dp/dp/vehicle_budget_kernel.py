"""Compiled (numba) steps of the vehicle budget's plan (docs/math.md §13.1), each over the
entries of a few cells or vehicles instead of the whole occupancy.

Every float is computed by the same operations, in the same order, as the numpy
expressions of :func:`stream_dp.dp.vehicle_budget.cheapest_epsilon` and of the reference
plan (``stream_dp.testing.vehicle_budget_reference``): a cell's ε from integer sums, a
vehicle's payment summed over its entries in entry order, the sit-outs' running sum over the
over-room vehicles in ascending order. So the plan is the same bit for bit (tested).

Layouts: ``order[cell_start[g]:cell_start[g + 1]]`` are cell ``g``'s entries by count
ascending (ties in entry order); ``by_vehicle[vehicle_start[v]:vehicle_start[v + 1]]`` are
vehicle ``v``'s entries in entry order (so in ascending cell).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def cost_cells(
    cells: np.ndarray,
    cell_start: np.ndarray,
    order: np.ndarray,
    kept: np.ndarray,
    count: np.ndarray,
    total: np.ndarray,
    factor_upper: float,
    target: float,
    upper: float,
    prefix_limit: int,
    pseudo_user: bool,
    mean_eps: np.ndarray,
    cap: np.ndarray,
    n_kept: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """For each of ``cells``: the least mean ε meeting ``target`` with its kept entries and
    its cap (+inf and 0 where none does; ties to the smaller cap), and how many entries it
    keeps. ``prefix_limit`` < 0: none. ``factor_upper`` is ``ln20 (1 + rtol) U``. Equal
    counts share ``S(c)`` (each adds ``c`` below and takes one ``c`` off the rest), so a run of
    them is costed once: the later ones could only tie, and a tie keeps the first."""
    for g in cells:
        begin, end = cell_start[g], cell_start[g + 1]
        n = 0
        largest = 0
        for p in range(begin, end):
            e = order[p]
            if kept[e]:
                n += 1
                largest = count[e]  # ascending counts: the last kept is the largest
        n_kept[g] = n
        best = np.inf
        best_cap = 0
        m = total[g]
        if m <= 0:
            m = 1.0
        below = 0
        j = 0
        previous = -1
        for p in range(begin, end):
            e = order[p]
            if not kept[e]:
                continue
            c = count[e]
            s = below + (n - j) * c  # S(c): kept readings with this count as the cap
            below += c
            j += 1
            if c == previous:  # a run of equal counts has one S(c), one ε: its first's
                continue
            previous = c
            if not pseudo_user:
                allowed = c == largest
            elif prefix_limit >= 0:
                allowed = c <= prefix_limit or c == largest
            else:
                allowed = True
            slack = target - upper * (1.0 - s / m)
            if not (allowed and slack > 0 and s > 0):
                continue
            eps = factor_upper * c / (s * slack)
            if eps < best and np.isfinite(eps):
                best = eps
                best_cap = c
        mean_eps[g] = best
        cap[g] = best_cap


@njit(cache=True, nogil=True)
def clear_cells(
    cells: np.ndarray, cell_start: np.ndarray, order: np.ndarray, kept: np.ndarray
) -> None:  # pragma: no cover - compiled
    """No entry of ``cells`` is kept (they were dropped)."""
    for g in cells:
        for p in range(cell_start[g], cell_start[g + 1]):
            kept[order[p]] = False


@njit(cache=True, nogil=True)
def repay(
    cells: np.ndarray,
    cell_start: np.ndarray,
    order: np.ndarray,
    vehicle: np.ndarray,
    vehicle_start: np.ndarray,
    by_vehicle: np.ndarray,
    kept: np.ndarray,
    slot_cell: np.ndarray,
    epsilon: np.ndarray,
    paid: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """Each vehicle read in one of ``cells`` pays again the summed ε of its kept entries,
    summed in entry order (as ``np.bincount`` sums them). ``slot_cell``: the cell of each
    ``by_vehicle`` slot."""
    seen = np.zeros(len(paid), dtype=np.bool_)
    for g in cells:
        for p in range(cell_start[g], cell_start[g + 1]):
            v = vehicle[order[p]]
            if seen[v]:
                continue
            seen[v] = True
            total = 0.0
            for q in range(vehicle_start[v], vehicle_start[v + 1]):
                if kept[by_vehicle[q]]:
                    total += epsilon[slot_cell[q]]
            paid[v] = total


@njit(cache=True, nogil=True)
def pay_all(
    vehicle: np.ndarray, cell: np.ndarray, kept: np.ndarray, epsilon: np.ndarray, paid: np.ndarray
) -> None:  # pragma: no cover - compiled
    """Every vehicle's summed ε of its kept entries in one pass in entry order:
    ``np.bincount(vehicle, weights=np.where(kept, epsilon[cell], 0.0))`` into ``paid``."""
    paid[:] = 0.0
    for e in range(len(vehicle)):
        if kept[e]:
            paid[vehicle[e]] += epsilon[cell[e]]


@njit(cache=True, nogil=True)
def sit_outs(
    over: np.ndarray,
    vehicle_start: np.ndarray,
    by_vehicle: np.ndarray,
    kept: np.ndarray,
    slot_cell: np.ndarray,
    slot_count: np.ndarray,
    total: np.ndarray,
    epsilon: np.ndarray,
    excess: np.ndarray,
) -> np.ndarray:  # pragma: no cover - compiled
    """The entries the ``over`` vehicles (ascending) leave: each vehicle's kept entries by
    ``m / (M ε)`` ascending (ties to the smaller cell), left while the ε of the ones before
    it is short of the excess. The running sum runs over all of them in that order, as the
    reference's ``np.cumsum`` does. ``slot_cell``, ``slot_count``: each ``by_vehicle`` slot's
    cell and count."""
    leave = np.empty(len(by_vehicle), dtype=np.int64)
    n_leave = 0
    run = 0.0
    longest = 0
    for v in over:
        longest = max(longest, vehicle_start[v + 1] - vehicle_start[v])
    ranked = np.empty(longest, dtype=np.int64)
    score = np.empty(longest, dtype=np.float64)
    for v in over:
        k = 0
        for q in range(vehicle_start[v], vehicle_start[v + 1]):
            if not kept[by_vehicle[q]]:
                continue
            g = slot_cell[q]
            key = slot_count[q] / (total[g] * epsilon[g])
            i = k  # insertion sort by score, stable: ties stay in entry (= cell) order
            while i > 0 and score[i - 1] > key:
                score[i], ranked[i] = score[i - 1], ranked[i - 1]
                i -= 1
            score[i], ranked[i] = key, q
            k += 1
        limit = excess[v] - 1e-12
        first_cum, first_eps = 0.0, 0.0
        for i in range(k):
            q = ranked[i]
            eps = epsilon[slot_cell[q]]
            run = run + eps
            if i == 0:
                first_cum, first_eps = run, eps
            before = run - eps - (first_cum - first_eps)
            if before < limit:
                leave[n_leave] = by_vehicle[q]
                n_leave += 1
    return leave[:n_leave]

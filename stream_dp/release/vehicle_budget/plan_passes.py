"""Compiled (numba) single passes over a vehicle-budget plan's entries (docs/math.md §13), for
the release's steps after the plan: the pairs CLIP-USER and the cap would leave, and the
window's per-vehicle charge (which the plan is also checked by). Each replaces a few numpy
passes (boolean indexing, gathers, weighted ``np.bincount``) over the ~5·10^5 entries of a
large window.

Every result is the one numpy gives: integer counts, and per-vehicle ε summed in entry order
starting from 0.0, as ``np.bincount(vehicle, weights=...)`` sums (an entry numpy weighs 0.0
adds nothing to a sum of positive ε). The kept pairs' and the charge's passes are the
compiled forms of :data:`stream_dp.dp.kernels.PLANNED_COUNTS` and
:data:`~stream_dp.dp.kernels.READ_LOSS` (numpy forms:
:mod:`stream_dp.release.vehicle_budget.plan_sums`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from stream_dp.dp.epsilon_grid import EPSILON_STEP, ROUNDING_MARGIN
from stream_dp.dp.float_mean import GRID_SLACK, SHARE_SLACK_UNIT
from stream_dp.release.vehicle_budget.planner_kernel import round_up_one


@njit(cache=True, nogil=True)
def read_payments(
    cell_start: np.ndarray,
    vehicle_index: np.ndarray,
    kept: np.ndarray,
    cell_read: np.ndarray,
    epsilon: np.ndarray,
    n_vehicles: int,
    with_entries: bool,
    shares: tuple[np.ndarray, np.ndarray, float] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """Per vehicle, how many entries it is read in and their summed ε; ``with_entries``: the
    read entries in entry order, each one's vehicle and ε (else both empty). An entry is read
    when ``kept`` and its cell is ``cell_read``; cell ``g``'s entries are
    ``cell_start[g]:cell_start[g + 1]``. An entry's ε is its cell's ``epsilon``, or with
    ``shares`` = ``(kept_count, cap, mean_share)`` (per entry, per cell) its vehicle's own share
    of it (:func:`stream_dp.dp.individual_loss.entry_epsilons`, the same floats)."""
    cells = np.zeros(n_vehicles, dtype=np.int64)
    paid = np.zeros(n_vehicles, dtype=np.float64)
    n = 0
    for g in range(len(cell_start) - 1 if with_entries else 0):
        if cell_read[g]:
            for e in range(cell_start[g], cell_start[g + 1]):
                n += kept[e]
    vehicle = np.empty(n, dtype=vehicle_index.dtype)
    read_eps = np.empty(n, dtype=np.float64)
    n_read = 0
    for g in range(len(cell_start) - 1):
        if not cell_read[g]:
            continue
        eps = epsilon[g]
        slack = 0.0 if shares is None else _share_slack(shares[0], shares[1][g], cell_start, g)
        for e in range(cell_start[g], cell_start[g + 1]):
            if kept[e]:
                v = vehicle_index[e]
                own = eps if shares is None else _own_epsilon(eps, shares[0][e], shares[1][g],
                                                              slack, shares[2])  # fmt: skip
                cells[v] += 1
                paid[v] += own
                if with_entries:
                    vehicle[n_read], read_eps[n_read] = v, own
                n_read += 1
    return cells, paid, vehicle, read_eps


def read_loss(
    cell_start: np.ndarray,
    vehicle_index: np.ndarray,
    kept: np.ndarray,
    cell_read: np.ndarray,
    epsilon: np.ndarray,
    n_vehicles: int,
    shares: tuple[np.ndarray, np.ndarray, float] | None = None,
    with_entries: bool = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A window's charge under per-cell ε (:data:`stream_dp.dp.kernels.READ_LOSS`): per
    vehicle its read entries and their summed ε, and (``with_entries``; else both empty) the
    read entries' vehicles and ε, in one pass (:func:`read_payments`)."""
    return read_payments(
        cell_start, vehicle_index, kept, cell_read, epsilon, n_vehicles, with_entries, shares
    )


@njit(cache=True, nogil=True)
def _share_slack(
    kept_count: np.ndarray, cap: int, cell_start: np.ndarray, g: int
) -> float:  # pragma: no cover - compiled
    """Cell ``g``'s :func:`stream_dp.dp.float_mean.share_slack` (its S summed from its
    entries' ``kept_count``), by the same operations."""
    if cap <= 0:
        return 0.0
    kept = 0
    for e in range(cell_start[g], cell_start[g + 1]):
        kept += kept_count[e]
    top = float(cap)
    return GRID_SLACK + (top + 8.0) * float(kept) / top * SHARE_SLACK_UNIT


@njit(cache=True, nogil=True)
def _own_epsilon(
    eps: float, kept: int, cap: int, slack: float, mean_share: float
) -> float:  # pragma: no cover - compiled
    """One entry of :func:`stream_dp.dp.individual_loss.entry_epsilons` (``slack``: its
    cell's :func:`_share_slack`), by the same operations."""
    if not (kept < cap and cap > 0):
        return eps
    own = eps * mean_share * (kept / cap + slack) + eps * (1.0 - mean_share)
    return min(eps, round_up_one(own, 1.0 + ROUNDING_MARGIN, EPSILON_STEP))


@njit(cache=True, nogil=True)
def planned_counts(
    cell_start: np.ndarray,
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
    for g in range(n_cells):
        top, priced, total = cap[g], np.isfinite(epsilon[g]), 0
        for e in range(cell_start[g], cell_start[g + 1]):
            v = vehicle_index[e]
            entries[v] += 1
            if kept[e]:
                c = min(count[e], top)
                kept_count[e] = c
                total += c
                grids[v] += 1
            elif priced:
                sat[v] = True
        kept_sum[g] = total
    g1 = 0
    sat_out = 0
    for v in range(n_vehicles):
        g1 = max(g1, entries[v])
        sat_out += sat[v]
    return kept_count, kept_sum, grids, g1, sat_out

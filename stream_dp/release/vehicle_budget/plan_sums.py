"""A vehicle-budget plan's sums in numpy: the numpy forms of
:data:`stream_dp.dp.kernels.PLANNED_COUNTS` and :data:`~stream_dp.dp.kernels.READ_LOSS`,
whose compiled forms are single passes of :mod:`stream_dp.release.vehicle_budget.plan_passes`
(the same integers and floats: each sum adds the entries in entry order). Entries are grouped
by cell, cell ``g``'s being ``cell_start[g]:cell_start[g + 1]`` (docs/math.md §13)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from stream_dp.dp.individual_loss import entry_epsilons

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]


def _cell_of_entry(cell_start: IntArray) -> IntArray:
    return np.repeat(np.arange(len(cell_start) - 1, dtype=np.int64), np.diff(cell_start))


def planned_counts_by_bincount(
    cell_start: IntArray,
    vehicle_index: IntArray,
    count: IntArray,
    kept: BoolArray,
    cap: IntArray,
    epsilon: FloatArray,
    n_vehicles: int,
) -> tuple[IntArray, IntArray, IntArray, int, int]:
    """``(kept_count, kept_sum, grids, g1, sat_out)``: per entry its readings kept under its
    cell's ``cap`` (0 unkept), per cell their sum, per vehicle its kept entries; the most
    entries of one vehicle; how many vehicles sit out a cell of finite ``epsilon``."""
    cell_index = _cell_of_entry(cell_start)
    kept_count = np.where(kept, np.minimum(count, cap[cell_index]), 0).astype(np.int64)
    kept_sum = np.bincount(cell_index, weights=kept_count, minlength=len(cap)).astype(np.int64)
    grids = np.bincount(vehicle_index[kept], minlength=n_vehicles).astype(np.int64)
    entries = np.bincount(vehicle_index, minlength=n_vehicles)
    sat_out = ~kept & np.isfinite(epsilon)[cell_index]
    sat_out_vehicles = int(np.count_nonzero(np.bincount(vehicle_index[sat_out])))
    return kept_count, kept_sum, grids, int(entries.max(initial=0)), sat_out_vehicles


def read_loss_by_bincount(
    cell_start: IntArray,
    vehicle_index: IntArray,
    kept: BoolArray,
    cell_read: BoolArray,
    epsilon: FloatArray,
    n_vehicles: int,
    shares: tuple[IntArray, IntArray, float] | None = None,
    with_entries: bool = True,
) -> tuple[IntArray, FloatArray, IntArray, FloatArray]:
    """Per vehicle how many entries it is read in (``kept`` in a ``cell_read`` cell) and
    their summed ε, and (``with_entries``; else both empty) the read entries' vehicles and ε
    in entry order. An entry's ε is its
    cell's, or with ``shares`` = ``(kept_count, cap, mean_share)`` its vehicle's own share
    of it (:func:`~stream_dp.dp.individual_loss.entry_epsilons`, §13.1)."""
    cell_of = _cell_of_entry(cell_start)
    read = kept & cell_read[cell_of]
    eps = epsilon[cell_of]
    if shares is not None:
        kept_count, cap, mean_share = shares
        cell_kept = np.bincount(cell_of, weights=kept_count, minlength=len(cap))
        eps = entry_epsilons(
            np.where(read, eps, 0.0), kept_count, cap[cell_of], cell_kept[cell_of], mean_share
        )
    cells = np.bincount(vehicle_index[read], minlength=n_vehicles)
    paid = np.bincount(vehicle_index, weights=np.where(read, eps, 0.0), minlength=n_vehicles)
    if not with_entries:
        read = np.zeros(0, dtype=np.int64)
    return cells, paid.astype(np.float64, copy=False), vehicle_index[read], eps[read]

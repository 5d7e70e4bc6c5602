"""Bounding one vehicle's contribution to a window under secret routes (docs/math.md §14.2).

Each vehicle keeps at most ``L0`` of its (cell, vehicle) pairs: the ones with most readings,
ties broken by the cell's name (a public order). Each kept pair gives ONE value: the
vehicle's mean reading in the cell, clipped to ``[0, U]`` and rounded to the sum grid
``U / SUM_STEPS``. The choice reads only the vehicle's own pairs, so adding or removing a
vehicle changes at most ``L0`` cells, each by one vehicle and one value in ``[0, U]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray


@dataclass(frozen=True)
class BoundedCells:
    """Per cell (indices into the window's cell names): kept vehicles and the sum of their
    rounded means in grid steps (``U / sum_steps`` each)."""

    cell: NDArray[np.int64]
    vehicles: NDArray[np.int64]
    sum_steps: NDArray[np.int64]


def kept_pairs(vehicle: NDArray[np.int64], cell: NDArray[np.int64],
               count: NDArray[np.int64], cells_per_vehicle: int) -> NDArray[np.bool_]:  # fmt: skip
    """Per pair: kept (among its vehicle's ``L0`` pairs of most readings, ties by cell)."""
    order = np.lexsort((cell, -count, vehicle))
    sorted_vehicle = vehicle[order]
    starts = np.flatnonzero(np.r_[True, sorted_vehicle[1:] != sorted_vehicle[:-1]])
    run_start = np.repeat(starts, np.diff(np.r_[starts, len(order)]))
    rank = np.arange(len(order)) - run_start
    kept = np.zeros(len(order), dtype=bool)
    kept[order] = rank < cells_per_vehicle
    return kept


def rounded_means(count: NDArray[np.int64], total: NDArray[np.float64], upper: float,
                  sum_steps: int) -> NDArray[np.int64]:  # fmt: skip
    """Each pair's mean reading clipped to ``[0, U]``, in grid steps of ``U / sum_steps``
    (round half to even; one pair's value is within ``U / (2 sum_steps)`` of its mean)."""
    mean = np.clip(total / np.maximum(count, 1), 0.0, upper)
    return np.rint(mean / upper * sum_steps).astype(np.int64)


def bounded_cells(vehicle: NDArray[np.int64], cell: NDArray[np.int64],
                  count: NDArray[np.int64], total: NDArray[np.float64], upper: float,
                  cells_per_vehicle: int, sum_steps: int) -> BoundedCells:  # fmt: skip
    """Per cell with a kept pair: its vehicles and the sum of their rounded means."""
    kept = kept_pairs(vehicle, cell, count, cells_per_vehicle)
    values = rounded_means(count[kept], total[kept], upper, sum_steps)
    cells, where = np.unique(cell[kept], return_inverse=True)
    vehicles = np.bincount(where, minlength=len(cells)).astype(np.int64)
    sums = np.bincount(where, weights=values, minlength=len(cells))
    return BoundedCells(cells.astype(np.int64), vehicles, np.rint(sums).astype(np.int64))

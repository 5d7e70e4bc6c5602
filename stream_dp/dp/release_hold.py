"""The *hold* option of a cell: pool its readings into the span instead of releasing them now
(docs/math.md §13.5; the hold was measured in benchmarks/planner_gaps.md, not wired in).

Holding a cell ``h`` more hours is worth the expected useful readings of the pooled cell at
the end of those hours, minus a staleness cost per reading and hour. Everything is public:

- the cell's entries so far (one per vehicle, its readings) and how many hours they have
  waited (``age``: the span so far);
- its arrivals, estimated from the cell's own last windows (public occupancy): per hour the
  vehicles that were not in the hour before (:func:`arrival_rates`), each with the mean
  readings such a vehicle brought.

After ``h`` more hours the predicted cell holds today's entries (a vehicle that stays adds
readings, not vehicles: under the cap it lowers no noise, so none are added for it) plus
``⌊h · arrivals⌋`` new vehicles of that mean count. Its expected useful readings are
:func:`~stream_dp.dp.release_candidates.cell_options`' at the best ε option meeting T within
the burst; the hold is worth that times ``1 − κ (age + h)`` (the staleness weight of a
release-now candidate, ``1 − κ age``, at the later age), maximised over ``h ≤ max_span_hours −
age``. It pays nothing now: its vehicles pay when the pooled cell is released.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from stream_dp.dp.release_candidates import cell_options

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


def staleness_weight(max_span_hours: int) -> float:
    """κ, the staleness cost of a useful reading per hour it waits: ``1 / (2 max_span_hours)``
    (a reading released at the operator's span limit is worth half a live one). One value for
    all data: it depends only on the operator's limit (docs/math.md §13.5)."""
    if max_span_hours < 1:
        raise ValueError(f"max_span_hours: must be >= 1, got {max_span_hours!r}")
    return 1.0 / (2.0 * max_span_hours)


@dataclass(frozen=True)
class HoldValues:
    """Per cell: the hold's value (0 when holding cannot meet T within the span limit),
    the hours more it waits (0: no hold) and the ε the pooled cell is predicted to need."""

    value: FloatArray
    hours: IntArray
    epsilon: FloatArray


def arrival_rates(
    window: IntArray, cell: IntArray, vehicle: IntArray, count: IntArray, n_cells: int
) -> tuple[FloatArray, FloatArray]:
    """Per cell (``0 … n_cells − 1``), from its last windows' occupancy (one row per window,
    cell and vehicle; ``window`` consecutive integers): the mean new vehicles per window (in
    the cell but not in it the window before; the first window gives none) and the mean
    readings of such a vehicle (0 when none came)."""
    window = np.asarray(window, dtype=np.int64)
    cell = np.asarray(cell, dtype=np.int64)
    vehicle = np.asarray(vehicle, dtype=np.int64)
    if not len(window):
        return np.zeros(n_cells), np.zeros(n_cells)
    first, last = int(window.min()), int(window.max())
    stride = int(vehicle.max()) + 1
    key = cell * stride + vehicle
    before = set(zip((window + 1).tolist(), key.tolist(), strict=True))
    new = np.array([(w, k) not in before for w, k in zip(window.tolist(), key.tolist(),
                                                       strict=True)])  # fmt: skip
    new &= window > first
    arrivals = np.bincount(cell[new], minlength=n_cells).astype(np.float64)
    readings = np.bincount(cell[new], weights=np.asarray(count)[new], minlength=n_cells)
    with np.errstate(divide="ignore", invalid="ignore"):
        per_vehicle = np.where(arrivals > 0, readings / arrivals, 0.0)
    return arrivals / max(last - first, 1), per_vehicle


def hold_values(
    cell_start: IntArray,
    count: IntArray,
    age: IntArray,
    arrivals: FloatArray,
    arrival_count: FloatArray,
    *,
    max_span_hours: int,
    staleness: float,
    **options: Any,
) -> HoldValues:
    """:class:`HoldValues` of the cells whose entries are ``count[cell_start[g]:cell_start[g +
    1]]``, ``age[g]`` hours old, expecting ``arrivals[g]`` new vehicles an hour of
    ``arrival_count[g]`` readings each (module docstring). ``options``: ``cell_options``'
    keyword arguments (``upper``, ``target``, ``tau``, ``factors``, ``max_epsilon``, …)."""
    count = np.asarray(count, dtype=np.int64)
    sizes = np.diff(cell_start)
    n_cells = len(sizes)
    age = np.asarray(age, dtype=np.int64)
    more = np.maximum(max_span_hours - age, 0)  # hours each cell may still wait
    cell = np.repeat(np.arange(n_cells), more)
    hours = np.arange(len(cell)) - np.repeat(np.cumsum(more) - more, more) + 1
    new = np.floor(hours * np.asarray(arrivals, dtype=np.float64)[cell] + 1e-9).astype(np.int64)
    new_count = np.maximum(np.rint(np.asarray(arrival_count)[cell]), 1).astype(np.int64)
    own = sizes[cell]
    start = np.r_[0, np.cumsum(own + new)].astype(np.int64)
    old_entry = np.repeat(np.asarray(cell_start)[cell], own) + (
        np.arange(int(own.sum())) - np.repeat(np.cumsum(own) - own, own)
    )
    layout = np.zeros(int(start[-1]), dtype=bool)  # True: a predicted arrival
    layout[_ranks(own, new, start)] = True
    counts = np.empty(int(start[-1]), dtype=np.int64)
    counts[~layout] = count[old_entry]
    counts[layout] = np.repeat(new_count, new)
    best = np.zeros(n_cells)
    wait = np.zeros(n_cells, dtype=np.int64)
    eps = np.full(n_cells, np.inf)
    if not len(cell):
        return HoldValues(best, wait, eps)
    opts = cell_options(start, counts, **options)
    useful = np.where(opts.meets, opts.useful, -np.inf)
    column = np.argmax(useful, axis=1)
    rows = np.arange(len(cell))
    worth = np.maximum(useful[rows, column], 0.0) * (1.0 - staleness * (age[cell] + hours))
    worth = np.where(np.isfinite(worth) & (worth > 0), worth, 0.0)
    order = np.lexsort((hours, -worth, cell))  # per cell its best horizon first (soonest)
    top = order[np.r_[True, cell[order][1:] != cell[order][:-1]]]
    best[cell[top]] = worth[top]
    found = worth[top] > 0
    wait[cell[top][found]] = hours[top][found]
    eps[cell[top][found]] = opts.epsilon[top, column[top]][found]
    return HoldValues(best, wait, eps)


def _ranks(own: IntArray, new: IntArray, start: IntArray) -> IntArray:
    """The positions of the predicted arrivals: after each predicted cell's own entries."""
    first = start[:-1] + own
    return np.repeat(first, new) + (np.arange(int(new.sum())) - np.repeat(np.cumsum(new) - new,
                                                                        new))  # fmt: skip

"""Stage 1 of the release, select cells (docs/math.md §9.1): the cells to release and their
occupancy array, from public counts only."""

from __future__ import annotations

import numpy as np

from stream_dp.dp import kernels
from stream_dp.dp.occupancy import Occupancy
from stream_dp.windows.columns import WindowColumns


def select_cells(
    columns: WindowColumns,
    min_vehicles: int,
    top_cells: int | None,
    usable: np.ndarray | None = None,
) -> np.ndarray:
    """Cells (codes) chosen from public information only: vehicle and reading counts (of the
    ``usable`` pairs only, when given)."""
    n_cells = len(columns.cell_names)
    cell_code, count = columns.cell_code, columns.count
    if usable is not None:
        cell_code, count = cell_code[usable], count[usable]
    vehicles = np.bincount(cell_code, minlength=n_cells)
    chosen = np.flatnonzero(vehicles >= min_vehicles)
    if top_cells is not None and len(chosen) > top_cells:
        # Performance: the readings (a weighted pass over the pairs) only rank a top-k cut.
        readings = np.bincount(cell_code, weights=count, minlength=n_cells)
        busiest_first = np.lexsort((chosen, -readings[chosen]))  # ties: smaller cell id
        chosen = np.sort(chosen[busiest_first[:top_cells]])
    return chosen


def occupancy_of(
    columns: WindowColumns, chosen: np.ndarray, usable: np.ndarray | None = None
) -> tuple[Occupancy, np.ndarray]:
    """The occupancy array of the chosen cells (``usable`` pairs only, when given) and, per
    entry, its index into ``columns``.
    Cell and vehicle names are sorted, so ranks are prefix sums of presence flags. Entries are
    grouped by cell with one counting sort; within a cell they keep the columns' order (which
    nothing computed from an occupancy depends on, see :class:`Occupancy`)."""
    names = columns.vehicle_names
    if usable is None and len(chosen) == len(columns.cell_names):
        # Performance (benchmarks/release.py): ranks are prefix sums of presence flags and the
        # entries are grouped by cell with one counting sort (occupancy 17.7 → 7.4 ms). Every pair
        # (so every vehicle) is in: the codes are already the ranks.
        entries = None
        cell_index, vehicle_index = columns.cell_code, columns.vehicle_code
        vehicles = names
    else:
        in_chosen = np.zeros(len(columns.cell_names), dtype=bool)
        in_chosen[chosen] = True
        if usable is not None:
            entries = np.flatnonzero(in_chosen[columns.cell_code] & usable)
        else:
            entries = np.flatnonzero(in_chosen[columns.cell_code])
        cell_index = (np.cumsum(in_chosen) - 1)[columns.cell_code[entries]]
        vehicle_code = columns.vehicle_code[entries]
        used = np.zeros(len(names), dtype=bool)
        used[vehicle_code] = True
        used_vehicles = np.flatnonzero(used)
        vehicle_index = (np.cumsum(used) - 1)[vehicle_code]
        vehicles = (
            names
            if len(used_vehicles) == len(names)
            else tuple(names[v] for v in used_vehicles.tolist())
        )
    keys = cell_index.astype(np.int64, copy=False)
    # Performance (issue 25): compiled, the order, the cell column and the entries' vehicles
    # and counts in one counting sort's scatter, without two gathers through the order.
    count = columns.count if entries is None else np.take(columns.count, entries)
    order, cell_of, vehicle_of, count_of = kernels.ORDER_AND_GATHER.pick(len(keys))(
        keys, len(chosen), vehicle_index, count
    )
    entry_of = order if entries is None else np.take(entries, order)
    vehicle_of = vehicle_of.astype(np.int64, copy=False)
    occupancy = Occupancy(
        cells=tuple(columns.cell_names[c] for c in chosen.tolist()),
        vehicles=vehicles,
        cell_index=cell_of,
        vehicle_index=vehicle_of,
        count=count_of,
    )
    return occupancy, entry_of

"""The cells the optimiser may release in a window (docs/math.md §13.5): the regrouping's
cells and, for the ones it names, their parents up to R0, each with its vehicles' readings
(CSR) and the observed cells it covers. Counts and names only (public, §2.2)."""

from __future__ import annotations

from dataclasses import dataclass

import h3
import numpy as np

from stream_dp.dp.adaptive_cells import AdaptiveCells
from stream_dp.dp.occupancy import Occupancy
from stream_dp.windows.columns import WindowColumns


@dataclass(frozen=True)
class CandidateCells:
    """Rows ``0 … n − 1``: the chosen cells of the regrouping (``unit[r] = r`` for the first
    ``len(adaptive.names)`` rows), then parents (``unit = -1``). Row ``r``'s entries are
    ``start[r]:start[r + 1]`` of ``vehicle``/``count`` (one per vehicle, codes of the
    columns); it covers the observed cells ``covers[covers_start[r]:covers_start[r + 1]]``;
    ``remainder``: a remainder cell of the regrouping (§12.4)."""

    names: tuple[str, ...]
    unit: np.ndarray
    remainder: np.ndarray
    start: np.ndarray
    vehicle: np.ndarray
    count: np.ndarray
    covers_start: np.ndarray
    covers: np.ndarray

    @property
    def cell_index(self) -> np.ndarray:
        """Per entry, its row."""
        return np.repeat(np.arange(len(self.names)), np.diff(self.start))


def candidate_cells(
    columns: WindowColumns,
    adaptive: AdaptiveCells,
    units: Occupancy,
    lift: np.ndarray,
    coarsest: int,
) -> CandidateCells:
    """The regrouping's cells (``adaptive``, over the pooled ``columns``; ``units``: their
    occupancy, one cell per name, the columns' vehicle codes) and the parents of the cells
    ``lift`` names, from resolution ``coarsest`` up to their own (a remainder cell's own name
    too). A parent covers the observed cells under it of the lifted cells, of the cell of its
    own name, if any, and those the regrouping withheld; the rest of the regrouping's cells
    under it stay apart (it is then a remainder), as the rules' refusal pools a refused cell
    into its parent (§13.1)."""
    unit_of_cell = adaptive.unit_of_cell
    n_units = len(adaptive.names)
    in_unit = np.flatnonzero(unit_of_cell >= 0)
    found: set[str] = set()
    for o in in_unit[lift[unit_of_cell[in_unit]]].tolist():
        u = int(unit_of_cell[o])
        top = int(adaptive.resolution[u]) + int(adaptive.remainder[u])
        found.update(h3.cell_to_parent(columns.cell_names[o], res) for res in range(coarsest, top))
    parents = sorted(found)
    row_of_parent = {p: n_units + i for i, p in enumerate(parents)}
    cover_row, cover_cell = [unit_of_cell[in_unit]], [in_unit]  # the units', then parents'

    under = np.zeros(len(parents), dtype=np.int64)  # observed cells under each parent
    levels = sorted({h3.get_resolution(p) for p in parents})
    for o, name in enumerate(columns.cell_names if parents else ()):
        u = int(unit_of_cell[o])
        for res in levels:
            row = row_of_parent.get(h3.cell_to_parent(name, res))
            if row is None:
                continue
            under[row - n_units] += 1
            if u < 0 or lift[u] or adaptive.names[u] == parents[row - n_units]:
                cover_row.append(np.array([row]))
                cover_cell.append(np.array([o]))
    rows, cells = np.concatenate(cover_row), np.concatenate(cover_cell)
    order = np.lexsort((cells, rows))
    rows, cells = rows[order].astype(np.int64), cells[order].astype(np.int64)
    covers_start = np.searchsorted(rows, np.arange(n_units + len(parents) + 1)).astype(np.int64)
    first = covers_start[n_units]
    start, vehicle, count = _entries(columns, rows[first:] - n_units, cells[first:], len(parents))
    start = np.r_[units.cell_start[:-1], units.n_entries + start].astype(np.int64)
    vehicle = np.r_[units.vehicle_index, vehicle].astype(np.int64)
    count = np.r_[units.count, count].astype(np.int64)
    unit = np.r_[np.arange(n_units), np.full(len(parents), -1)].astype(np.int64)
    partial = np.diff(covers_start)[n_units:] < under  # some observed cell under it left out
    remainder = np.r_[adaptive.remainder, partial].astype(bool)
    names = (*adaptive.names, *parents)
    return CandidateCells(names, unit, remainder, start, vehicle, count, covers_start, cells)


def _entries(
    columns: WindowColumns, rows: np.ndarray, cells: np.ndarray, n_rows: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row, its vehicles' readings in the observed cells it covers (``rows``/``cells``:
    the covering pairs), CSR by row."""
    wanted = np.zeros(len(columns.cell_names), dtype=bool)
    wanted[cells] = True
    some = np.flatnonzero(wanted[columns.cell_code])  # the pairs of the covered cells
    order = some[np.argsort(columns.cell_code[some], kind="mergesort")]
    pair_start = np.searchsorted(columns.cell_code[order], np.arange(len(columns.cell_names) + 1))
    pair = order[entries_of(pair_start, cells)]
    sizes = pair_start[cells + 1] - pair_start[cells]
    row = np.repeat(rows, sizes)
    n_vehicles = max(len(columns.vehicle_names), 1)
    key, inverse = np.unique(row * n_vehicles + columns.vehicle_code[pair], return_inverse=True)
    count = np.bincount(inverse, weights=columns.count[pair], minlength=len(key))
    start = np.searchsorted(key // n_vehicles, np.arange(n_rows + 1)).astype(np.int64)
    return start, (key % n_vehicles).astype(np.int64), count.astype(np.int64)


def entries_of(start: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The entries ``start[r]:start[r + 1]`` of each of ``rows`` (CSR), row after row."""
    sizes = np.diff(start)[rows]
    return np.repeat(start[rows], sizes) + (
        np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    )

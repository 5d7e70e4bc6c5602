"""Accuracy-targeted adaptive cells (docs/math.md §12): with ``target_mean_error`` T, the
window is regrouped into the cells chosen from its occupancy (before stage 1), and a cell
whose mean_error still misses T after the bounds is withheld (after stage 2). Both are
functions of the public occupancy only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from stream_dp.dp import kernels
from stream_dp.dp.adaptive_cells import (
    DETAIL_SLACK,
    AdaptiveCells,
    BudgetChoice,
    choose_cells,
)
from stream_dp.dp.occupancy import Occupancy
from stream_dp.release.params import ReleaseParams
from stream_dp.windows.columns import WindowColumns
from stream_dp.windows.state import rank_in_runs


def adaptive_columns(
    columns: WindowColumns, params: ReleaseParams, mean_epsilon: float
) -> tuple[WindowColumns, AdaptiveCells, tuple[int, int]]:
    """The window regrouped into the adaptive cells chosen from its occupancy
    (:func:`adaptive_choice`), those cells, and the (cells, readings) withheld."""
    chosen = adaptive_choice(columns, params, mean_epsilon)
    moves, withheld = adaptive_moves(columns, chosen)
    return moves.columns(params.prefix_limit), chosen, withheld


def adaptive_choice(
    columns: WindowColumns,
    params: ReleaseParams,
    mean_epsilon: float,
    budget: BudgetChoice | None = None,
    detail_slack: float = DETAIL_SLACK,
) -> AdaptiveCells:
    """The adaptive cells chosen from the window's occupancy
    (:func:`~stream_dp.dp.adaptive_cells.choose_cells`; under a vehicle budget with its
    ``budget`` choice and ``detail_slack``)."""
    return choose_cells(
        columns.cell_names, columns.cell_code, columns.vehicle_code, columns.count,
        upper=params.upper, mean_epsilon=mean_epsilon, target=float(params.target_mean_error),
        finest=params.resolution, coarsest=params.coarsest, prefix_limit=params.prefix_limit,
        min_vehicles=params.min_vehicles, shape=params.adaptive_shape, detail_slack=detail_slack,
        budget=budget,
    )  # fmt: skip


def adaptive_moves(
    columns: WindowColumns, chosen: AdaptiveCells
) -> tuple[PairMoves, tuple[int, int]]:
    """The window's pairs moved into the ``chosen`` cells (:class:`PairMoves`: the regrouping
    not yet applied to the reading log) and the (cells, readings) withheld."""
    unit = chosen.unit_of_cell[columns.cell_code]
    readings_out = int(columns.count[unit < 0].sum())
    cells_in = np.bincount(
        chosen.unit_of_cell[chosen.unit_of_cell >= 0], minlength=len(chosen.names)
    )
    moves = PairMoves.of(columns, chosen.names, unit, cells_in > 1)
    return moves, (len(chosen.withheld_cells), readings_out)


def regroup(
    columns: WindowColumns,
    names: tuple[str, ...],
    unit: np.ndarray,
    prefix_limit: int,
    merged_unit: np.ndarray,
) -> WindowColumns:
    """``columns`` with each pair moved to cell ``unit[pair]`` of ``names`` (-1: dropped),
    pairs of one vehicle in one new cell merged (counts and sums added; the reading log cut
    back to each merged pair's first ``prefix_limit`` by ``(ts, value)``; only pairs whose
    joined log is longer are sorted). Only the pairs of a ``merged_unit`` (one made of
    several observed cells) can meet another pair of their vehicle, so only they are grouped."""
    return PairMoves.of(columns, names, unit, merged_unit).columns(prefix_limit)


@dataclass(frozen=True)
class PairMoves:
    """The pairs of ``source`` moved into new cells (:func:`regroup`): the kept pairs that
    stay alone (``single``, indices, in order) come first, then the merged ones (``merged``,
    indices of the kept pairs of a merged unit, in order; ``group``: each one's merged pair
    among those); ``cell_code``, ``vehicle_code`` and ``count`` are the new pairs',
    ``dropped`` whether some pair is in no new cell."""

    source: WindowColumns
    names: tuple[str, ...]
    single: np.ndarray
    merged: np.ndarray
    group: np.ndarray
    cell_code: np.ndarray
    vehicle_code: np.ndarray
    count: np.ndarray
    dropped: bool

    @classmethod
    def of(
        cls,
        columns: WindowColumns,
        names: tuple[str, ...],
        unit: np.ndarray,
        merged_unit: np.ndarray,
    ) -> PairMoves:
        vehicle, count = columns.vehicle_code, columns.count
        n_vehicles = len(columns.vehicle_names)
        unit = unit.astype(np.int64, copy=False)
        vehicle = vehicle.astype(np.int64, copy=False)
        count = count.astype(np.int64, copy=False)
        single, merged, cell_code, vehicle_code, counts = kernels.SPLIT_MOVES.pick(len(unit))(
            unit, np.asarray(merged_unit, dtype=np.bool_), vehicle, count
        )
        # Performance (issue 25): compiled, the groups and their counts in one call.
        group_cell, group_vehicle, group, summed = kernels.MERGED_GROUPS.pick(len(unit))(
            unit, vehicle, count, merged, max(len(names), 1), max(n_vehicles, 1)
        )
        n_single = len(single)
        n = n_single + len(group_cell)  # the merged pairs go after the lone ones
        cell_code[n_single:n], vehicle_code[n_single:n] = group_cell, group_vehicle
        counts[n_single:n] = summed.astype(np.int64)
        dropped = n_single + len(merged) < len(unit)
        return cls(
            columns, names, single, merged, group, cell_code[:n], vehicle_code[:n], counts[:n],
            dropped,
        )  # fmt: skip

    def _summed(self, values: np.ndarray) -> np.ndarray:
        """Per new pair, the sum of its pairs' float ``values`` in their order, as a
        ``bincount`` over the kept pairs adds them (a single pair's value plus 0.0)."""
        n_single = len(self.single)
        out = np.empty(len(self.cell_code))
        np.add(values[self.single], 0.0, out=out[:n_single])
        out[n_single:] = np.bincount(
            self.group, weights=values[self.merged], minlength=len(out) - n_single
        )
        return out

    def counts(self) -> WindowColumns:
        """The new pairs with their counts alone: no sums and no reading log, as ``plan``'s
        columns (the occupancy and the budget plan read no more)."""
        n, source, none = len(self.cell_code), self.source, np.zeros(0)
        return WindowColumns(
            self.names, self.cell_code, source.vehicle_names, self.vehicle_code, self.count,
            np.zeros(n), np.zeros(n), np.zeros(0, dtype=np.int64), none, none,
        )  # fmt: skip

    def columns(self, prefix_limit: int) -> WindowColumns:
        """The new pairs with their sums and reading logs, each merged pair's cut back to its
        first ``prefix_limit`` by ``(ts, value)`` (only pairs whose joined log is longer are
        sorted)."""
        source = self.source
        pair_of = np.full(len(source), -1, dtype=np.int64)
        pair_of[self.single] = np.arange(len(self.single))
        pair_of[self.merged] = len(self.single) + self.group
        n = len(self.cell_code)
        ts, value = source.reading_ts, source.reading_value
        if not self.dropped:
            reading_pair = pair_of[source.reading_pair]
        else:  # the kept pairs' readings (compiled: in one pass)
            take = kernels.TAKE_READINGS.pick(len(ts))
            reading_pair, ts, value = take(source.reading_pair, pair_of, ts, value)
        # A pair logs at most its count of readings: when no new pair counts more than
        # ``prefix_limit``, none is cut, without a pass over the log to count them.
        may_cut = n > 0 and (not COUNT_BOUND or int(self.count.max()) > prefix_limit)
        stored = np.bincount(reading_pair, minlength=n) if may_cut else None
        if stored is not None and int(stored.max()) > prefix_limit:
            at = np.flatnonzero(stored[reading_pair] > prefix_limit)
            order = at[np.lexsort((value[at], ts[at], reading_pair[at]))]
            drop = order[rank_in_runs(reading_pair[order]) >= prefix_limit]
            kept = np.ones(len(reading_pair), dtype=bool)
            kept[drop] = False
            reading_pair, ts, value = reading_pair[kept], ts[kept], value[kept]
        return WindowColumns(
            self.names, self.cell_code, source.vehicle_names, self.vehicle_code, self.count,
            self._summed(source.total), self._summed(source.total_sq), reading_pair, ts, value,
        )  # fmt: skip


#: Whether :meth:`PairMoves.columns` skips counting the logged readings when no new pair's
#: count exceeds the prefix limit; the tests switch it off to compare.
COUNT_BOUND = True


def cell_shapes(
    adaptive: AdaptiveCells | None, cells: tuple[str, ...], resolution: int
) -> list[dict[str, Any]]:
    """Each record's ``resolution`` and ``scope`` (``remainder``: a parent cell's readings
    left after its separately released children)."""
    if adaptive is None:
        return [{"resolution": resolution, "scope": "cell"}] * len(cells)
    index = {name: g for g, name in enumerate(adaptive.names)}
    res, rem = adaptive.resolution.tolist(), adaptive.remainder.tolist()
    return [
        {"resolution": res[index[c]], "scope": "remainder" if rem[index[c]] else "cell"}
        for c in cells
    ]


def released_cells(
    target: float | None,
    mean_errors: np.ndarray,
    kept: np.ndarray,
    grids: np.ndarray,
    occupancy: Occupancy,
    n_readings: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, int, tuple[int, int]]:
    """Which cells are released (those whose mean_error meets T; all without T), the cells
    each vehicle is read in over them (CLIP-USER's G_l: the cap never empties a kept entry),
    their maximum K, and the (cells, readings) these withhold. ``kept``: per entry, kept by
    the bound; ``grids``: per vehicle, its kept cells."""
    n_cells = len(occupancy.cells)
    released = np.ones(n_cells, dtype=bool) if target is None else mean_errors <= target
    withheld = (0, 0)
    if not released.all():
        in_released = released[occupancy.cell_index]
        grids = occupancy.grids_per_vehicle(kept & in_released)
        withheld = (int(np.count_nonzero(~released)), int(n_readings[~released].sum()))
    return released, grids, int(grids.max(initial=0)), withheld

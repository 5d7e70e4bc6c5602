"""The budget pipeline's plan as an optimisation (docs/math.md §13.5; ``budget_planner =
"optimiser"``): one regrouping of the window's pooled pairs, then the releases chosen among
its cells and their parents up to R0 by :func:`~stream_dp.dp.release_choice.choose_releases`
(expected useful readings, each vehicle within its room, each observed cell released once),
in place of the rules' refusal loop (:func:`~stream_dp.release.vehicle_budget.cells.
budget_regroup`). Its output is the rules' (:class:`~stream_dp.release.vehicle_budget.cells.
Regrouped` and the cached :class:`~stream_dp.release.vehicle_budget.planner.BudgetPlan`), so
:func:`~stream_dp.release.vehicle_budget.plan.check_plan` and every later stage are the same.

Live first: a cell is released now or not at all in this window (no hold option); what is not
chosen is carried or withheld by the span rules (§13.3). Each option's ε is at most the cell's
release price (:func:`~stream_dp.release.vehicle_budget.plan.epsilon_ceiling`, the pacing).
Every input is the public occupancy, the configuration or the ledger (§2.2)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import h3
import numpy as np

from stream_dp.dp.adaptive_cells import AdaptiveCells, BudgetChoice
from stream_dp.dp.occupancy import Occupancy
from stream_dp.dp.release_candidates import CellOptions
from stream_dp.dp.release_candidates_compiled import cell_options, entry_payments, with_exclusions
from stream_dp.dp.release_choice import Candidates, choose_releases
from stream_dp.dp.release_hold import staleness_weight
from stream_dp.release.adaptive import adaptive_choice, adaptive_moves
from stream_dp.release.bounding import Contributions
from stream_dp.release.selection import occupancy_of, select_cells
from stream_dp.release.vehicle_budget.candidate_cells import (
    CandidateCells,
    candidate_cells,
    entries_of,
)
from stream_dp.release.vehicle_budget.cells import (
    BUDGET_DETAIL_SLACK,
    Regrouped,
    observed_span_starts,
    unsupported_line,
)
from stream_dp.release.vehicle_budget.plan import Rooms, epsilon_ceiling, unit_price
from stream_dp.release.vehicle_budget.planner import BudgetPlan

if TYPE_CHECKING:
    from stream_dp.release.params import ReleaseParams
    from stream_dp.windows.columns import WindowColumns

log = logging.getLogger(__name__)

#: A cell's options: its least ε meeting T times these (each at most the burst and its price).
FACTORS = (1.0, 1.5, 2.0, 3.0)
#: A cell with a vehicle whose room is under this share of the burst also has the option
#: where those vehicles sit out (their readings stay in M, they pay nothing, §13.1).
SIT_OUT_SHARE = 1 / 16
#: τ: a released mean is useful within this share of U of the truth (§13.5).
USEFUL_SHARE = 0.1


@dataclass(frozen=True)
class Options:
    """Per option row ``s`` (a cell, or its sit-out variant when ``s ≥`` the cells) and
    factor: :class:`~stream_dp.dp.release_candidates.CellOptions` (``meets`` within the
    release price); ``cell[s]`` its cell row, entries ``start[s]:start[s + 1]`` of
    ``vehicle``/``read``; ``own_shares``: each read vehicle pays its own share of an option's
    ε (no variance share), else the whole ε."""

    options: CellOptions
    cell: np.ndarray
    start: np.ndarray
    vehicle: np.ndarray
    read: np.ndarray
    own_shares: bool

    @cached_property
    def payments(self) -> np.ndarray:
        """Per entry (rows) and option (columns), what its vehicle pays if its row is released
        there: its own share of the ε (``own_shares``: what the ledger records with no
        variance share, docs/math.md §13.1), else the ε; nothing where it sits out."""
        options = self.options
        if self.own_shares:
            return entry_payments(self.start, options)
        entry_row = np.repeat(np.arange(len(self.cell)), np.diff(self.start))
        pay = np.where(options.meets, options.epsilon, 0.0)[entry_row]
        return np.where(self.read[:, None], pay, 0.0)

    def any_affordable(self, room: np.ndarray, n_cells: int) -> np.ndarray:
        """Per cell row, whether some option of it meets T within its price and every vehicle
        it reads has the room to pay its ε (the whole ε, not its own share: priced by own
        shares the lift below keeps more fine units, and on the panel's small fleet the worst
        of 5 runs fell from 85.1 to 51.4 % useful, benchmarks/README.md)."""
        least = np.full(len(self.cell), np.inf)
        entry_row = np.repeat(np.arange(len(self.cell)), np.diff(self.start))
        read = self.read
        np.minimum.at(least, entry_row[read], room[self.vehicle[read]])
        options = self.options
        fits = options.meets & (options.epsilon <= least[:, None] + 1e-12)
        return np.bincount(self.cell, weights=fits.any(axis=1), minlength=n_cells) > 0

    def jointly_affordable(self, room: np.ndarray, n_cells: int) -> np.ndarray:
        """Per cell row (the first ``n_cells`` option rows, every vehicle read), whether each
        of its vehicles has the room to pay the least ε meeting T of every cell it is in
        together (§13.5, "The candidates": its demand ``Σ_g ε_T,g`` at most its room; the
        whole ε, as :meth:`any_affordable`); cells no option can release add nothing to a
        demand."""
        options = self.options
        least = np.min(np.where(options.meets, options.epsilon, np.inf), axis=1)[:n_cells]
        entry_cell = np.repeat(np.arange(n_cells), np.diff(self.start[: n_cells + 1]))
        vehicle = self.vehicle[: len(entry_cell)]
        pays = np.isfinite(least[entry_cell])
        demand = np.bincount(vehicle[pays], weights=least[entry_cell[pays]], minlength=len(room))
        short = demand[vehicle] > room[vehicle] + 1e-12
        return np.bincount(entry_cell, weights=short, minlength=n_cells) == 0


def optimised_regroup(
    columns: WindowColumns,
    params: ReleaseParams,
    rooms: Rooms,
    mean_epsilon: float,
    last: bool = False,
    due: tuple[str, ...] = (),
) -> Regrouped:
    """The window's cells and their plan chosen by the optimiser (module docstring); the
    plan is kept in the window's cache for the plan stage, as the rules' is."""
    price = unit_price(rooms, columns.vehicle_names, params)
    choice = BudgetChoice(price)
    adaptive = adaptive_choice(columns, params, mean_epsilon, choice, BUDGET_DETAIL_SLACK)
    starts = observed_span_starts(columns, params, rooms.cache, rooms.window_start, last)
    moves, withheld = adaptive_moves(columns, adaptive)
    picked: tuple[CandidateCells, Options, np.ndarray, np.ndarray] | None = None
    if len(adaptive.names):
        units, _ = occupancy_of(moves.counts(), np.arange(len(adaptive.names)))
        picked = _choose(columns, params, rooms, adaptive, units, starts, due)
        if np.any(picked[0].unit[picked[1].cell[picked[2]]] < 0):  # a parent chosen
            adaptive = _chosen_cells(columns, adaptive, *picked)
            moves, withheld = adaptive_moves(columns, adaptive)
    regrouped = moves.columns(params.prefix_limit)
    chosen = select_cells(regrouped, params.min_vehicles, params.top_cells)
    pairs = Contributions(chosen, *occupancy_of(regrouped, chosen))
    if picked is not None:
        rooms.cache.keep_choice(regrouped, pairs, _plan(pairs.occupancy, rooms, params, *picked))
    if withheld[1] and log.isEnabledFor(logging.INFO):
        log.info("%s", unsupported_line(columns, adaptive, params))
    return Regrouped(regrouped, adaptive, pairs, withheld, "optimiser")


def _choose(
    columns: WindowColumns,
    params: ReleaseParams,
    rooms: Rooms,
    adaptive: AdaptiveCells,
    units: Occupancy,
    starts: np.ndarray | None,
    due: tuple[str, ...],
) -> tuple[CandidateCells, Options, np.ndarray, np.ndarray]:
    """The candidate cells (the regrouping's ``adaptive`` cells of occupancy ``units``, and
    the parents of those whose vehicles cannot pay them: no option within their price that
    each of their vehicles can pay alone, or a vehicle whose room is short of the least ε of
    all its cells together, §13.5), their options, and the chosen options' rows and
    factors."""
    room = rooms.of(columns.vehicle_names)
    n_units = len(adaptive.names)
    none = np.zeros(n_units, dtype=bool)
    cells = candidate_cells(columns, adaptive, units, none, params.coarsest)
    opts = _options(cells, columns, params, rooms, room, starts, due)
    affordable = opts.any_affordable(room, n_units) & opts.jointly_affordable(room, n_units)
    lift = (adaptive.resolution > params.coarsest) & ~affordable
    if lift.any():
        cells = candidate_cells(columns, adaptive, units, lift, params.coarsest)
        opts = _options(cells, columns, params, rooms, room, starts, due)
    age = _age(params, rooms.window_start, _cell_starts(cells, starts), len(cells.names))
    row, factor = np.nonzero(opts.options.meets)
    value = opts.options.useful[row, factor] * (1.0 - staleness_weight(params.max_span_hours)
                                                * age[opts.cell[row]])  # fmt: skip
    cands = _candidates(cells, opts, row, factor, value, len(room))
    choice = choose_releases(cands, np.r_[room, np.ones(len(columns.cell_names))])
    return cells, opts, row[choice.chosen], factor[choice.chosen]


def _options(
    cells: CandidateCells,
    columns: WindowColumns,
    params: ReleaseParams,
    rooms: Rooms,
    room: np.ndarray,
    starts: np.ndarray | None,
    due: tuple[str, ...],
) -> Options:
    """Each cell's options, ``meets`` cut to the cell's release price, and a sit-out variant
    of each cell with a vehicle whose room is under :data:`SIT_OUT_SHARE` of the burst."""
    n = len(cells.names)
    cell_of = cells.cell_index
    settings = {
        "upper": params.upper, "target": float(params.target_mean_error),
        "tau": USEFUL_SHARE * params.upper, "factors": np.array(FACTORS),
        "max_epsilon": params.vehicle_burst, "mean_share": 1.0 - params.variance_share,
        "min_vehicles": params.min_vehicles,
        "prefix_limit": params.prefix_limit if params.pseudo_user else None,
    }  # fmt: skip
    occupancy = Occupancy(cells.names, columns.vehicle_names, cell_of, cells.vehicle, cells.count)
    span_start = _cell_starts(cells, starts)
    ceiling = epsilon_ceiling(params, rooms, occupancy, span_start, due)
    free = epsilon_ceiling(params, rooms, occupancy, span_start, due, exponent=np.inf)
    low = room[cells.vehicle] < SIT_OUT_SHARE * params.vehicle_burst
    twin = np.flatnonzero(np.bincount(cell_of, weights=low, minlength=n) > 0)
    entries = entries_of(cells.start, twin)
    start = np.r_[cells.start, cells.start[-1] + np.cumsum(np.diff(cells.start)[twin])]
    read = np.r_[np.ones(len(low), dtype=bool), ~low[entries]]
    options = cell_options(
        start.astype(np.int64), np.r_[cells.count, cells.count[entries]], sits_out=~read,
        **settings,
    )  # fmt: skip
    row_cell = np.r_[np.arange(n), twin].astype(np.int64)
    if ceiling is not None and free is not None:
        # the release price: what the pacing lets the cell take now; past the least ε
        # meeting T, only budget that would otherwise overflow its vehicles' buckets
        options.meets[:] &= options.epsilon <= ceiling[row_cell][:, None] + 1e-12
        options.meets[:, 1:] &= options.epsilon[:, 1:] <= free[row_cell][:, None] + 1e-12
    vehicle = np.r_[cells.vehicle, cells.vehicle[entries]]
    own = params.variance_share == 0
    return Options(options, row_cell, start.astype(np.int64), vehicle, read, own)


def _candidates(
    cells: CandidateCells,
    opts: Options,
    row: np.ndarray,
    factor: np.ndarray,
    value: np.ndarray,
    n_vehicles: int,
) -> Candidates:
    """One candidate per (option row, factor) meeting T, grouped by cell; each read vehicle
    pays its share (:meth:`Options.payments`: what the ledger records, and what
    :func:`~stream_dp.release.vehicle_budget.plan.check_plan` checks against its room), and
    each observed cell it covers 1 (a room of 1 after the ``n_vehicles``)."""
    entries = entries_of(opts.start, row)
    sizes = np.diff(opts.start)[row]
    cand = np.repeat(np.arange(len(row)), sizes)
    read = opts.read[entries]
    pay = opts.payments[entries, np.repeat(factor, sizes)][read]
    counts = np.bincount(cand[read], minlength=len(row))
    start = np.r_[0, np.cumsum(counts)].astype(np.int64)
    paying = Candidates(opts.cell[row], value, start, opts.vehicle[entries][read], pay)
    cell = opts.cell[row]
    covers = cells.covers[entries_of(cells.covers_start, cell)]
    covers_start = np.r_[0, np.cumsum(np.diff(cells.covers_start)[cell])].astype(np.int64)
    return with_exclusions(paying, covers_start, covers, n_vehicles)


def _chosen_cells(
    columns: WindowColumns,
    adaptive: AdaptiveCells,
    cells: CandidateCells,
    opts: Options,
    row: np.ndarray,
    factor: np.ndarray,
) -> AdaptiveCells:
    """The regrouping with each chosen cell in place of the cells it covers; an observed cell
    no chosen cell covers stays in the regrouping's cell (not released now: carried or
    withheld, §13.3)."""
    key = np.where(adaptive.unit_of_cell >= 0, adaptive.unit_of_cell, -1)
    chosen = opts.cell[row]
    for r in chosen.tolist():
        key[cells.covers[cells.covers_start[r] : cells.covers_start[r + 1]]] = r
    used = np.unique(key[key >= 0])
    names = [cells.names[r] for r in used.tolist()]
    order = np.argsort(names, kind="mergesort")
    used = used[order]
    sorted_names = tuple(names[i] for i in order.tolist())
    assert len(set(sorted_names)) == len(sorted_names), "a chosen cell named twice"
    rank = np.full(len(cells.names), -1, dtype=np.int64)
    rank[used] = np.arange(len(used))
    error = np.full(len(cells.names), np.inf)
    error[: len(adaptive.names)] = adaptive.predicted_error
    error[chosen] = opts.options.error[row, factor]
    return AdaptiveCells(
        sorted_names, np.array([h3.get_resolution(n) for n in sorted_names], dtype=np.int64),
        cells.remainder[used], error[used], np.where(key >= 0, rank[np.maximum(key, 0)], -1),
    )  # fmt: skip


def _plan(
    occupancy: Occupancy,
    rooms: Rooms,
    params: ReleaseParams,
    cells: CandidateCells,
    opts: Options,
    row: np.ndarray,
    factor: np.ndarray,
) -> BudgetPlan:
    """The chosen options as the plan of the released ``occupancy`` (the regrouped cells'
    pairs): per chosen cell its ε and cap, its sit-outs not kept; every other cell +inf
    (dropped); ``paid``: each vehicle's kept cells' whole ε, an upper bound (the plan stage
    checks the charge, its own shares)."""
    by_name = {cells.names[int(opts.cell[s])]: (int(s), int(j))
               for s, j in zip(row.tolist(), factor.tolist(), strict=True)}  # fmt: skip
    n = len(occupancy.cells)
    epsilon, cap = np.full(n, np.inf), np.zeros(n, dtype=np.int64)
    sits_out = np.zeros(n, dtype=bool)
    for g, name in enumerate(occupancy.cells):
        picked = by_name.get(name)
        if picked is not None:
            s, j = picked
            epsilon[g], cap[g] = opts.options.epsilon[s, j], opts.options.cap[s, j]
            sits_out[g] = s >= len(cells.names)
    room = rooms.of(occupancy.vehicles)
    low = room[occupancy.vehicle_index] < SIT_OUT_SHARE * params.vehicle_burst
    cell = occupancy.cell_index
    kept = np.isfinite(epsilon[cell]) & ~(sits_out[cell] & low)
    paid = np.bincount(occupancy.vehicle_index[kept], weights=epsilon[cell[kept]],
                       minlength=len(occupancy.vehicles))  # fmt: skip
    return BudgetPlan(kept, epsilon, cap, paid, 1)


def _cell_starts(cells: CandidateCells, starts: np.ndarray | None) -> np.ndarray | None:
    """Per cell row, the start of its span: the earliest of its observed cells'."""
    if starts is None:
        return None
    out = np.full(len(cells.names), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(out, np.repeat(np.arange(len(cells.names)), np.diff(cells.covers_start)),
                  starts[cells.covers])  # fmt: skip
    return out


def _age(params: ReleaseParams, window_start: int, start: np.ndarray | None, n: int) -> np.ndarray:
    """Per cell row (``n``), the hours its readings have waited (1: this window only, and
    where no span start is given)."""
    if start is None:
        return np.ones(n)
    return np.clip((window_start - start) // params.window_seconds + 1, 1, None).astype(float)

"""Adaptive cells under a vehicle budget (docs/math.md §13.1): the regrouping of §12.4 made
budget-aware, so that a finer cell is chosen where its vehicles can pay the ε it needs and
pooled into its parent where they cannot.

Two steps, both functions of the occupancy, the configuration and the ledger only:

1. *Price.* A unit passes when the ε it needs to meet T is at most what its vehicles can pay
   (:class:`~stream_dp.dp.adaptive_cells.UnitPrice`), instead of meeting T at one fixed ε.
2. *Pool rather than wait.* The window's budget plan
   (:func:`~stream_dp.release.vehicle_budget.plan.budget_plan`) is computed on the chosen cells; a
   cell
   finer than the coarsest resolution that it does not release now (dropped: its vehicles,
   sharing their room with their other cells, cannot pay it; or above its release price,
   docs/math.md §13.3) is refused and the cells are chosen again, so its readings pool into its
   parent in this window (coarser now rather than finer later) instead of waiting, possibly
   until they are withheld. At most ``MAX_CHOICES`` choices, and no further one when the
   cells it would refuse hold, together, under ``MIN_REFUSED_SHARE`` of the chosen cells'
   readings (they are then dropped: carried or withheld).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import h3
import numpy as np

from stream_dp.dp.adaptive_cells import AdaptiveCells, BudgetChoice
from stream_dp.release.adaptive import adaptive_choice, adaptive_moves
from stream_dp.release.bounding import Contributions
from stream_dp.release.selection import occupancy_of, select_cells
from stream_dp.release.state import WindowCache
from stream_dp.release.vehicle_budget.plan import Rooms, budget_mode, budget_plan, unit_price
from stream_dp.release.vehicle_budget.spans import first_window_of, logged_in_window
from stream_dp.release.vehicle_budget.unsupported import release_needs

if TYPE_CHECKING:
    from stream_dp.dp.occupancy import Occupancy
    from stream_dp.release.params import ReleaseParams
    from stream_dp.windows.columns import WindowColumns

log = logging.getLogger(__name__)

#: The most choices of one window's cells (each refuses at least one more cell).
MAX_CHOICES = 8
#: Under a budget a parent is split into its finer cells when they cover at least 70 % of
#: the readings the whole parent would (§12.4's slack 0.2 → 0.3): the split's detail is worth
#: a remainder that waits or is withheld.
BUDGET_DETAIL_SLACK = 0.3

#: The refusals stop when the cells a choice would refuse hold, together, fewer than this
#: share of the chosen cells' readings: choosing a window's cells again costs a pass over all
#: of it (on a 10^6-reading window, ~25 ms a choice), and a few dozen readings of a sparse cell
#: are not worth it (they wait or are withheld, as in any dropped cell). In a pooled window of
#: the AIS week (~1,000 readings an hour, ~8,000 in 8 hours) that is a cell of a few readings;
#: the week's release and the 10^6-reading window's as the input's last are the same bytes
#: with the cut-off as without it (``benchmarks/budget_digest.py``), only faster; released
#: live (not the last window) the 10^6-reading window releases 1,579 cells with it or without
#: (1,592 and 1,593 before :data:`STOP_AT_REFUSAL`).
MIN_REFUSED_SHARE = 1e-3

#: Whether a choice's regrouped pairs get their reading logs only once the choice is kept
#: (when no release price reads them: no spans, or the input's end); the tests switch it off
#: to compare.
LAZY_READINGS = True

#: Whether a choice that may be followed by another stops its release price's re-plans at the
#: first plan putting finer cells past their price enough to choose again (at least
#: :data:`MIN_REFUSED_SHARE` of the chosen cells' readings): they are refused and the cells
#: chosen again, so the stopped plan is read for its refusals only, never released
#: (docs/math.md §13.3, "When the re-plans stop"); the tests switch it off to compare.
STOP_AT_REFUSAL = True


@dataclass(frozen=True)
class Regrouped:
    """The budget regrouping's choice: the regrouped ``columns`` (with their reading logs),
    their ``adaptive`` cells (None: no choice was made), the ``pairs`` chosen of them, the
    (cells, readings) ``withheld`` and the ``planner`` that chose them (the summary's
    ``planned_by``)."""

    columns: WindowColumns
    adaptive: AdaptiveCells | None
    pairs: Contributions
    withheld: tuple[int, int]
    planner: str


def budget_regroup(
    columns: WindowColumns,
    params: ReleaseParams,
    rooms: Rooms,
    mean_epsilon: float,
    last: bool = False,
    due: tuple[str, ...] = (),
) -> Regrouped:
    """Regroup ``columns`` into adaptive cells its vehicles' ``rooms`` can pay for (module
    docstring) and choose the pairs to release of them (the last choice's, §9.1); ``last``:
    the input's last window, ``due``: the pool's due units (the release price,
    :func:`~stream_dp.release.vehicle_budget.plan.epsilon_ceiling`)."""
    cache = rooms.cache
    price = unit_price(rooms, columns.vehicle_names, params)
    coarsest = params.coarsest
    # The release price reads each chosen cell's span start from its observed cells' (below),
    # not from the reading log: a choice's regrouped pairs get theirs only when it is kept.
    lazy = LAZY_READINGS
    observed_start = observed_span_starts(columns, params, cache, rooms.window_start, last)
    refused: set[str] = set()
    withheld = (0, 0)
    memo: dict[str, Any] = {}  # what a choice computed that the next may reuse
    moves, adaptive, regrouped = None, None, columns
    for n_choice in range(MAX_CHOICES):
        choice = BudgetChoice(price, frozenset(refused), None, memo)
        adaptive = adaptive_choice(columns, params, mean_epsilon, choice, BUDGET_DETAIL_SLACK)
        moves, withheld = adaptive_moves(columns, adaptive)
        regrouped = moves.counts() if lazy else moves.columns(params.prefix_limit)
        chosen = select_cells(regrouped, params.min_vehicles, params.top_cells)
        if not len(chosen):
            break
        pairs = Contributions(chosen, *occupancy_of(regrouped, chosen))
        occupancy = pairs.occupancy
        span_start = _unit_starts(adaptive, observed_start, chosen)
        fine = adaptive.resolution[chosen] > coarsest  # the columns' cells are its names
        refusable = fine if STOP_AT_REFUSAL and n_choice < MAX_CHOICES - 1 else None
        plan = budget_plan(params, rooms, occupancy, span_start, due, refusable,
                           _refused_enough(occupancy))  # fmt: skip
        drop = np.flatnonzero(plan.dropped & fine)  # dropped or priced out (+inf ε)
        cache.keep_choice(regrouped, pairs, plan)  # the select stage's
        if not len(drop) or _too_few_to_choose_again(occupancy, drop):
            break
        refused.update(occupancy.cells[g] for g in drop.tolist())
    if lazy and moves is not None:  # the kept choice's pairs, with their reading logs
        counted, regrouped = regrouped, moves.columns(params.prefix_limit)
        cache.move_choice(counted, regrouped)  # the same pairs
    kept = cache.chosen_pairs(regrouped)
    if kept is None:  # no choice kept of these columns (none chose a cell)
        cells = select_cells(regrouped, params.min_vehicles, params.top_cells)
        kept = Contributions(cells, *occupancy_of(regrouped, cells))
    if withheld[1] and log.isEnabledFor(logging.INFO):
        assert adaptive is not None
        log.info("%s", unsupported_line(columns, adaptive, params))
    return Regrouped(regrouped, adaptive, kept, withheld, "rules")


def unsupported_line(columns: WindowColumns, chosen: AdaptiveCells, params: ReleaseParams) -> str:
    """One line on the readings the choice withholds (they miss T at the coarsest resolution at
    the ε their vehicles' rooms pay): how many, and the T or the B that would release the
    largest of their coarsest cells
    (:func:`~stream_dp.release.vehicle_budget.unsupported.release_needs`).
    Counts only: no vehicle."""
    cell_out = chosen.unit_of_cell < 0
    parents = [h3.cell_to_parent(columns.cell_names[i], params.coarsest)
               for i in np.flatnonzero(cell_out).tolist()]  # fmt: skip
    names = {name: u for u, name in enumerate(sorted(set(parents)))}
    unit_of_cell = np.full(len(cell_out), -1, dtype=np.int64)
    unit_of_cell[cell_out] = [names[p] for p in parents]
    pair_unit = unit_of_cell[columns.cell_code]
    out = pair_unit >= 0
    readings = np.bincount(pair_unit[out], weights=columns.count[out], minlength=len(names))
    largest = int(np.argmax(readings))
    mine = pair_unit == largest  # its vehicles' counts: one entry per (cell, vehicle) pair
    per_vehicle = np.bincount(columns.vehicle_code[mine], weights=columns.count[mine])
    per_vehicle = per_vehicle[per_vehicle > 0].astype(np.int64)
    mode = budget_mode(params)
    budget, target = mode.budget, float(params.target_mean_error or 0.0)
    needs = release_needs(
        np.zeros(len(per_vehicle), dtype=np.int64), per_vehicle, 1, upper=params.upper,
        target=target, budget=budget, burst=mode.burst,
        mean_share=1.0 - params.variance_share,
        prefix_limit=params.prefix_limit if params.pseudo_user else None,
    )  # fmt: skip
    return (
        f"{int(readings.sum())} readings in {len(names)} resolution-{params.coarsest} cells "
        f"cannot meet T {target:g} within their vehicles' rooms (B {budget:g}): "
        f"T {needs.target[0]:.3g} or B {needs.budget[0]:.3g} would release the "
        f"largest ({int(readings[largest])} readings)"
    )


def observed_span_starts(
    columns: WindowColumns,
    params: ReleaseParams,
    cache: WindowCache,
    window_start: int,
    last: bool,
) -> np.ndarray | None:
    """Per observed cell of ``columns`` (the pooled pairs, before any regrouping), the start
    of its span: the earlier of ``window_start`` and its pairs' first windows (None without
    spans or at the input's ``last`` window, where no release price reads it)."""
    if not budget_mode(params).spans or last:
        return None
    start = np.full(len(columns.cell_names), window_start, dtype=np.int64)
    if logged_in_window(columns, window_start, params.window_seconds):
        return start  # no pair's first window is before this one
    first = first_window_of(cache, columns, params.window_seconds)
    np.minimum.at(start, columns.cell_code, first)
    return start


def _unit_starts(
    chosen: AdaptiveCells, observed_start: np.ndarray | None, cells: np.ndarray
) -> np.ndarray | None:
    """Per chosen cell (``cells``: indices into ``chosen.names``) the start of its span: the
    earliest of its observed cells' (the same minimum over its pairs as
    :func:`~stream_dp.release.vehicle_budget.spans.span_starts` reads off the regrouped log)."""
    if observed_start is None:
        return None
    unit_start = np.full(len(chosen.names), np.iinfo(np.int64).max, dtype=np.int64)
    inside = chosen.unit_of_cell >= 0
    np.minimum.at(unit_start, chosen.unit_of_cell[inside], observed_start[inside])
    return unit_start[cells]


def _refused_enough(occupancy: Occupancy) -> float:
    """The readings refused cells must hold for the cells to be chosen again: the least that
    :func:`_too_few_to_choose_again` lets through (public counts)."""
    return MIN_REFUSED_SHARE * float(occupancy.total_per_cell().sum())


def _too_few_to_choose_again(occupancy: Occupancy, drop: np.ndarray) -> bool:
    """Whether the ``drop``-ped cells' readings are under :data:`MIN_REFUSED_SHARE` of the
    chosen cells' (public counts)."""
    total = occupancy.total_per_cell()
    return bool(total[drop].sum() < MIN_REFUSED_SHARE * total.sum())

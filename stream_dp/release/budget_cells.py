"""Adaptive cells under a vehicle budget (docs/math.md §13.1): the regrouping of §12.4 made
budget-aware, so that a finer cell is chosen where its vehicles can pay the ε it needs and
pooled into its parent where they cannot.

Two steps, both functions of the occupancy, the configuration and the ledger only:

1. *Price.* A unit passes when the ε it needs to meet T is at most what its vehicles can pay
   (:class:`~stream_dp.dp.adaptive_cells.UnitPrice`), instead of meeting T at one fixed ε.
2. *Pool rather than wait.* The window's budget plan
   (:func:`~stream_dp.release.budget.budget_plan`) is computed on the chosen cells; a cell
   finer than the coarsest resolution that it does not release now (dropped: its vehicles,
   sharing their room with their other cells, cannot pay it; or above its release price,
   docs/math.md §13.3) is refused and the cells are chosen again, so its readings pool into its
   parent in this window (coarser now rather than finer later) instead of waiting, possibly
   until they are withheld. At most ``MAX_CHOICES`` choices, and no further one when the
   cells it would refuse hold, together, under ``MIN_REFUSED_SHARE`` of the chosen cells'
   readings (they are then dropped: carried or withheld).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from stream_dp.dp.adaptive_cells import BudgetChoice
from stream_dp.release.adaptive import adaptive_choice, adaptive_moves
from stream_dp.release.bounding import Contributions
from stream_dp.release.budget import budget_plan, unit_price
from stream_dp.release.selection import occupancy_of, select_cells

if TYPE_CHECKING:
    from stream_dp.dp.occupancy import Occupancy
    from stream_dp.release.state import WindowState

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
#: the week's release and the 10^6-reading window's are the same bytes with the cut-off as
#: without it (``benchmarks/budget_digest.py``), only faster.
MIN_REFUSED_SHARE = 1e-3

#: Whether a choice's regrouped pairs get their reading logs only once the choice is kept
#: (when no release price reads them: no spans, or the input's end); the tests switch it off
#: to compare.
LAZY_READINGS = True


def budget_regroup(state: WindowState, mean_epsilon: float) -> tuple[int, int]:
    """Regroup ``state.columns`` into adaptive cells its vehicles can pay for (module
    docstring); returns the (cells, readings) withheld by the choice."""
    params = state.params
    columns, price = state.columns, unit_price(state)
    assert price is not None, "budget_regroup runs under a vehicle budget"
    coarsest = params.coarsest
    # Without spans (or at the input's end) the plan reads no reading log (no release price,
    # §13.3): a choice's regrouped pairs get theirs only when the choice is kept.
    lazy = LAZY_READINGS and (params.max_span_hours < 2 or state.last)
    refused: set[str] = set()
    withheld = (0, 0)
    memo: dict[str, Any] = {}  # what a choice computed that the next may reuse
    moves = None
    for _ in range(MAX_CHOICES):
        choice = BudgetChoice(price, frozenset(refused), None, memo)
        adaptive = adaptive_choice(columns, params, mean_epsilon, choice, BUDGET_DETAIL_SLACK)
        moves, withheld = adaptive_moves(columns, adaptive)
        state.adaptive = adaptive
        state.columns = moves.counts() if lazy else moves.columns(params.prefix_limit)
        chosen = select_cells(state.columns, params.min_vehicles, params.top_cells)
        if not len(chosen):
            break
        state.pairs = Contributions(chosen, *occupancy_of(state.columns, chosen))
        occupancy = state.pairs.occupancy
        plan = budget_plan(state, occupancy)
        fine = adaptive.resolution[chosen] > coarsest  # the columns' cells are its names
        drop = np.flatnonzero(plan.dropped & fine)  # dropped or priced out (+inf ε)
        state.choice_memo = (state.columns, state.pairs, plan)  # the select stage's, unchanged
        if not len(drop) or _too_few_to_choose_again(occupancy, drop):
            break
        refused.update(occupancy.cells[g] for g in drop.tolist())
    if lazy and moves is not None:  # the kept choice's pairs, with their reading logs
        counted, state.columns = state.columns, moves.columns(params.prefix_limit)
        if state.choice_memo is not None and state.choice_memo[0] is counted:  # same pairs
            state.choice_memo = (state.columns, state.choice_memo[1], state.choice_memo[2])
    state.pairs = None
    return withheld


def _too_few_to_choose_again(occupancy: Occupancy, drop: np.ndarray) -> bool:
    """Whether the ``drop``-ped cells' readings are under :data:`MIN_REFUSED_SHARE` of the
    chosen cells' (public counts)."""
    total = occupancy.total_per_cell()
    return bool(total[drop].sum() < MIN_REFUSED_SHARE * total.sum())

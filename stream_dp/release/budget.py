"""The vehicle-budget stage's glue (docs/math.md §13): each vehicle's room from the ledger,
the plan of :mod:`stream_dp.dp.vehicle_budget`, and the pairs it leaves in the shape CLIP-USER
and the cap give them (kept entries, per-cell caps), so the later stages run unchanged."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from stream_dp.dp import kernels
from stream_dp.dp.adaptive_cells import UnitPrice
from stream_dp.dp.clip_user import ClipUserResult
from stream_dp.dp.error_bars import mean_error
from stream_dp.dp.grid_error import variance_sensitivity
from stream_dp.dp.occupancy import Occupancy
from stream_dp.dp.pseudo_user import PseudoUserResult
from stream_dp.dp.release_price import release_price
from stream_dp.dp.vehicle_budget import BudgetPlan, plan_budget
from stream_dp.release.bounding import Contributions
from stream_dp.release.params import ReleaseParams
from stream_dp.release.span_policy import due_cells
from stream_dp.release.spans import span_starts

if TYPE_CHECKING:
    from stream_dp.dp.budget_ledger import BudgetLedger
    from stream_dp.release.state import WindowState

#: Whether the release price's re-plans (:func:`budget_plan`) run in one compiled call
#: (``plan_budget``'s ``ceiling``: the layout built once) instead of one plan per round; the
#: tests switch it off to compare.
PLAN_IN_ONE_CALL = True


def vehicle_room(state: WindowState, occupancy: Occupancy) -> np.ndarray:
    """What each vehicle of ``occupancy`` may spend in this window: the ledger's rolling
    budget and pacing (:meth:`~stream_dp.dp.budget_ledger.BudgetLedger.budget_room`); with
    no ledger (``plan``), the burst."""
    return _rooms(state, occupancy.vehicles)


def _rooms(state: WindowState, vehicles: Sequence[str]) -> np.ndarray:
    """:func:`room_of` ``vehicles`` in ``state``'s window, once per window for the same names
    (the regrouping's price, each plan and the check read the same 10^5 vehicles' rooms)."""
    memo = state.room_memo
    if memo is not None and memo[0] is vehicles:
        return memo[1]
    room = room_of(state.params, state.ledger, vehicles, state.window_start)
    room.flags.writeable = False  # shared by the price, every plan and the check
    state.room_memo = (vehicles, room)
    return room


def room_of(
    params: ReleaseParams, ledger: BudgetLedger | None, vehicles: Sequence[str], at: int
) -> np.ndarray:
    """:func:`vehicle_room` of ``vehicles`` at window ``at`` (also a failed window's charge)."""
    budget, burst = float(params.vehicle_budget or 0.0), params.vehicle_burst
    if ledger is None:
        return np.full(len(vehicles), min(budget, burst))
    return ledger.budget_room(vehicles, at, budget, burst)


def unit_price(state: WindowState) -> UnitPrice | None:
    """Under a vehicle budget, the adaptive cells' budget-aware pass test (§13.1): a unit
    passes when its vehicles' rooms (of ``state.columns``' vehicles) can pay the ε it needs."""
    params = state.params
    if params.vehicle_budget is None:
        return None
    room = _rooms(state, state.columns.vehicle_names)
    return UnitPrice(room, 1.0 - params.variance_share, params.vehicle_burst)


#: A due cell (§13.3: pooling would push it past T) may take at most this share of the burst,
#: or the share of ``max_span_hours`` its span covers if that is more (:func:`epsilon_ceiling`).
SHORT_SPAN_SHARE = 0.5


def budget_plan(
    state: WindowState, occupancy: Occupancy, span_start: np.ndarray | None = None
) -> BudgetPlan:
    """The window's per-cell ε and sit-outs (:func:`~stream_dp.dp.vehicle_budget.plan_budget`);
    a cell whose ε passes its :func:`epsilon_ceiling` is dropped (it pools with its next window)
    and the plan computed again (each round drops at least one cell more, so at most one round
    per cell; all rounds in one compiled call, :data:`PLAN_IN_ONE_CALL`). Unchecked: the
    release checks the plan it keeps (:func:`check_plan`), not the ones the regrouping only
    prices its cells with. ``span_start``: per cell the start of its span if known (the
    regrouping's, :func:`epsilon_ceiling`)."""
    room = vehicle_room(state, occupancy)
    ceiling = epsilon_ceiling(state, occupancy, span_start)
    if ceiling is None or PLAN_IN_ONE_CALL:
        return _plan(state, occupancy, room, None, ceiling)
    held: np.ndarray | None = None
    while True:  # the one call's oracle: each round a fresh plan
        plan = _plan(state, occupancy, room, held, None)
        over = _over(plan, ceiling)
        if not over.any():
            return plan
        held = over if held is None else held | over


def _plan(
    state: WindowState,
    occupancy: Occupancy,
    room: np.ndarray,
    held: np.ndarray | None,
    ceiling: np.ndarray | None,
) -> BudgetPlan:
    """:func:`~stream_dp.dp.vehicle_budget.plan_budget` with the window's settings."""
    params = state.params
    return plan_budget(
        occupancy, room, target=float(params.target_mean_error or 0.0), upper=params.upper,
        variance_share=params.variance_share, max_cell_epsilon=params.vehicle_burst,
        min_vehicles=params.min_vehicles,
        prefix_limit=params.prefix_limit if params.pseudo_user else None,
        pseudo_user=params.pseudo_user, held=held, ceiling=ceiling,
    )  # fmt: skip


def _over(plan: BudgetPlan, ceiling: np.ndarray) -> np.ndarray:
    """Per cell, whether the plan gives it an ε past its ``ceiling``."""
    return np.isfinite(plan.epsilon) & (plan.epsilon > ceiling + 1e-12)


def epsilon_ceiling(
    state: WindowState, occupancy: Occupancy, span_start: np.ndarray | None = None
) -> np.ndarray | None:
    """Per cell, the most ε it may take now: its release price (§13.3,
    :func:`~stream_dp.dp.release_price.release_price`) from its span so far and its vehicles'
    rooms; a due cell's, the burst times the share of ``max_span_hours`` its span covers, at
    least :data:`SHORT_SPAN_SHARE`. None (the burst for every cell) without spans or at the
    input's last window (no later release to wait for). ``span_start``: per cell the start of
    its span (default: :func:`~stream_dp.release.spans.span_starts` from the reading log)."""
    params = state.params
    if state.adaptive is None or params.max_span_hours < 2 or state.last:
        return None
    start = span_starts(state) if span_start is None else span_start
    windows = (state.window_start - start) // params.window_seconds + 1
    burst, budget = params.vehicle_burst, float(params.vehicle_budget or 0.0)
    pace = budget * params.window_seconds / params.ledger_period_seconds
    median_room = UnitPrice(vehicle_room(state, occupancy), 1.0, burst).pay(
        occupancy.cell_index, occupancy.vehicle_index, occupancy.count, len(occupancy.cells)
    )
    ceiling = release_price(windows, params.max_span_hours, burst, pace, median_room)
    if state.due:
        due = due_cells(occupancy.cells, state.due)
        share = np.clip(windows / params.max_span_hours, SHORT_SPAN_SHARE, 1.0)
        ceiling[due] = burst * share[due]
    return ceiling


def check_plan(occupancy: Occupancy, plan: BudgetPlan, room: np.ndarray) -> None:
    """The guarantee of §13, checked apart from the plan's own sums: no kept reading in a
    dropped cell (+inf ε), and each vehicle's ε summed over the cells it is kept in at most its
    room. A plan that fails is never released (the window fails)."""
    if not (
        len(room) == len(occupancy.vehicles)
        and len(plan.kept) == occupancy.n_entries
        and len(plan.epsilon) == len(occupancy.cells)
        and len(plan.paid) == len(room)
    ):
        raise AssertionError("vehicle budget plan, room and occupancy differ in length")
    paid, unpriced = kernels.KEPT_PAYMENTS.pick(occupancy.n_entries)(
        occupancy.cell_start, occupancy.vehicle_index, plan.kept, plan.epsilon, len(room)
    )
    if unpriced:
        raise AssertionError("vehicle budget plan keeps a reading of a cell it drops")
    if not (np.all(paid <= room + 1e-9) and np.all(plan.paid <= room + 1e-9)):
        raise AssertionError("vehicle budget plan pays past a vehicle's room")


def planned_pairs(
    pairs: Contributions, plan: BudgetPlan, params: ReleaseParams
) -> tuple[Contributions, int]:
    """``pairs`` with the plan's kept entries (as CLIP-USER's result) and caps (as the cap's),
    and how many vehicles sit out some cell the plan did not drop."""
    occupancy, upper = pairs.occupancy, params.upper
    kept_count, kept_sum, grids, g1, sat_out = kernels.PLANNED_COUNTS.pick(occupancy.n_entries)(
        occupancy.cell_start, occupancy.vehicle_index, occupancy.count, plan.kept, plan.cap,
        plan.epsilon, len(occupancy.vehicles),
    )  # fmt: skip
    epsilon = np.where(np.isfinite(plan.epsilon), plan.epsilon, 1.0)
    mean_eps = epsilon * (1.0 - params.variance_share)
    total = occupancy.total_per_cell()
    error = mean_error(upper, mean_eps, plan.cap, kept_sum, total)
    error = np.where(np.isfinite(plan.epsilon), error, np.inf)
    safe = np.where(kept_sum > 0, kept_sum, 1)
    var_sens = np.where(kept_sum > 0, variance_sensitivity(upper, plan.cap, safe), np.inf)
    clip = ClipUserResult(
        occupancy=occupancy, upper=upper, epsilon=float(epsilon.max(initial=1.0)),
        kept=plan.kept, g1=int(g1), k=int(grids.max(initial=0)),
        error_bound=float(params.target_mean_error or 0.0), initial_error=error, error=error,
        suppressed_entries=np.flatnonzero(~plan.kept).astype(np.int64), grids=grids,
    )  # fmt: skip
    capped = PseudoUserResult(plan.cap, kept_count, error, var_sens)
    return replace(pairs, clip=clip, capped=capped), int(sat_out)

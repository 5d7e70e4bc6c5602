"""The vehicle-budget stage's glue (docs/math.md §13): each vehicle's room from the ledger,
the plan of :mod:`stream_dp.release.vehicle_budget.planner`, and what it bounds each vehicle to
(kept
entries, per-cell caps: a :class:`~stream_dp.release.bounding.BoundedPairs`, as CLIP-USER
and the cap make on the fixed-ε path)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from stream_dp.dp import kernels
from stream_dp.dp.adaptive_cells import AdaptiveCells, UnitPrice
from stream_dp.dp.budget_ledger import BudgetLedger
from stream_dp.dp.error_bars import mean_error
from stream_dp.dp.grid_error import variance_sensitivity
from stream_dp.dp.occupancy import Occupancy
from stream_dp.dp.pseudo_user import PseudoUserResult
from stream_dp.release.accounting import vehicle_room as room_of
from stream_dp.release.bounding import BoundedPairs
from stream_dp.release.modes import VehicleBudget
from stream_dp.release.params import ReleaseParams
from stream_dp.release.state import WindowCache
from stream_dp.release.vehicle_budget import planner
from stream_dp.release.vehicle_budget.planner import BudgetPlan, plan_budget
from stream_dp.release.vehicle_budget.pooling import due_cells
from stream_dp.release.vehicle_budget.price import SHARE_EXPONENT, release_price

#: Whether the release price's re-plans (:func:`budget_plan`) run in one compiled call
#: (``plan_budget``'s ``ceiling``: the layout built once) instead of one plan per round; the
#: tests switch it off to compare.
PLAN_IN_ONE_CALL = True


@dataclass(frozen=True)
class Rooms:
    """What each vehicle may spend in one window (:func:`~stream_dp.release.accounting.
    vehicle_room`): the ``ledger``'s view under the ``mode`` at ``window_start``, kept in the
    window's ``cache`` once per window for the same names (the regrouping's price, each plan
    and the check read the same 10^5 vehicles' rooms)."""

    mode: VehicleBudget
    ledger: BudgetLedger | None
    window_start: int
    cache: WindowCache

    def of(self, vehicles: Sequence[str]) -> np.ndarray:
        """The rooms of ``vehicles`` (read-only)."""
        return self.cache.rooms(
            vehicles, lambda: room_of(self.mode, self.ledger, vehicles, self.window_start)
        )


def vehicle_room(rooms: Rooms, occupancy: Occupancy) -> np.ndarray:
    """What each vehicle of ``occupancy`` may spend in this window."""
    return rooms.of(occupancy.vehicles)


def budget_mode(params: ReleaseParams) -> VehicleBudget:
    """The vehicle budget these parameters release under (the budget pipeline's only)."""
    mode = params.mode
    assert isinstance(mode, VehicleBudget), "the budget pipeline runs under a vehicle budget"
    return mode


def unit_price(rooms: Rooms, vehicles: Sequence[str], params: ReleaseParams) -> UnitPrice:
    """The adaptive cells' budget-aware pass test (§13.1): a unit passes when its vehicles'
    rooms (of the columns' ``vehicles``) can pay the ε it needs. Made once per window for
    the same rooms (the choices and the release price read it; its rooms ranked once)."""
    room = rooms.of(vehicles)
    share, burst = 1.0 - params.variance_share, rooms.mode.burst
    return rooms.cache.unit_price(room, lambda: UnitPrice(room, share, burst))


#: A due cell (§13.3: pooling would push it past T) may take at most this share of the burst,
#: or the share of ``max_span_hours`` its span covers if that is more (:func:`epsilon_ceiling`).
SHORT_SPAN_SHARE = 0.5


def budget_plan(
    params: ReleaseParams,
    rooms: Rooms,
    occupancy: Occupancy,
    span_start: np.ndarray | None = None,
    due: tuple[str, ...] = (),
    refusable: np.ndarray | None = None,
    refuse_at: float = 0.0,
) -> BudgetPlan:
    """The window's per-cell ε and sit-outs
    (:func:`~stream_dp.release.vehicle_budget.planner.plan_budget`);
    a cell whose ε passes its :func:`epsilon_ceiling` is dropped (it pools with its next window)
    and the plan computed again (each round drops at least one cell more, so at most one round
    per cell; all rounds in one compiled call, :data:`PLAN_IN_ONE_CALL`), until none passes it
    or those that do are few (:data:`~stream_dp.release.vehicle_budget.planner.SETTLE_SHARE`)
    or ``refusable`` ones among them hold at least ``refuse_at`` readings (per cell: the
    regrouping refuses them and chooses the cells again, so this plan is not the one
    released); those are then dropped from that plan (docs/math.md §13.3, "When the re-plans
    stop"). Unchecked: the release checks the plan it keeps (:func:`check_plan`), not the
    ones the regrouping only prices its cells with. ``span_start``: per cell the start of its
    span, None when no release price applies (:func:`prices_spans`); ``due``: the pool's due
    units (:func:`epsilon_ceiling`)."""
    room = vehicle_room(rooms, occupancy)
    ceiling = epsilon_ceiling(params, rooms, occupancy, span_start, due)
    if ceiling is None or PLAN_IN_ONE_CALL:
        return _plan(params, occupancy, room, None, ceiling, (refusable, refuse_at))
    held: np.ndarray | None = None
    while True:  # the one call's oracle: each round a fresh plan
        plan = _plan(params, occupancy, room, held, None)
        over = _over(plan, ceiling)
        if not over.any():
            return plan
        if _settled(occupancy, plan, over) or _refused(occupancy, over, refusable, refuse_at):
            return _held_in(occupancy, plan, over)
        held = over if held is None else held | over


def _plan(
    params: ReleaseParams,
    occupancy: Occupancy,
    room: np.ndarray,
    held: np.ndarray | None,
    ceiling: np.ndarray | None,
    refusal: tuple[np.ndarray | None, float] = (None, 0.0),
) -> BudgetPlan:
    """:func:`~stream_dp.release.vehicle_budget.planner.plan_budget` with the window's settings
    (``refusal``: its ``refusable`` and ``refuse_at``)."""
    return plan_budget(
        occupancy, room, target=float(params.target_mean_error or 0.0), upper=params.upper,
        variance_share=params.variance_share, max_cell_epsilon=budget_mode(params).burst,
        min_vehicles=params.min_vehicles,
        prefix_limit=params.prefix_limit if params.pseudo_user else None,
        pseudo_user=params.pseudo_user, held=held, ceiling=ceiling, refusable=refusal[0],
        refuse_at=refusal[1],
    )  # fmt: skip


def _over(plan: BudgetPlan, ceiling: np.ndarray) -> np.ndarray:
    """Per cell, whether the plan gives it an ε past its ``ceiling``."""
    return np.isfinite(plan.epsilon) & (plan.epsilon > ceiling + 1e-12)


def _settled(occupancy: Occupancy, plan: BudgetPlan, over: np.ndarray) -> bool:
    """Whether the ``over`` cells hold under :data:`~stream_dp.release.vehicle_budget.planner.
    SETTLE_SHARE` of the readings of the cells the plan releases (docs/math.md §13.3): they are
    then held in this plan, not in a fresh one."""
    total = occupancy.total_per_cell().astype(np.float64)
    live = total[np.isfinite(plan.epsilon)].sum()
    return bool(total[over].sum() < planner.SETTLE_SHARE * live)


def _refused(
    occupancy: Occupancy, over: np.ndarray, refusable: np.ndarray | None, refuse_at: float
) -> bool:
    """Whether the ``refusable`` cells among the ``over`` ones hold readings, at least
    ``refuse_at`` of them (the compiled loop's stop at a refusal)."""
    if refusable is None:
        return False
    refused = float(occupancy.total_per_cell()[over & refusable].sum())
    return refused > 0.0 and refused >= refuse_at


def _held_in(occupancy: Occupancy, plan: BudgetPlan, over: np.ndarray) -> BudgetPlan:
    """The ``plan`` with its ``over`` cells dropped: their entries unkept, their ε +inf, each
    payment summed again in entry order (the compiled loop's ``hold_in_plan``)."""
    cell = occupancy.cell_index
    kept = plan.kept & ~over[cell]
    epsilon = np.where(over, np.inf, plan.epsilon)
    paid = np.zeros(len(occupancy.vehicles))
    for e in np.flatnonzero(kept).tolist():  # the oracle: one addition at a time, in order
        paid[occupancy.vehicle_index[e]] += epsilon[cell[e]]
    return BudgetPlan(kept, epsilon, plan.cap, paid, plan.rounds)


def prices_spans(params: ReleaseParams, adaptive: AdaptiveCells | None, last: bool) -> bool:
    """Whether a release price caps the cells' ε (:func:`epsilon_ceiling`): with spans and
    adaptive cells, before the input's last window."""
    return adaptive is not None and budget_mode(params).spans and not last


def epsilon_ceiling(
    params: ReleaseParams,
    rooms: Rooms,
    occupancy: Occupancy,
    span_start: np.ndarray | None,
    due: tuple[str, ...] = (),
    exponent: float = SHARE_EXPONENT,
) -> np.ndarray | None:
    """Per cell, the most ε it may take now: its release price (§13.3,
    :func:`~stream_dp.release.vehicle_budget.price.release_price`) from its span so far and its
    vehicles'
    rooms; a due cell's, the burst times the share of ``max_span_hours`` its span covers, at
    least :data:`SHORT_SPAN_SHARE` (``due``: the units pooling would push past T). None (the
    burst for every cell) when no release price applies (:func:`prices_spans`: the caller then
    gives no ``span_start``, per cell the start of its span, e.g.
    :func:`~stream_dp.release.vehicle_budget.spans.span_starts` from the reading log);
    ``exponent``: the paced share's (+inf: the overflow alone before the span's last window,
    the budget that spending now takes from no later release)."""
    if span_start is None:
        return None
    mode, window_start = budget_mode(params), rooms.window_start
    windows = (window_start - span_start) // params.window_seconds + 1
    burst, budget = mode.burst, mode.budget
    pace = budget * params.window_seconds / params.ledger_period_seconds
    present = np.diff(occupancy.cell_start) > 0  # entries grouped by cell
    cells = (occupancy.cell_index, occupancy.vehicle_index, occupancy.count, len(occupancy.cells))
    median_room = unit_price(rooms, occupancy.vehicles, params).pay(*cells, present)  # no share
    ceiling = release_price(windows, mode.max_span_hours, burst, pace, median_room, exponent)
    if due:
        is_due = due_cells(occupancy.cells, due)
        share = np.clip(windows / mode.max_span_hours, SHORT_SPAN_SHARE, 1.0)
        ceiling[is_due] = burst * share[is_due]
    return ceiling


def check_plan(
    occupancy: Occupancy, plan: BudgetPlan, room: np.ndarray, charged: np.ndarray
) -> None:
    """The guarantee of §13, checked apart from the plan's own sums: no kept reading in a
    dropped cell (+inf ε), and each vehicle's ``charged`` ε (what the ledger would record
    were every cell the plan keeps released: its own share of each, §13.1, "The loss";
    :meth:`~stream_dp.release.accounting.PrivacyAccountant.vehicle_charges`) at most its
    room. A plan that fails is never released (the window fails)."""
    if not (
        len(room) == len(occupancy.vehicles)
        and len(plan.kept) == occupancy.n_entries
        and len(plan.epsilon) == len(occupancy.cells)
        and len(plan.paid) == len(room)
        and len(charged) == len(room)
    ):
        raise AssertionError("vehicle budget plan, room and occupancy differ in length")
    start = occupancy.cell_start
    dropped = np.flatnonzero(plan.dropped).tolist()  # only the dropped cells' entries are read
    if any(plan.kept[start[g] : start[g + 1]].any() for g in dropped):
        raise AssertionError("vehicle budget plan keeps a reading of a cell it drops")
    if not np.all(charged <= room + 1e-9):
        raise AssertionError("vehicle budget plan pays past a vehicle's room")


def planned_bound(
    occupancy: Occupancy, plan: BudgetPlan, params: ReleaseParams
) -> tuple[BoundedPairs, int, int]:
    """What the plan bounds each vehicle to (its kept entries and per-cell caps, §13), the
    largest number of cells a vehicle is in before its sit-outs (G1), and how many vehicles
    sit out some cell the plan did not drop."""
    upper = params.upper
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
    capped = PseudoUserResult(plan.cap, kept_count, error, var_sens)
    return BoundedPairs(plan.kept, grids, error, error, capped), int(g1), int(sat_out)

"""The release's own check of a vehicle-budget plan (release/vehicle_budget/plan.py
``check_plan``): each vehicle's charge, computed by the accountant from the plan's kept
entries, caps and cells' ε apart from the planner's sums (its own share of each cell, as the
ledger records it), must fit its room, and no dropped cell's reading may be kept; a plan that
fails the check fails the window instead."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from stream_dp.dp.occupancy import Occupancy
from stream_dp.release.accounting import PrivacyAccountant
from stream_dp.release.vehicle_budget.plan import check_plan, planned_bound
from stream_dp.release.vehicle_budget.planner import BudgetPlan, plan_budget
from tests.unit.release.test_vehicle_budget import _params

U, T = 65.0, 30.0


def _occupancy(counts: list[int] | None = None) -> Occupancy:
    """Two cells of 40 vehicles each, vehicles 0–19 in both; 5 readings per entry unless
    ``counts`` (one per entry) says otherwise."""
    cells = [0] * 40 + [1] * 40
    vehicles = list(range(40)) + list(range(20, 60))
    return Occupancy(
        cells=("a", "b"), vehicles=tuple(f"v{v:02d}" for v in range(60)),
        cell_index=np.array(cells, dtype=np.int64),
        vehicle_index=np.array(vehicles, dtype=np.int64),
        count=np.array(counts or [5] * 80, dtype=np.int64),
    )  # fmt: skip


def _plan(occ: Occupancy, room: np.ndarray) -> BudgetPlan:
    return plan_budget(occ, room, target=T, upper=U, variance_share=0.0, max_cell_epsilon=5.0)


def _charged(occ: Occupancy, plan: BudgetPlan, variance_share: float = 0.0) -> np.ndarray:
    """What the release stage checks: the accountant's charge of the plan's kept cells."""
    params = _params(upper=U, target_mean_error=T, variance_share=variance_share)
    bounded, _, _ = planned_bound(occ, plan, params)
    accountant = PrivacyAccountant(params, plan.epsilon)
    return accountant.vehicle_charges(occ, plan.kept, np.isfinite(plan.epsilon), bounded.capped)


def test_a_plan_within_every_room_passes() -> None:
    occ, room = _occupancy(), np.full(60, 3.0)
    plan = _plan(occ, room)
    assert np.isfinite(plan.epsilon).all() and plan.kept.all()  # both cells released
    check_plan(occ, plan, room, _charged(occ, plan))


def test_a_vehicle_charged_past_its_room_fails_whatever_the_planners_sums() -> None:
    """The planner's ``paid`` (here claiming one cell's ε for everyone, as a bug could) is not
    what is checked: the charge summed over the kept entries catches the vehicles read in
    both cells."""
    occ, room = _occupancy(), np.full(60, 3.0)
    plan = _plan(occ, room)
    charged = _charged(occ, plan)
    both_cells = plan.epsilon.sum()
    assert charged.max() == both_cells  # 5 readings each: every vehicle at the cap
    short = replace(plan, paid=np.full(60, plan.epsilon.max()))
    with pytest.raises(AssertionError, match="past a vehicle's room"):
        check_plan(occ, short, np.full(60, both_cells - 0.01), charged)


def test_a_vehicle_is_checked_by_its_own_share_not_the_whole_cell_epsilon() -> None:
    """§13.1, "The loss": a vehicle with fewer kept readings than its cell's cap is charged
    its own share of the cell's ε, and that is what must fit its room. Vehicles of 1–9
    readings: the cell's cap is above most counts, so most vehicles pay less than the whole
    ε; a room between the two passes, a room under the charge fails."""
    counts = [1 + (i % 9) for i in range(80)]
    occ = _occupancy(counts)
    plan = _plan(occ, np.full(60, 100.0))
    charged = _charged(occ, plan)
    whole = np.bincount(occ.vehicle_index, weights=plan.epsilon[occ.cell_index], minlength=60)
    cheaper = charged < whole
    assert cheaper.sum() > 30 and np.all(charged <= whole)
    between = (charged + whole) / 2  # every whole-ε sum past it where a vehicle pays less
    check_plan(occ, plan, np.where(cheaper, between, whole), charged)
    v = int(np.flatnonzero(cheaper)[0])
    under = np.where(cheaper, between, whole)
    under[v] = charged[v] - 1e-6
    with pytest.raises(AssertionError, match="past a vehicle's room"):
        check_plan(occ, plan, under, charged)


def test_with_a_variance_share_the_charge_the_check_reads_is_the_whole_epsilon() -> None:
    """The variance runs at the cell's ``s ε`` whatever a vehicle's share of the mean, so
    the charge the check holds against each room is the whole ε of each kept cell."""
    counts = [1 + (i % 9) for i in range(80)]
    occ = _occupancy(counts)
    plan = plan_budget(
        occ, np.full(60, 100.0), target=T, upper=U, variance_share=0.25, max_cell_epsilon=5.0
    )
    whole = np.bincount(occ.vehicle_index, weights=plan.epsilon[occ.cell_index], minlength=60)
    assert np.array_equal(_charged(occ, plan, variance_share=0.25), whole)


@pytest.mark.parametrize(("cell", "dropped_as"), [(0, np.inf), (1, np.inf), (1, np.nan)])
def test_a_plan_that_keeps_a_dropped_cells_readings_fails(cell: int, dropped_as: float) -> None:
    """The first or the last cell dropped (+inf, or an ε that is not a number), its entries
    still kept."""
    occ, room = _occupancy(), np.full(60, 3.0)
    plan = _plan(occ, room)
    charged = _charged(occ, plan)
    assert len(occ.cells) == 2 and plan.kept.all()
    epsilon = plan.epsilon.copy()
    epsilon[cell] = dropped_as
    with pytest.raises(AssertionError, match="a cell it drops"):
        check_plan(occ, replace(plan, epsilon=epsilon), room, charged)


def test_a_room_of_another_length_fails_the_check() -> None:
    """A room or charge for fewer vehicles than the occupancy names must fail, not be
    compared with the wrong vehicles' (or broadcast)."""
    occ, room = _occupancy(), np.full(60, 3.0)
    plan = _plan(occ, room)
    charged = _charged(occ, plan)
    with pytest.raises(AssertionError, match="differ in length"):
        check_plan(occ, plan, room[:30], charged)
    with pytest.raises(AssertionError, match="differ in length"):
        check_plan(occ, plan, room, charged[:30])
    with pytest.raises(AssertionError, match="differ in length"):
        check_plan(occ, replace(plan, kept=plan.kept[:-1]), room, charged)

"""The release's own check of a vehicle-budget plan (release/vehicle_budget/plan.py
``check_plan``): it
sums what each vehicle pays from the plan's kept entries and cells' ε, apart from the plan's
kernel, so a plan that would release past a vehicle's room, or a dropped cell's readings, fails
the window instead."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from stream_dp.dp import kernels
from stream_dp.dp.occupancy import Occupancy
from stream_dp.release.vehicle_budget.plan import check_plan
from stream_dp.release.vehicle_budget.planner import plan_budget

U, T = 65.0, 30.0


def _occupancy() -> Occupancy:
    """Two cells of 40 vehicles each, vehicles 0–19 in both."""
    cells = [0] * 40 + [1] * 40
    vehicles = list(range(40)) + list(range(20, 60))
    return Occupancy(
        cells=("a", "b"), vehicles=tuple(f"v{v:02d}" for v in range(60)),
        cell_index=np.array(cells, dtype=np.int64),
        vehicle_index=np.array(vehicles, dtype=np.int64),
        count=np.full(80, 5, dtype=np.int64),
    )  # fmt: skip


def _plan(room: np.ndarray):  # noqa: ANN202 - a BudgetPlan
    return plan_budget(
        _occupancy(), room, target=T, upper=U, variance_share=0.0, max_cell_epsilon=5.0
    )


def test_a_plan_within_every_room_passes() -> None:
    room = np.full(60, 3.0)
    plan = _plan(room)
    assert np.isfinite(plan.epsilon).all() and plan.kept.all()  # both cells released
    check_plan(_occupancy(), plan, room)


def test_a_plan_whose_own_sums_miss_a_cell_fails() -> None:
    """The kernel's ``paid`` counting one cell only (as a bug could) still passes its own
    comparison; the check's sum over the kept entries catches the vehicles in both cells."""
    occ, room = _occupancy(), np.full(60, 3.0)
    plan = _plan(room)
    both_cells = plan.epsilon.sum()
    room = np.full(60, both_cells - 0.01)  # vehicles 20–39 cannot pay both cells
    short = replace(plan, paid=np.full(60, plan.epsilon.max()))
    with pytest.raises(AssertionError, match="past a vehicle's room"):
        check_plan(occ, short, room)


def test_a_plan_that_keeps_a_dropped_cells_readings_fails() -> None:
    occ, room = _occupancy(), np.full(60, 3.0)
    plan = _plan(room)
    epsilon = plan.epsilon.copy()
    epsilon[1] = np.inf  # cell b dropped, its entries still kept
    with pytest.raises(AssertionError, match="a cell it drops"):
        check_plan(occ, replace(plan, epsilon=epsilon), room)


@pytest.mark.parametrize("compiled", [True, False])
def test_a_room_of_another_length_fails_the_check(
    compiled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The compiled pass reads each vehicle's sums by index: a room for fewer vehicles than
    the occupancy names must fail, not be read past its end."""
    monkeypatch.setattr(kernels, "use_compiled", lambda n: compiled)
    occ, room = _occupancy(), np.full(60, 3.0)
    plan = _plan(room)
    with pytest.raises(AssertionError, match="differ in length"):
        check_plan(occ, plan, room[:30])
    with pytest.raises(AssertionError, match="differ in length"):
        check_plan(occ, replace(plan, kept=plan.kept[:-1]), room)

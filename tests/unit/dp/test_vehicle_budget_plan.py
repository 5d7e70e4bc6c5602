"""The vehicle budget's plan (docs/math.md §13.1) equals the whole-occupancy reference
(``tests.support.vehicle_budget_reference``) exactly: kept entries, per-cell ε and caps,
payments (bit for bit) and rounds, on random occupancies with sit-outs and dropped cells."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dp.dp.occupancy import Occupancy
from stream_dp.release.vehicle_budget import planner as vehicle_budget
from stream_dp.release.vehicle_budget.planner import BudgetPlan, plan_budget
from tests.support.vehicle_budget_reference import reference_plan_budget

U, T = 65.0, 10.0


def random_occupancy(rng: np.random.Generator, n_cells: int, n_vehicles: int) -> Occupancy:
    """Each vehicle in a few cells with skewed counts; entries grouped by cell, each cell's
    entries in a shuffled vehicle order (as the release's merged order may be)."""
    pairs: set[tuple[int, int]] = set()
    for v in range(n_vehicles):
        home = int(rng.integers(n_cells))
        for _ in range(int(rng.integers(1, 6))):
            pairs.add(((home + int(rng.integers(0, 4))) % n_cells, v))
    cells = np.array(sorted({c for c, _ in pairs}), dtype=np.int64)
    vehicles = np.array(sorted({v for _, v in pairs}), dtype=np.int64)
    cell_of = {int(c): i for i, c in enumerate(cells)}
    vehicle_of = {int(v): i for i, v in enumerate(vehicles)}
    rows = sorted(pairs)
    cell_index = np.array([cell_of[c] for c, _ in rows], dtype=np.int64)
    vehicle_index = np.array([vehicle_of[v] for _, v in rows], dtype=np.int64)
    within = np.lexsort((rng.random(len(rows)), cell_index))  # grouped by cell, shuffled
    count = rng.choice([1, 1, 2, 3, 5, 8, 20, 64], size=len(rows)).astype(np.int64)
    return Occupancy(
        cells=tuple(f"c{c:04d}" for c in cells.tolist()),
        vehicles=tuple(f"v{v:05d}" for v in vehicles.tolist()),
        cell_index=cell_index[within],
        vehicle_index=vehicle_index[within],
        count=count,
    )


def both(occ: Occupancy, room: np.ndarray, **kwargs: Any) -> tuple[BudgetPlan, BudgetPlan]:
    return plan_budget(occ, room.copy(), **kwargs), reference_plan_budget(occ, room, **kwargs)


def assert_same(plan: BudgetPlan, reference: BudgetPlan) -> None:
    assert np.array_equal(plan.kept, reference.kept)
    assert np.array_equal(plan.epsilon, reference.epsilon)
    assert np.array_equal(plan.cap, reference.cap)
    assert plan.paid.tobytes() == reference.paid.tobytes()  # the same floats, bit for bit
    assert plan.rounds == reference.rounds


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n_cells=st.integers(1, 30),
    n_vehicles=st.integers(1, 120),
    room_scale=st.sampled_from([0.3, 1.0, 2.5, 10.0]),
    max_cell_epsilon=st.sampled_from([0.5, 2.0, 5.0, 20.0]),
    min_vehicles=st.sampled_from([1, 2, 3, 6, 10]),
    prefix_limit=st.sampled_from([None, 4, 16]),
    pseudo_user=st.booleans(),
    variance_share=st.sampled_from([0.0, 0.25, 0.3, 0.5]),
    hold=st.booleans(),
    few=st.sampled_from([0, 16, 10**9]),
)
def test_the_plan_equals_the_reference(
    seed: int, n_cells: int, n_vehicles: int, room_scale: float, max_cell_epsilon: float,
    min_vehicles: int, prefix_limit: int | None, pseudo_user: bool, variance_share: float,
    hold: bool, few: int,
) -> None:  # fmt: skip
    """``few`` 0 / 10**9: every later round re-pays the changed cells' vehicles alone / pays
    every vehicle in one pass (with at most 120 vehicles, 16 always takes the one pass)."""
    default, vehicle_budget._FEW = vehicle_budget._FEW, few
    try:
        rng = np.random.default_rng(seed)
        occ = random_occupancy(rng, n_cells, n_vehicles)
        room = rng.uniform(0.0, room_scale, len(occ.vehicles))
        room[rng.random(len(room)) < 0.1] = 0.0  # some vehicles have nothing left
        held = rng.random(len(occ.cells)) < 0.2 if hold else None
        plan, reference = both(
            occ, room, target=T, upper=U, variance_share=variance_share,
            max_cell_epsilon=max_cell_epsilon, min_vehicles=min_vehicles,
            prefix_limit=prefix_limit, pseudo_user=pseudo_user, held=held,
        )  # fmt: skip
        assert_same(plan, reference)
    finally:
        vehicle_budget._FEW = default


def _some_short_of_room(
    occ: Occupancy, rng: np.random.Generator, share: float
) -> tuple[np.ndarray, BudgetPlan]:
    """``share`` of the vehicles short of room, the others with plenty: the rooms, and the
    plan, checked equal to the reference's."""
    short = rng.random(len(occ.vehicles)) < share
    room = np.where(short, rng.uniform(0.0, 2.0, len(occ.vehicles)), 100.0)
    plan, reference = both(
        occ, room, target=T, upper=U, variance_share=0.0, max_cell_epsilon=2.0, min_vehicles=2,
        prefix_limit=16,
    )  # fmt: skip
    assert_same(plan, reference)
    return room, plan


def test_a_large_plan_with_many_rounds_equals_the_reference() -> None:
    """A window where the plan really works: many sit-out rounds, cells dropped when their
    vehicles leave, most vehicles left in some cell."""
    rng = np.random.default_rng(25)
    occ = random_occupancy(rng, 100, 6000)
    room, plan = _some_short_of_room(occ, rng, 0.1)  # a tenth of the vehicles
    sat_out = ~plan.kept & np.isfinite(plan.epsilon)[occ.cell_index]
    assert plan.rounds >= 5
    assert sat_out.sum() > 300
    assert np.isfinite(plan.epsilon).sum() > 30
    first = plan_budget(
        occ, np.full(len(room), np.inf), target=T, upper=U, variance_share=0.0,
        max_cell_epsilon=2.0, min_vehicles=2, prefix_limit=16,
    )  # fmt: skip
    assert plan.dropped.sum() > first.dropped.sum()  # cells dropped after sit-outs


def test_a_cell_left_below_min_vehicles_by_a_sit_out_is_dropped_as_the_reference_drops_it() -> None:
    # w1 has no room: it sits out a, which keeps two vehicles (of three needed): dropped.
    occ = Occupancy.from_triples(
        [("a", "w0", 8), ("a", "w1", 1), ("a", "w2", 8), ("b", "w1", 3), ("b", "w3", 3)]
    )
    room = np.array([50.0, 0.0, 50.0, 50.0])
    kwargs: dict[str, Any] = {"target": T, "upper": U, "variance_share": 0.0}
    plan, reference = both(occ, room, max_cell_epsilon=50.0, min_vehicles=3, **kwargs)
    assert_same(plan, reference)
    assert plan.dropped.tolist() == [True, True] and plan.rounds == 2
    assert not plan.kept.any()
    loose, loose_reference = both(occ, room, max_cell_epsilon=50.0, min_vehicles=2, **kwargs)
    assert_same(loose, loose_reference)
    assert loose.dropped.tolist() == [False, True]  # with two needed, a is released


def _with_huge_counts(occ: Occupancy, rng: np.random.Generator) -> Occupancy:
    """``occ`` with a few counts in the millions: too wide a range for a histogram per cell."""
    count = occ.count.copy()
    count[rng.choice(len(count), 5, replace=False)] = rng.integers(10**6, 10**7, 5)
    return Occupancy(occ.cells, occ.vehicles, occ.cell_index, occ.vehicle_index, count)


def test_a_plan_whose_cells_runs_come_from_sorting_equals_the_reference() -> None:
    """Counts too wide for a histogram per cell: each cell's distinct counts come from sorting
    them; the plan (with sit-outs over many rounds and dropped cells) is still the reference's."""
    from stream_dp.dp.ordering import counting_sort_fits

    rng = np.random.default_rng(31)
    occ = _with_huge_counts(random_occupancy(rng, 60, 3000), rng)
    assert not counting_sort_fits(occ.n_entries, len(occ.cells) * (int(occ.count.max()) + 1))
    _, plan = _some_short_of_room(occ, rng, 0.15)
    assert plan.rounds >= 4 and (~plan.kept & ~plan.dropped[occ.cell_index]).sum() > 100
    assert 0 < plan.dropped.sum() < len(occ.cells)


def test_a_cells_runs_by_histogram_are_its_sorted_distinct_counts() -> None:
    """The plan's layout: each cell's distinct counts ascending with how many entries have
    each, the same by histogram as by sorting; each vehicle's slots are its entries in entry
    order, each naming its entry and that entry's run."""
    from stream_dp.release.vehicle_budget.planner_kernel import layout

    rng = np.random.default_rng(4)
    occ = random_occupancy(rng, 40, 500)
    count, vehicle, start = occ.count, occ.vehicle_index, occ.cell_start
    n_vehicles, top = len(occ.vehicles), int(occ.count.max())
    by_histogram = layout(start, vehicle, count, n_vehicles, top, True)
    by_sorting = layout(start, vehicle, count, n_vehicles, top, False)
    for one, other in zip(by_histogram, by_sorting, strict=True):
        assert one.tolist() == other.tolist()
    run_start, run_count, run_kept, run_cell, vehicle_start, slot = by_histogram
    for g in range(len(occ.cells)):
        values, times = np.unique(count[start[g] : start[g + 1]], return_counts=True)
        runs = slice(run_start[g], run_start[g + 1])
        assert run_count[runs].tolist() == values.tolist()
        assert run_kept[runs].tolist() == times.tolist()
        assert set(run_cell[runs].tolist()) <= {g}
    entry, run = slot >> 32, slot & 0xFFFFFFFF
    assert entry.tolist() == np.argsort(vehicle, kind="stable").tolist()
    assert vehicle_start.tolist() == [0, *np.cumsum(np.bincount(vehicle)).tolist()]
    assert run_count[run].tolist() == count[entry].tolist()
    assert run_cell[run].tolist() == occ.cell_index[entry].tolist()


@pytest.mark.parametrize("few", [0, 10**9])
def test_plans_that_release_and_sit_out_equal_the_reference_on_each_payment_path(
    few: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Windows where cells are released and vehicles sit out (T 30: cells of a few dozen
    vehicles meet it at ε ≈ 0.4; rooms 1–8, some 0; the random test above mostly drops every
    cell), each later round's payments either re-summed
    for the changed cells' vehicles alone (``few`` 0) or for every vehicle (10**9)."""
    monkeypatch.setattr(vehicle_budget, "_FEW", few)
    released = sat_out = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        occ = random_occupancy(rng, int(rng.integers(3, 20)), int(rng.integers(50, 300)))
        room = rng.uniform(1.0, 8.0, len(occ.vehicles))
        room[rng.random(len(room)) < 0.05] = 0.0
        plan, reference = both(
            occ, room, target=30.0, upper=U,
            variance_share=float(rng.choice([0.0, 0.25, 0.3, 0.5])), max_cell_epsilon=5.0,
            min_vehicles=2, prefix_limit=[None, 4, 16][seed % 3], pseudo_user=seed % 4 != 0,
            held=rng.random(len(occ.cells)) < 0.1 if seed % 2 else None,
        )  # fmt: skip
        assert_same(plan, reference)
        finite = np.isfinite(plan.epsilon)
        released += int(finite.sum())
        sat_out += int(np.sum(~plan.kept & finite[occ.cell_index]))
    assert released > 100 and sat_out > 100  # the data exercise both the release and sit-outs


def test_a_sit_out_of_the_largest_count_can_lower_a_cells_epsilon() -> None:
    """docs/math.md §13.1: under the prefix limit only caps up to C and the largest count are
    allowed, so when the vehicle of the largest count sits out, a smaller count becomes the
    largest and allowed, and the cell's ε falls (2.55 with all kept, 0.64 without it): a
    sit-out can lower a cell's ε, so keeping a dropped cell dropped is a choice."""
    occ = Occupancy.from_triples(
        [("x", "big", 3000)] + [("x", f"v{i:03d}", 100) for i in range(200)]
    )
    options = dict(target=T, upper=U, variance_share=0.0, max_cell_epsilon=4.0, prefix_limit=16)
    everyone = plan_budget(occ, np.full(len(occ.vehicles), np.inf), **options)  # type: ignore[arg-type]
    room = np.full(len(occ.vehicles), 1000.0)
    room[occ.vehicles.index("big")] = 0.0
    without_big = plan_budget(occ, room, **options)  # type: ignore[arg-type]
    assert everyone.kept.all()
    big = occ.vehicle_index == occ.vehicles.index("big")
    assert without_big.kept.sum() == 200 and not without_big.kept[big].any()
    assert 0.0 < without_big.epsilon[0] < everyone.epsilon[0] / 3

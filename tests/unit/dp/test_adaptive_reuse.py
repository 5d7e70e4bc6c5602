"""The adaptive choice's fast paths (issue 25: the 1M-reading window's budget release) against
the level-by-level choice they replace: the compiled (group, vehicle) aggregation, the price's
order by room ranks, the whole parents reused one level up, and the finest level's pass test
reused by a later choice of the same window. Each must give exactly what the old path gave."""

from __future__ import annotations

import random
from typing import Any

import h3
import numpy as np
import pytest

from stream_dp.dp import adaptive_cells as ac
from stream_dp.dp.adaptive_cells import (
    BudgetChoice,
    UnitPrice,
    aggregate_by_sort,
    choose_cells,
    weighted_quantile_by_sort,
)
from stream_dp.dp.adaptive_kernel import (
    aggregate_pairs,
    aggregate_selected_pairs,
    weighted_quantile,
)

U, T = 65.0, 10.0
CENTRE = h3.latlng_to_cell(40.70, -74.02, 8)


@pytest.mark.parametrize("seed", range(8))
def test_the_compiled_aggregation_has_the_sorted_ones_entries(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, n_groups, n_vehicles = int(rng.integers(0, 3000)), int(rng.integers(1, 40)), 500
    group = rng.integers(0, n_groups, n)
    vehicle = rng.integers(0, n_vehicles, n)  # many repeated (group, vehicle) entries
    count = rng.integers(1, 30, n)
    got = aggregate_pairs(group, vehicle, count, n_groups, n_vehicles)
    want = aggregate_by_sort(group, vehicle, count, n_groups, n_vehicles)
    assert n == 0 or len(want[0]) < n  # the data has repeats to add up
    assert all(a.dtype == np.int64 for a in got)
    assert np.all(np.diff(got[0]) >= 0)  # grouped by group, ascending
    by_vehicle = np.lexsort((got[1], got[0]))  # within a group: in no promised order
    for a, b in zip(got, want, strict=True):
        assert np.array_equal(a[by_vehicle], b)


@pytest.mark.parametrize("seed", range(6))
def test_aggregating_the_selected_entries_is_aggregating_their_copy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, n_groups, n_vehicles = int(rng.integers(1, 3000)), int(rng.integers(1, 40)), 500
    group, vehicle = rng.integers(0, n_groups, n), rng.integers(0, n_vehicles, n)
    count, select = rng.integers(1, 30, n), rng.random(n) < 0.6
    got = aggregate_selected_pairs(group, vehicle, count, select, n_groups + 3, n_vehicles)
    want = aggregate_pairs(group[select], vehicle[select], count[select], n_groups, n_vehicles)
    assert len(want[0]) < select.sum()  # repeats were added up
    assert all(a.tobytes() == b.tobytes() for a, b in zip(got, want, strict=True))


@pytest.mark.parametrize("seed", range(8))
def test_the_price_orders_entries_as_a_lexsort_by_room(seed: int) -> None:
    rng = np.random.default_rng(seed)
    room = rng.choice([0.0, 0.5, 1.0, 2.0, 7.0 / 3.0], size=300)  # ties
    price = UnitPrice(room, 1.0, 7.0 / 3.0)
    group, vehicle = rng.integers(0, 25, 2000), rng.integers(0, 300, 2000)
    want = np.lexsort((room[vehicle], group))
    assert np.array_equal(price.order(group, vehicle, 25), want)


def _old_choose_remainder(
    cell_names: list[str], pairs: Any, rule: Any, levels: Any, budget: Any
) -> ac.AdaptiveCells:
    """The remainder choice as it was before its fast paths (7b7eba5): every level's entries
    aggregated and tested from scratch, both split tests computed (the oracle)."""
    finest, coarsest, detail_slack = levels
    n_cells = len(cell_names)
    unit_of_cell = np.arange(n_cells, dtype=np.int64)
    unit_names = list(cell_names)
    final_of_cell = np.full(n_cells, -1, dtype=np.int64)
    released: list[tuple[str, int, bool, float]] = []
    partial_parent: set[str] = set()
    entries = pairs
    for level in range(finest, coarsest - 1, -1):
        alive = unit_of_cell >= 0
        if not alive.any():
            break
        unit, vehicle, count = entries
        n_units = len(unit_names)
        error, passes = rule.passing(unit, vehicle, count, n_units, unique=True)
        passes &= budget.may_pass(unit_names, unit_of_cell, level > coarsest)
        occupied = np.zeros(n_units, dtype=bool)
        occupied[unit] = True
        if level == coarsest:
            release_now, move_up = passes & occupied, np.zeros(n_units, dtype=bool)
        else:
            parents = ac._parents(unit_names, level - 1)
            parent_names, parent_of = np.unique(np.asarray(parents, dtype=object),
                                                return_inverse=True)  # fmt: skip
            failing = occupied & ~passes
            n_parents = len(parent_names)
            has_failing = np.zeros(n_parents, dtype=bool)
            has_failing[parent_of[failing]] = True
            mixed = has_failing[parent_of[unit]]
            up = parent_of[unit]
            _, rem = rule.passing(up, vehicle, count, n_parents, mixed & failing[unit])
            _, whole_passes = rule.passing(up, vehicle, count, n_parents, mixed)
            readings = np.bincount(unit, weights=count, minlength=n_units)
            kept_split = np.bincount(parent_of, weights=readings * passes, minlength=n_parents)
            rest = np.bincount(parent_of, weights=readings * failing, minlength=n_parents)
            whole = np.bincount(parent_of, weights=readings, minlength=n_parents)
            kept_split += rest * rem
            split = ~has_failing | (kept_split >= (1.0 - detail_slack) * whole * whole_passes)
            release_now = occupied & passes & split[parent_of]
            move_up = occupied & ~release_now
        new_index = np.full(n_units, -1, dtype=np.int64)
        for u in np.flatnonzero(release_now).tolist():
            new_index[u] = len(released)
            name = unit_names[u]
            released.append((name, level, name in partial_parent, float(error[u])))
        done = release_now[unit_of_cell.clip(0)] & alive
        final_of_cell[done] = new_index[unit_of_cell[done]]
        if level == coarsest:
            break
        partial_parent = {
            parents[u]
            for u in range(n_units)
            if release_now[u] or (move_up[u] and unit_names[u] in partial_parent)
        }
        moving = alive & move_up[unit_of_cell.clip(0)]
        next_unit = np.full(n_cells, -1, dtype=np.int64)
        next_unit[moving] = parent_of[unit_of_cell[moving]]
        used = np.unique(next_unit[moving])
        remap = np.full(len(parent_names), -1, dtype=np.int64)
        remap[used] = np.arange(len(used))
        unit_of_cell = np.where(moving, remap[next_unit.clip(0)], -1)
        unit_names = [str(parent_names[i]) for i in used.tolist()]
        up_entry = move_up[unit]
        entries = aggregate_by_sort(
            remap[parent_of[unit[up_entry]]], vehicle[up_entry], count[up_entry],
            len(used), rule.n_vehicles,
        )  # fmt: skip
    return ac._result(released, final_of_cell)


def _occupancy(seed: int) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Random res-8 cells around the centre, (cell, vehicle) pairs and rooms with ties."""
    rng = random.Random(seed)
    names = sorted(rng.sample(sorted(h3.grid_disk(CENTRE, 8)), 60))
    n_vehicles = 400
    pairs = {
        (c, rng.randrange(n_vehicles)): rng.choice([1, 2, 3, 6, 12, 30])
        for c in range(len(names))
        for _ in range(rng.choice([1, 3, 8, 20, 40]))
    }
    keys = sorted(pairs)
    cell = np.array([c for c, _ in keys], dtype=np.int64)
    vehicle = np.array([v for _, v in keys], dtype=np.int64)
    count = np.array([pairs[k] for k in keys], dtype=np.int64)
    room = np.array([rng.choice([0.0, 0.6, 1.2, 2.0, 7.0 / 3.0]) for _ in range(n_vehicles)])
    return names, cell, vehicle, count, room


def _fields(chosen: ac.AdaptiveCells) -> tuple[Any, ...]:
    return (chosen.names, chosen.resolution.tolist(), chosen.remainder.tolist(),
            chosen.predicted_error.tolist(), chosen.unit_of_cell.tolist())  # fmt: skip


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("waiting", ["none", "all", "some"])  # all: every finer unit fails
def test_the_budget_choice_is_the_level_by_level_one(
    seed: int, waiting: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    names, cell, vehicle, count, room = _occupancy(seed)
    rng = np.random.default_rng(seed)
    shuffle = rng.permutation(len(cell))  # the pairs in no order, as a window's are
    cell, vehicle, count = cell[shuffle], vehicle[shuffle], count[shuffle]
    wait = {"none": None, "all": np.ones(len(names), dtype=bool),
            "some": rng.random(len(names)) < 0.5}[waiting]  # fmt: skip
    price = UnitPrice(room, 1.0, 7.0 / 3.0)
    memo: dict[str, Any] = {}
    refused: set[str] = set()
    reused = {"first": 0, "jumps": 0}
    real_first, real_jump = ac._first_level, ac._to_coarsest

    def first_level(rule: Any, entries: Any, n_units: int, memo: dict[str, Any]) -> Any:
        reused["first"] += "first_level" in memo
        return real_first(rule, entries, n_units, memo)

    def to_coarsest(*args: Any) -> Any:
        reused["jumps"] += 1
        return real_jump(*args)

    monkeypatch.setattr(ac, "_first_level", first_level)
    monkeypatch.setattr(ac, "_to_coarsest", to_coarsest)
    for _ in range(3):  # choices of one window, each refusing more cells (one memo)
        budget = BudgetChoice(price, frozenset(refused), wait, memo)
        kwargs: dict[str, Any] = dict(upper=U, mean_epsilon=1.0, target=T, finest=8,
                                      coarsest=5, prefix_limit=64, detail_slack=0.3)  # fmt: skip
        got = choose_cells(names, cell, vehicle, count, budget=budget, **kwargs)
        rule = ac._Rule(int(vehicle.max()) + 1, U, 1.0, 64, T, 1, price)
        want = _old_choose_remainder(names, (cell, vehicle, count), rule, (8, 5, 0.3), budget)
        assert _fields(got) == _fields(want)
        finer = [n for n, r in zip(got.names, got.resolution.tolist(), strict=True) if r > 5]
        refused.update(finer[::2])
    if waiting == "all":  # every choice moved straight to the coarsest level
        assert reused == {"first": 0, "jumps": 3}
    else:  # the later choices took the finest level, its pairs ordered by cell, from the memo
        assert reused["first"] == 2
        assert np.all(np.diff(memo["by_cell"][1][0]) >= 0)  # ordered by cell


def _numpy_price(
    price: UnitPrice, group: np.ndarray, vehicle: np.ndarray, count: np.ndarray, n_groups: int
) -> np.ndarray:
    """:meth:`UnitPrice.pay` by the weighted quantile's numpy form, always (no shortcut)."""
    order = price.order(group, vehicle, n_groups)
    room = price.room[vehicle]
    return weighted_quantile_by_sort(order, group, room, count, n_groups, float(price.quantile))


@pytest.mark.parametrize("seed", range(8))
def test_the_compiled_price_is_the_numpy_one(seed: int) -> None:
    rng = np.random.default_rng(seed)
    room = rng.choice([0.0, 0.35, 0.5, 1.0, 2.0, 7.0 / 3.0], size=300)  # ties
    price = UnitPrice(room, 1.0, 7.0 / 3.0, quantile=float(rng.choice([0.25, 0.5, 0.75])))
    n_groups = 30  # some groups without entries
    group, vehicle = rng.integers(0, n_groups - 3, 200), rng.integers(0, 300, 200)
    count = rng.integers(1, 40, 200)
    got = price.pay(group, vehicle, count, n_groups)
    want = _numpy_price(price, group, vehicle, count, n_groups)
    assert len(set(want.tolist())) > 2  # the groups' prices differ
    assert got.tobytes() == want.tobytes()


def test_the_compiled_price_takes_the_lower_room_at_an_exact_half() -> None:
    # Unit 0: rooms 1 and 3 with 2 readings each: the half of its readings is reached exactly
    # at the room-1 vehicle, whose room is the price (numpy's searchsorted "left").
    price = UnitPrice(np.array([3.0, 1.0, 2.0]), 1.0, 10.0)
    group, vehicle, count = np.array([0, 0, 1]), np.array([0, 1, 2]), np.array([2, 2, 5])
    order = price.order(group, vehicle, 2)
    got = weighted_quantile(order, group, price.room[vehicle], count, 2, 0.5)
    assert got.tolist() == _numpy_price(price, group, vehicle, count, 2).tolist() == [1.0, 2.0]


@pytest.mark.parametrize("seed", [2, 4])
def test_moving_waiting_cells_straight_to_the_coarsest_level_keeps_the_remainders(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The busiest cells are ready and released at resolution 8 or 7; every other cell waits,
    # so from some level on nothing finer than 5 may pass and the choice moves them to 5 at
    # once: their resolution-5 units are remainders of the cells released below.
    names, cell, vehicle, count, room = _occupancy(seed)
    wait = np.bincount(cell, minlength=len(names)) < 25
    budget = BudgetChoice(UnitPrice(np.full_like(room, 2.0), 1.0, 7.0 / 3.0), waiting=wait)
    kwargs: dict[str, Any] = dict(upper=U, mean_epsilon=1.0, target=T, finest=8, coarsest=5,
                                  prefix_limit=64, detail_slack=0.3, budget=budget)  # fmt: skip
    jumps: list[set[str]] = []
    real_jump = ac._to_coarsest
    monkeypatch.setattr(ac, "_to_coarsest", lambda *a: (jumps.append(set(a[3])), real_jump(*a))[1])
    got = choose_cells(names, cell, vehicle, count, **kwargs)
    assert len(jumps) == 1 and jumps[0]  # the jump carried remainders up
    assert any(r == 5 and rem for r, rem in zip(got.resolution, got.remainder, strict=True))
    monkeypatch.setattr(ac, "JUMP_WAITING", False)
    level_by_level = choose_cells(names, cell, vehicle, count, **kwargs)
    assert len(jumps) == 1
    rule = ac._Rule(int(vehicle.max()) + 1, U, 1.0, 64, T, 1, budget.price)
    old = _old_choose_remainder(names, (cell, vehicle, count), rule, (8, 5, 0.3), budget)
    assert _fields(got) == _fields(level_by_level) == _fields(old)


@pytest.mark.parametrize("compiled", [True, False])
def test_one_room_for_every_vehicle_prices_each_unit_at_it(
    compiled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A fresh ledger gives every vehicle the same room: the price skips the weighted median
    # (units without entries still pay 0).
    rng = np.random.default_rng(3)
    price = UnitPrice(np.full(300, 7.0 / 3.0), 1.0, 7.0 / 3.0)
    group, vehicle = rng.integers(0, 27, 400), rng.integers(0, 300, 400)
    count = rng.integers(1, 40, 400)
    monkeypatch.setattr(ac.kernels, "use_compiled", lambda n: compiled)
    called = {"median": 0}
    real_order = UnitPrice.order

    def order(self: UnitPrice, *args: Any) -> Any:
        called["median"] += 1
        return real_order(self, *args)

    monkeypatch.setattr(UnitPrice, "order", order)
    got = price.pay(group, vehicle, count, 30)
    assert called["median"] == 0
    want = _numpy_price(price, group, vehicle, count, 30)
    assert called["median"] == 1
    assert got.tobytes() == want.tobytes() and want[27:].tolist() == [0.0] * 3


@pytest.mark.parametrize("limit", [None, 1, 7, 64])  # 7: a cap between the counts
@pytest.mark.parametrize("seed", range(4))
def test_tallied_counts_give_the_ordered_scans_errors_to_the_bit(
    seed: int, limit: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(seed)
    n, n_units = 4000, 60  # units 55-59 have no entry
    unit, count = rng.integers(0, n_units - 5, n), rng.choice([1, 2, 3, 5, 9, 12, 40], n)
    eps = rng.choice([0.3, 0.7, 1.9], n_units)
    tallied = ac.best_cap_mean_error(unit, count, n_units, U, eps, limit)
    monkeypatch.setattr(ac, "TALLY_COUNTS", False)
    ordered = ac.best_cap_mean_error(unit, count, n_units, U, eps, limit)
    assert np.isinf(ordered[-5:]).all() and np.isfinite(ordered[:-5]).all()
    assert tallied.tobytes() == ordered.tobytes()

"""The vehicle-budget release's fast paths (issue 25, the 1M-reading window) give exactly what
the slower forms they replace give, on data where they differ in work done."""

from __future__ import annotations

import dataclasses
from concurrent.futures import Future
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dp.dp import epsilon_grid
from stream_dp.dp.array_kernels import pair_prefix_sums, wanted_prefix_sums
from stream_dp.dp.budget_ledger import WindowLoss
from stream_dp.dp.occupancy import Occupancy
from stream_dp.release.params import ReleaseParams
from stream_dp.release.statistics import kept_sums
from stream_dp.release.vehicle_budget import plan as budget
from stream_dp.release.vehicle_budget import planner as vehicle_budget
from stream_dp.release.vehicle_budget.planner import BudgetPlan
from stream_dp.release.vehicle_budget.spans import (
    _cell_span_starts,
    _taken,
    first_window,
    take_pairs,
)
from stream_dp.windows.columns import WindowColumns
from tests.unit.dp.test_vehicle_budget_plan import T, U, assert_same, both

log = st.lists(  # (pair, ts, value): repeated times and values, so the sort's ties matter
    st.tuples(st.integers(0, 7), st.integers(0, 5).map(float), st.integers(-3, 9).map(float)),
    max_size=120,
)


@given(log, st.lists(st.booleans(), min_size=8, max_size=8))
@settings(max_examples=300, deadline=None)
def test_wanted_prefix_sums_are_the_running_sums_of_the_wanted_pairs_alone(items, wanted):
    """Each wanted pair's segment: its readings by (time, value), summed in that order (the
    whole log's :func:`pair_prefix_sums` layout); every other pair's segment is empty."""
    pair = np.array([p for p, _, _ in items], dtype=np.int64)
    ts = np.array([t for _, t, _ in items], dtype=np.float64)
    value = np.array([v / 7.0 for _, _, v in items], dtype=np.float64)  # inexact sums
    start, sums, sums_sq = wanted_prefix_sums(pair, ts, value, np.array(wanted))
    for p in range(8):
        segment = slice(start[p], start[p + 1])
        if not wanted[p]:
            assert start[p + 1] == start[p]
            continue
        mine = [v for _, v in sorted(zip(ts[pair == p], value[pair == p], strict=True))]
        running = np.cumsum(mine) if mine else np.zeros(0)  # sequential, as s += v
        assert sums[segment].tobytes() == running.tobytes()
        assert sums_sq[segment].tobytes() == np.cumsum(np.square(mine)).tobytes()


def _finished(value: object) -> Future:
    future: Future = Future()
    future.set_result(value)
    return future


@given(st.randoms(use_true_random=False))
@settings(max_examples=100, deadline=None)
def test_kept_sums_of_the_cut_pairs_alone_equal_the_whole_logs_prefix_sums(rnd):
    """Readings with fractional values (sums depend on their order); some entries kept whole,
    some cut by a cap, some not at all: without the whole log's prefix sums (the budget's
    path) the sums are the same floats as with them."""
    n = rnd.randint(1, 300)
    cells = [f"c{rnd.randint(0, 4)}" for _ in range(n)]
    vehicles = [f"v{rnd.randint(0, 9)}" for _ in range(n)]
    ts = [float(rnd.randint(0, 20)) for _ in range(n)]
    values = [rnd.uniform(0.0, 65.0) for _ in range(n)]
    columns = WindowColumns.from_readings(cells, vehicles, ts, values, 64)
    entries = np.array(sorted(rnd.sample(range(len(columns)), rnd.randint(1, len(columns)))))
    count = columns.count[entries].astype(np.int64)
    kept = np.array([rnd.choice([0, int(c), rnd.randint(0, int(c))]) for c in count])
    whole = _finished(
        pair_prefix_sums(columns.reading_pair, columns.reading_ts, columns.reading_value,
                         len(columns))
    )  # fmt: skip
    total, total_sq = kept_sums(columns, entries, kept, prefix_sums=whole)
    fast, fast_sq = kept_sums(columns, entries, kept)
    assert fast.tobytes() == total.tobytes() and fast_sq.tobytes() == total_sq.tobytes()


def _roaming_occupancy(rng: np.random.Generator, n_cells: int, n_vehicles: int) -> Occupancy:
    """Each vehicle in 6 to 14 random cells (long payment sums, whose float result depends on
    their order), skewed counts; entries grouped by cell."""
    triples = []
    for v in range(n_vehicles):
        for g in rng.choice(n_cells, int(rng.integers(6, 15)), replace=False).tolist():
            triples.append((f"c{g:03d}", f"v{v:05d}", int(rng.choice([1, 1, 2, 3, 7, 20]))))
    return Occupancy.from_triples(triples)


def _roaming_plans() -> tuple[Occupancy, BudgetPlan, BudgetPlan]:
    """The plan and the reference plan of a roaming window where 15 % of the vehicles are
    short of room (many sit-out rounds, cells dropped in later rounds)."""
    rng = np.random.default_rng(7)
    occ = _roaming_occupancy(rng, 80, 3000)
    short = rng.random(len(occ.vehicles)) < 0.15
    room = np.where(short, rng.uniform(0.0, 6.0, len(occ.vehicles)), 1000.0)
    plan, reference = both(
        occ, room, target=T, upper=U, variance_share=0.0, max_cell_epsilon=2.0, min_vehicles=2,
        prefix_limit=16,
    )  # fmt: skip
    return occ, plan, reference


@pytest.mark.parametrize("update", [True, False])  # moved by each change, or summed again
@pytest.mark.parametrize("few", [0, 16, 10**9])  # always re-sum the few, as chosen, always all
def test_the_plans_payments_are_the_same_whichever_way_each_round_sums_them(
    few: int, update: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A round moves the payments by each change (``UPDATE_PAYMENTS``) or re-sums those of
    the vehicles in the changed cells or of all vehicles (:data:`~stream_dp.dp.
    vehicle_budget._FEW` chooses by the work): each gives the reference plan bit for bit, on
    a window with many sit-out rounds and cells dropped in later rounds."""
    monkeypatch.setattr(vehicle_budget, "_FEW", few)
    monkeypatch.setattr(vehicle_budget, "UPDATE_PAYMENTS", update)
    occ, plan, reference = _roaming_plans()
    assert plan.rounds >= 4 and (~plan.kept & ~plan.dropped[occ.cell_index]).sum() > 100
    assert_same(plan, reference)


@pytest.mark.parametrize("step", [0.01, 0.3 / 128])
def test_payments_on_a_grid_whose_sums_are_not_exact_are_summed_again(
    step: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Moving payments by each change is exact only on a power-of-two ε grid: on another
    grid the plan must re-sum them (the guard), and equal the reference bit for bit."""
    monkeypatch.setattr(vehicle_budget, "UPDATE_PAYMENTS", True)
    monkeypatch.setattr(vehicle_budget, "EPSILON_STEP", step)  # the planner's grid
    monkeypatch.setattr(epsilon_grid, "EPSILON_STEP", step)  # the reference's round_up
    occ, plan, reference = _roaming_plans()
    assert plan.rounds >= 4
    assert_same(plan, reference)


def _fields(columns: WindowColumns) -> list[object]:
    return [
        (value.dtype.str, value.tobytes()) if isinstance(value, np.ndarray) else value
        for value in (getattr(columns, f.name) for f in dataclasses.fields(columns))
    ]


def test_taking_every_pair_of_a_window_gives_what_the_renumbering_gives() -> None:
    """A window that holds every cell carries all its pairs: the shortcut (the same arrays,
    codes as int64) equals the renumbered copy field by field, dtypes included; with a pair
    left out the renumbering runs."""
    rng = np.random.default_rng(3)
    n = 400
    columns = WindowColumns.from_readings(
        [f"c{g}" for g in rng.integers(0, 9, n)], [f"v{v}" for v in rng.integers(0, 40, n)],
        rng.integers(0, 3600, n).astype(float).tolist(), rng.uniform(0, 65, n).tolist(), 8,
    )  # fmt: skip
    columns = dataclasses.replace(  # narrow codes, as merged partials may hold them
        columns, cell_code=columns.cell_code.astype(np.uint8),
        vehicle_code=columns.vehicle_code.astype(np.uint16),
        reading_pair=columns.reading_pair.astype(np.int32),
    )  # fmt: skip
    every = np.arange(len(columns))
    assert _fields(take_pairs(columns, every)) == _fields(_taken(columns, every))
    some = every[1:]
    assert _fields(take_pairs(columns, some)) == _fields(_taken(columns, some))
    assert len(take_pairs(columns, some)) == len(columns) - 1
    unused = dataclasses.replace(columns, cell_names=(*columns.cell_names, "z"))  # compacted
    assert _fields(take_pairs(unused, every)) == _fields(_taken(unused, every))
    assert take_pairs(unused, every).cell_names == columns.cell_names


def _loss_fields(loss: WindowLoss) -> list[object]:
    arrays = [(a.dtype.str, a.tobytes(), a.flags.writeable) for a in (loss.cells, loss.losses)]
    return [type(loss.window_start), loss.window_start, type(loss.epsilon), loss.epsilon,
            loss.vehicles, *arrays]  # fmt: skip


@pytest.mark.parametrize("idle", [0, 3])  # every vehicle charged; some charged nothing
def test_an_occupancys_loss_without_the_name_checks_is_the_checked_one(idle: int) -> None:
    occupancy = _roaming_occupancy(np.random.default_rng(5), 30, 200)
    n = len(occupancy.vehicles)
    cells = np.bincount(occupancy.vehicle_index, minlength=n)
    cells[:idle] = 0
    losses = np.where(cells > 0, 0.37 * cells + 0.01, 0.0)
    fast = WindowLoss.of_occupancy_losses(7200, occupancy, cells, losses)
    checked = WindowLoss.of_losses(7200, occupancy.vehicles, cells, losses)
    assert _loss_fields(fast) == _loss_fields(checked) and fast == checked
    assert len(fast) == n - idle
    with pytest.raises(ValueError, match="losses must be finite"):
        WindowLoss.of_occupancy_losses(7200, occupancy, cells, np.where(cells > 0, np.nan, 0.0))


def _three_hours(rng: np.random.Generator, n: int = 500) -> WindowColumns:
    """Readings over three hours (spans; cell ``g`` mostly in hour ``g % 3``), some pairs
    with no reading logged."""
    cells = rng.integers(0, 12, n)
    hour = np.where(rng.random(n) < 0.9, cells % 3, rng.integers(0, 3, n))
    columns = WindowColumns.from_readings(
        [f"c{g:02d}" for g in cells], [f"v{v}" for v in rng.integers(0, 60, n)],
        (hour * 3600 + rng.uniform(0, 3600, n)).tolist(), rng.uniform(0, 65, n).tolist(), 8,
    )  # fmt: skip
    unlogged = rng.random(len(columns)) < 0.1
    live = ~unlogged[columns.reading_pair]
    return dataclasses.replace(
        columns, reading_pair=columns.reading_pair[live], reading_ts=columns.reading_ts[live],
        reading_value=columns.reading_value[live],
    )  # fmt: skip


@pytest.mark.parametrize("seed", range(5))
def test_span_starts_per_cell_in_one_pass_are_the_per_pair_minima(seed: int) -> None:
    """A cell's span start: the earlier of the window and its pairs' first windows, computed
    per cell in one pass over the log, equals the per pair way; a time that is not finite
    sends the caller back to it."""
    rng = np.random.default_rng(seed)
    columns = _three_hours(rng)
    entry_of = np.sort(rng.choice(len(columns), len(columns) * 2 // 3, replace=False))
    cell_index = columns.cell_code[entry_of].astype(np.int64)  # the chosen pairs of 12 cells
    first = first_window(columns, 3600)[entry_of]
    per_pair = np.full(12, 7200, dtype=np.int64)
    np.minimum.at(per_pair, cell_index, first)
    fast = _cell_span_starts(columns, entry_of, cell_index, 12, 7200, 3600)
    assert fast is not None and fast.dtype == np.int64
    assert fast.tolist() == per_pair.tolist()
    assert len(set(per_pair.tolist())) > 1  # cells of different span starts
    ts = columns.reading_ts.copy()
    ts[np.flatnonzero(np.isin(columns.reading_pair, entry_of))[0]] = np.nan  # a chosen pair's
    nan_log = dataclasses.replace(columns, reading_ts=ts)
    assert _cell_span_starts(nan_log, entry_of, cell_index, 12, 7200, 3600) is None


@pytest.mark.parametrize("bad", [None, np.nan, -np.inf, np.inf])
def test_the_wanted_pairs_first_windows_are_the_whole_logs(bad: float | None) -> None:
    """Also when a wanted pair holds a time that is not finite beside finite ones (the whole
    log's way then leaves a NaN or -inf pair out)."""
    rng = np.random.default_rng(11)
    columns = _three_hours(rng)
    wanted = rng.random(len(columns)) < 0.5
    if bad is not None:
        logged = np.bincount(columns.reading_pair, minlength=len(columns))
        pair = np.flatnonzero(wanted & (logged >= 2))[0]
        ts = columns.reading_ts.copy()
        ts[np.flatnonzero(columns.reading_pair == pair)[-1]] = bad
        columns = dataclasses.replace(columns, reading_ts=ts)
    whole = first_window(columns, 3600)
    assert first_window(columns, 3600, wanted)[wanted].tolist() == whole[wanted].tolist()
    assert len(set(whole[wanted].tolist())) >= 3  # three windows and unlogged pairs


def test_cells_per_vehicle_counted_as_integers_are_the_weighted_count() -> None:
    occupancy = _roaming_occupancy(np.random.default_rng(9), 40, 300)
    mask = np.random.default_rng(10).random(occupancy.n_entries) < 0.6
    for kept in (None, mask, np.zeros(occupancy.n_entries, dtype=bool)):
        weights = None if kept is None else kept.astype(np.int64)
        expected = np.bincount(occupancy.vehicle_index, weights=weights,
                               minlength=len(occupancy.vehicles)).astype(np.int64)  # fmt: skip
        grids = occupancy.grids_per_vehicle(kept)
        assert grids.dtype == np.int64 and grids.tolist() == expected.tolist()
    assert occupancy.grids_per_vehicle(mask).sum() == mask.sum() < occupancy.n_entries


def test_each_record_carries_its_own_cells_span_start() -> None:
    """A release with records of different span starts (at the input's end, a sparse cell
    pooled over four hours beside a dense one seen for two): each record's ``window_start``
    is its own span's."""
    from tests.unit.release.test_vehicle_budget import _params, _run

    windows = [
        [(0, 6 * h + v, 30.0 + v) for v in range(6) for _ in range(2)]  # sparse: pools
        + [(3, 1000 + 40 * h + v, 20.0 + v % 7) for v in range(40) for _ in range(5) if h >= 2]
        for h in range(4)
    ]
    params = _params(
        vehicle_budget=6.0, max_span_hours=4, coarsest_resolution=8, budget_period_seconds=96 * 3600
    )  # slow pacing: the dense cell waits too
    releases, _ = _run(params, windows, ends=True)
    spans = sorted((r["window_start"], r["window_end"]) for r in releases[3].cells)
    assert spans == [("1970-01-01T00:00:00Z", "1970-01-01T04:00:00Z"),
                     ("1970-01-01T02:00:00Z", "1970-01-01T04:00:00Z")]  # fmt: skip


def _priced_plan(
    occ: Occupancy,
    room: np.ndarray,
    ceiling: np.ndarray,
    one_call: bool,
    mp: pytest.MonkeyPatch,
    refusable: np.ndarray | None = None,
    refuse_at: float = 0.0,
) -> tuple[BudgetPlan, int]:
    """:func:`~stream_dp.release.vehicle_budget.plan.budget_plan` under the release price
    ``ceiling``, in
    one call or one plan per round (``PLAN_IN_ONE_CALL``), and how many plans it asked for."""
    params = ReleaseParams(
        upper=U, target_mean_error=T, variance_share=0.0, vehicle_budget=6.0,
        vehicle_budget_burst=2.0, min_vehicles=2, prefix_limit=16,
    )  # fmt: skip
    asked: list[int] = []

    def plan_counted(*args: Any, **kwargs: Any) -> BudgetPlan:
        asked.append(1)
        return vehicle_budget.plan_budget(*args, **kwargs)

    mp.setattr(budget, "PLAN_IN_ONE_CALL", one_call)
    mp.setattr(budget, "plan_budget", plan_counted)
    mp.setattr(budget, "vehicle_room", lambda rooms, occupancy: room)
    mp.setattr(budget, "epsilon_ceiling", lambda params, rooms, occupancy, start, due: ceiling)
    plan = budget.budget_plan(params, None, occ, None, (), refusable, refuse_at)  # type: ignore[arg-type]
    return plan, len(asked)


def _roaming_prices(seed: int, short: float) -> tuple[Occupancy, np.ndarray, np.ndarray]:
    """A roaming window (``short``: the share of vehicles short of room), the rooms and a
    release price per cell around each cell's ε in an unpriced plan, so that the price's loop
    takes several plans (cells pass their price only once others are held)."""
    rng = np.random.default_rng(seed)
    occ = _roaming_occupancy(rng, 60, 1500)
    room = np.where(rng.random(len(occ.vehicles)) < short,
                    rng.uniform(0.0, 3.0, len(occ.vehicles)), 1000.0)  # fmt: skip
    first = vehicle_budget.plan_budget(
        occ, room, target=T, upper=U, variance_share=0.0, max_cell_epsilon=2.0, min_vehicles=2,
        prefix_limit=16,
    )  # fmt: skip
    finite = np.where(first.dropped, 1.0, first.epsilon)
    return occ, room, finite * rng.choice([0.9, 1.0, 1.0, 1.05, 1.3], len(finite))


@pytest.mark.parametrize("short", [0.3, 0.0])  # vehicles short of room, or none (no sit-out)
@pytest.mark.parametrize("seed", [0, 1, 5, 6, 7, 12])  # 3 to 5 plans each
def test_the_priced_plans_in_one_call_are_the_plans_one_round_at_a_time(
    seed: int, short: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The release price's loop (docs/math.md §13.3: a cell past its price is held and the
    plan computed again) run in one compiled call gives, bit for bit, the plan of one fresh
    plan per round, on roaming windows where it takes several rounds (cells pass their price
    only once others are held); with every vehicle within its room, no plan lays out the
    slots by vehicle."""
    occ, room, ceiling = _roaming_prices(seed, short)
    oracle, rounds = _priced_plan(occ, room, ceiling, False, monkeypatch)
    fast, calls = _priced_plan(occ, room, ceiling, True, monkeypatch)
    assert rounds >= (3 if short else 2) and calls == 1
    assert_same(fast, oracle)


def _by_hand(
    occ: Occupancy, room: np.ndarray, ceiling: np.ndarray, plans: int = 10**6
) -> tuple[list[float], list[np.ndarray], BudgetPlan]:
    """The release price's loop by hand (fresh plans, each holding the cells past their price
    in the ones before), at most ``plans`` plans: per plan, the readings of its cells past
    their price over those of the cells it releases, and those cells; and the last plan."""
    total = occ.total_per_cell().astype(np.float64)
    held, shares, overs = np.zeros(len(occ.cells), dtype=bool), [], []
    for _ in range(plans):
        plan = vehicle_budget.plan_budget(
            occ, room, target=T, upper=U, variance_share=0.0, max_cell_epsilon=2.0,
            min_vehicles=2, prefix_limit=16, held=held,
        )  # fmt: skip
        over = np.isfinite(plan.epsilon) & (plan.epsilon > ceiling + 1e-12)
        if not over.any():
            break
        shares.append(float(total[over].sum() / total[np.isfinite(plan.epsilon)].sum()))
        overs.append(over)
        held = held | over
    return shares, overs, plan


def _assert_held_in(
    fast: BudgetPlan, last: BudgetPlan, over: np.ndarray, occ: Occupancy, room: np.ndarray,
    ceiling: np.ndarray,
) -> None:  # fmt: skip
    """``fast`` is the plan ``last`` with its ``over`` cells (past their price) dropped:
    their ε +inf and entries unkept, every other cell's ε, cap and entries as ``last`` left
    them, every payment the sum of its kept entries' ε in entry order and within the
    vehicle's room, and no cell left past its price."""
    assert over.any()
    assert np.array_equal(np.isinf(fast.epsilon), np.isinf(last.epsilon) | over)
    assert np.array_equal(fast.epsilon[~over], last.epsilon[~over])
    assert np.array_equal(fast.cap, last.cap)
    assert np.array_equal(fast.kept, last.kept & ~over[occ.cell_index])
    weights = np.where(fast.kept, fast.epsilon[occ.cell_index], 0.0)
    summed = np.bincount(occ.vehicle_index, weights=weights, minlength=len(occ.vehicles))
    assert fast.paid.tobytes() == summed.tobytes()
    assert np.all(fast.paid <= room + 1e-9)
    assert not np.any(np.isfinite(fast.epsilon) & (fast.epsilon > ceiling + 1e-12))


@pytest.mark.parametrize("seed", [0, 1, 5, 6, 7, 12])
def test_the_price_loop_settles_in_the_plan_whose_cells_past_their_price_are_few(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``SETTLE_SHARE`` (docs/math.md §13.3): once the cells a plan puts past their price hold
    under that share of the readings it releases, they are held in that plan instead of a
    fresh one. In one compiled call and one plan at a time alike, bit for bit: the plan the
    loop stops at, with exactly its cells past their price dropped (ε +inf, entries unkept),
    every other cell's ε, cap and entries as that plan left them, every payment the sum of
    its kept entries' ε in entry order and within the vehicle's room, and no cell left past
    its price."""
    occ, room, ceiling = _roaming_prices(seed, 0.3)
    monkeypatch.setattr(vehicle_budget, "SETTLE_SHARE", 0.0)
    shares, _, _ = _by_hand(occ, room, ceiling)
    assert len(shares) >= 2
    # Settle in the plan before the last: its share passes the cut, every earlier one does not.
    stop = len(shares) - 2
    monkeypatch.setattr(vehicle_budget, "SETTLE_SHARE",
                        (shares[stop] + min(shares[:stop], default=1.0)) / 2)  # fmt: skip
    if any(share < vehicle_budget.SETTLE_SHARE for share in shares[:stop]):
        stop = next(i for i, x in enumerate(shares) if x < vehicle_budget.SETTLE_SHARE)
    oracle, plans = _priced_plan(occ, room, ceiling, False, monkeypatch)
    fast, calls = _priced_plan(occ, room, ceiling, True, monkeypatch)
    assert plans == stop + 1 and calls == 1
    assert_same(fast, oracle)
    # The plan the loop stopped at, computed afresh with what the earlier plans held.
    monkeypatch.setattr(vehicle_budget, "SETTLE_SHARE", 0.0)
    _, overs, last = _by_hand(occ, room, ceiling, stop + 1)
    _assert_held_in(fast, last, overs[stop], occ, room, ceiling)


def test_refusable_cells_of_another_length_are_refused_in_one_line() -> None:
    """The compiled loop reads ``refusable`` per cell, unchecked: a mask of another length
    than the cells (and not empty) is a ValueError naming it."""
    occ, room, ceiling = _roaming_prices(0, 0.3)
    with pytest.raises(ValueError, match="refusable has 3 values for 60 cells"):
        vehicle_budget.plan_budget(
            occ, room, target=T, upper=U, variance_share=0.0, max_cell_epsilon=2.0,
            min_vehicles=2, prefix_limit=16, ceiling=ceiling, refusable=np.ones(3, dtype=bool),
        )  # fmt: skip


@pytest.mark.parametrize("seed", [0, 1, 5, 6, 7, 12])
def test_the_price_loop_stops_at_the_first_plan_that_puts_a_refusable_cell_past_its_price(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``refusable`` (docs/math.md §13.3, "When the re-plans stop": the finer cells the
    regrouping refuses): the loop stops at the first plan that puts one of them past its price,
    and that plan's cells past their price are dropped from it, in one compiled call and one
    plan at a time alike, bit for bit; a refusable cell no plan puts past its price stops
    nothing."""
    occ, room, ceiling = _roaming_prices(seed, 0.3)
    monkeypatch.setattr(vehicle_budget, "SETTLE_SHARE", 0.0)
    _, overs, _ = _by_hand(occ, room, ceiling)
    assert len(overs) >= 2
    ever = np.logical_or.reduce(overs)
    # Refusable: one cell first past its price in the second plan, and cells never past it.
    newly = np.flatnonzero(overs[1] & ~overs[0])
    refusable = ~ever
    refusable[newly[0]] = True
    oracle, plans = _priced_plan(occ, room, ceiling, False, monkeypatch, refusable)
    fast, calls = _priced_plan(occ, room, ceiling, True, monkeypatch, refusable)
    assert plans == 2 and calls == 1
    assert_same(fast, oracle)
    _, _, last = _by_hand(occ, room, ceiling, 2)
    _assert_held_in(fast, last, overs[1], occ, room, ceiling)
    # Only the cells never past their price refusable: the whole loop, as without any.
    whole, plans = _priced_plan(occ, room, ceiling, False, monkeypatch, ~ever)
    unstopped, _ = _priced_plan(occ, room, ceiling, True, monkeypatch)
    assert plans == len(overs) + 1
    assert_same(whole, unstopped)
    # ``refuse_at``: the refused cell's readings are enough to stop (at least), one more is not.
    readings = float(occ.total_per_cell()[newly[0]])
    for one_call in (False, True):
        at, _ = _priced_plan(occ, room, ceiling, one_call, monkeypatch, refusable, readings)
        assert_same(at, fast)
        above, _ = _priced_plan(occ, room, ceiling, one_call, monkeypatch, refusable, readings + 1)
        assert_same(above, unstopped)


def _first_rounds(occ: Occupancy, held: np.ndarray, more: np.ndarray) -> tuple[Any, Any, Any]:
    """The first round of a plan holding ``held | more`` computed afresh, and derived from
    the one holding ``held`` alone (``hold_more``), with the first round's payments."""
    from stream_dp.release.vehicle_budget import planner_kernel as kernel

    count, vehicle, start = occ.count, occ.vehicle_index, occ.cell_start
    laid = kernel.layout(start, vehicle, count, len(occ.vehicles), int(count.max()), True)
    costing = (vehicle_budget._FACTOR * U, T, U, 16, True)
    rounding = (1.0, 1.0 + epsilon_grid.ROUNDING_MARGIN, epsilon_grid.EPSILON_STEP)
    total = occ.total_per_cell().astype(np.float64)

    def first(hold: np.ndarray) -> tuple[np.ndarray, ...]:
        out = kernel.first_round(start, total, hold.copy(), laid, costing, rounding, 2.0, 2)
        paid = np.zeros(len(occ.vehicles))
        kernel.pay_everyone(start, vehicle, out[3], out[0], paid)
        return (*out, paid)

    base = first(held)
    derived = kernel.hold_more(base[:5], held | more, start, vehicle, laid[0], laid[1], total,
                               base[5], True)  # fmt: skip
    return first(held | more), derived, base


def test_a_plan_holding_more_cells_starts_from_the_first_round_with_them_dropped() -> None:
    """The release price's plans (§13.3) share one first round: holding more cells drops
    them from it (ε +inf, entries unkept, their ε off their vehicles' payments) and gives,
    array for array and bit for bit, the first round computed afresh with them held."""
    rng = np.random.default_rng(3)
    occ = _roaming_occupancy(rng, 60, 1500)
    held = rng.random(len(occ.cells)) < 0.1
    more = rng.random(len(occ.cells)) < 0.3
    fresh, derived, base = _first_rounds(occ, held, more)
    assert np.isfinite(base[0][more & ~held]).sum() > 5  # cells the derivation drops
    for one, other in zip(fresh, derived, strict=True):
        assert one.dtype == other.dtype and one.tobytes() == other.tobytes()


def test_each_plans_start_is_the_last_ones_with_the_newly_held_cells_dropped() -> None:
    """The release price's next plan starts from the last plan's start with only the cells
    newly held dropped (``drop_held``), not from the first round with all of them: array for
    array and bit for bit the first round computed afresh holding them all. The vehicles
    past their room as it starts are found among the last start's (``past_room``): the same,
    ascending, as checking every vehicle."""
    from stream_dp.release.vehicle_budget import planner_kernel as kernel

    rng = np.random.default_rng(4)
    occ = _roaming_occupancy(rng, 60, 1500)
    held = rng.random(len(occ.cells)) < 0.1
    more = held | (rng.random(len(occ.cells)) < 0.2)
    most = more | (rng.random(len(occ.cells)) < 0.2)
    fresh, start, base = _first_rounds(occ, held, np.zeros_like(held))
    room = np.sort(start[5])[len(start[5]) * 3 // 4] * rng.uniform(0.8, 1.2, len(start[5]))
    laid_out = kernel.layout(occ.cell_start, occ.vehicle_index, occ.count, len(occ.vehicles),
                             int(occ.count.max()), True)  # fmt: skip
    total = occ.total_per_cell().astype(np.float64)
    every = kernel.first_payers(occ.cell_start, occ.vehicle_index, len(occ.vehicles), 16)
    assert every.tolist() == list(range(len(occ.vehicles)))  # entries outnumber the vehicles
    checked = kernel.past_room(every, start[5], room)
    for hold in (more, most):  # each plan holds more
        cells = (occ.cell_start, occ.vehicle_index, laid_out[0], laid_out[1], total)
        kernel.drop_held(start, hold, cells, True)
        want, _, _ = _first_rounds(occ, hold, np.zeros_like(hold))
        for one, other in zip(want, start, strict=True):
            assert one.dtype == other.dtype and one.tobytes() == other.tobytes()
        over, excess = np.empty(len(room), dtype=np.int64), np.empty(len(room))
        n_over = kernel.over_room(every, want[5], room, over, excess)
        checked = kernel.past_room(checked, start[5], room)
        assert 5 < n_over < len(room) // 2 and checked.tolist() == over[:n_over].tolist()


def test_sit_outs_read_by_slot_are_the_reference_ones_after_earlier_sit_outs_and_drops() -> None:
    """A round's sit-outs read whether a vehicle's entry already sat out off its slot
    (``sat``, in slot order) instead of the entry's ``kept``: after earlier sit-outs and
    dropped cells (ε +inf, entries unkept), the entries left are the reference's, and only
    the newly left slots are marked."""
    from stream_dp.release.vehicle_budget import planner_kernel as kernel
    from tests.support.vehicle_budget_reference import _reference_sit_outs

    rng = np.random.default_rng(11)
    occ = _roaming_occupancy(rng, 50, 800)
    laid = kernel.layout(occ.cell_start, occ.vehicle_index, occ.count, len(occ.vehicles),
                         int(occ.count.max()), True)  # fmt: skip
    run_start, run_count, run_kept, run_cell, vehicle_start, slot = laid
    total = occ.total_per_cell().astype(np.float64)
    epsilon = rng.choice([0.25, 0.5, 1.0, 1.5], len(occ.cells))
    epsilon[rng.random(len(occ.cells)) < 0.15] = np.inf  # dropped
    kept = np.isfinite(epsilon)[occ.cell_index]
    sat = np.zeros(len(slot), dtype=bool)
    entry_of_slot = slot >> 32
    earlier = (rng.random(len(slot)) < 0.1) & kept[entry_of_slot]  # sat out before
    sat[earlier] = True
    kept[entry_of_slot[earlier]] = False
    np.subtract.at(run_kept, slot[earlier] & 0xFFFFFFFF, 1)
    run_key = run_count / (total[run_cell] * epsilon[run_cell])
    paid = np.bincount(occ.vehicle_index, weights=np.where(kept, epsilon[occ.cell_index], 0.0),
                       minlength=len(occ.vehicles))  # fmt: skip
    room = paid * rng.uniform(0.3, 1.1, len(paid))
    over_mask = paid - room > 1e-12
    over = np.flatnonzero(over_mask)
    excess = (paid - room)[over]
    leave = _reference_sit_outs(occ, kept, epsilon, total, paid - room, over_mask)
    assert leave.sum() > 50 and earlier.sum() > 50
    was_kept, was_sat = kept.copy(), sat.copy()
    changed = np.empty(len(occ.cells), dtype=np.int64)
    n_changed = kernel.sit_outs(over, excess, vehicle_start, slot, kept, sat, run_cell, run_key,
                                run_kept, epsilon, changed, paid.copy(), True)  # fmt: skip
    assert kept.tolist() == (was_kept & ~leave).tolist()
    assert (sat & ~was_sat).tolist() == leave[entry_of_slot].tolist()
    assert changed[:n_changed].tolist() == np.unique(occ.cell_index[leave]).tolist()


@pytest.mark.parametrize("by_histogram", [True, False])
def test_the_cells_runs_and_the_vehicles_slots_laid_out_apart_are_the_layouts(
    by_histogram: bool,
) -> None:
    """The release price's plans lay out the runs by cell at once and the slots by vehicle
    only once a plan has a vehicle past its room (``cell_runs``, ``vehicle_slots``): per
    cell its distinct counts ascending with how many entries have each, per entry its run,
    and per vehicle its entries in entry order, as numpy's unique counts and stable sort
    give them."""
    from stream_dp.release.vehicle_budget import planner_kernel as kernel

    occ = _roaming_occupancy(np.random.default_rng(2), 40, 600)
    start, count, vehicle = occ.cell_start, occ.count.astype(np.int64), occ.vehicle_index
    run_start, run_count, run_kept, run_cell, entry_run = kernel.cell_runs(
        start, count, int(count.max()), by_histogram
    )
    for g in range(len(occ.cells)):
        values, kept = np.unique(count[start[g] : start[g + 1]], return_counts=True)
        runs = slice(run_start[g], run_start[g + 1])
        assert run_count[runs].tolist() == values.tolist()
        assert run_kept[runs].tolist() == kept.tolist() and set(run_cell[runs]) == {g}
    assert run_count[entry_run].tolist() == count.tolist()
    assert run_cell[entry_run].tolist() == occ.cell_index.tolist()
    vehicle_start, slot = kernel.vehicle_slots(vehicle, entry_run, len(occ.vehicles))
    assert vehicle_start.tolist() == [0, *np.cumsum(np.bincount(vehicle)).tolist()]
    assert (slot >> 32).tolist() == np.argsort(vehicle, kind="stable").tolist()
    assert (slot & 0xFFFFFFFF).tolist() == entry_run[slot >> 32].tolist()
    laid = kernel.layout(start, vehicle, count, len(occ.vehicles), int(count.max()), True)
    assert laid[4].tolist() == vehicle_start.tolist() and laid[5].tolist() == slot.tolist()


def test_the_vehicles_noted_past_their_room_are_those_the_whole_check_finds() -> None:
    """A later round checks only the vehicles a change left past their room
    (``note_over``, ``over_watched``): the same vehicles, ascending, with the same excess,
    as checking every vehicle (``over_room``)."""
    from stream_dp.release.vehicle_budget import planner_kernel as kernel

    rng = np.random.default_rng(5)
    n = 500
    room = rng.uniform(0.0, 4.0, n)
    paid = room - 0.5  # every vehicle within its room
    watch = (room, np.zeros(n, dtype=bool), np.zeros(n, dtype=np.int64), np.zeros(1, np.int64))
    for v in rng.integers(0, n, 400).tolist():  # changes, some past the room, some back
        paid[v] += float(rng.choice([-1.0, 0.25, 1.0]))
        kernel.note_over(v, paid, watch)
    over, excess = np.empty(n, dtype=np.int64), np.empty(n)
    n_over = kernel.over_watched(watch, paid, over, excess)
    every, every_excess = np.empty(n, dtype=np.int64), np.empty(n)
    n_every = kernel.over_room(np.arange(n), paid, room, every, every_excess)
    assert n_every > 20
    assert over[:n_over].tolist() == every[:n_every].tolist()
    assert excess[:n_over].tolist() == every_excess[:n_every].tolist()
    assert not watch[1].any() and watch[3][0] == 0  # the notes cleared


@pytest.mark.parametrize("exact", [True, False])
def test_a_plan_in_working_arrays_left_by_another_plan_is_a_fresh_plan(exact: bool) -> None:
    """The release price's plans share one set of working arrays (``plan_scratch``, cleared
    by ``plan_in`` as it starts): a plan run in arrays another plan left dirty (every slot
    marked sat out, every vehicle marked) gives, array for array and bit for bit, the plan
    in fresh arrays (``plan_laid_out``), with its payments summed in the first round or
    moved by each change."""
    from stream_dp.release.vehicle_budget import planner_kernel as kernel

    rng = np.random.default_rng(6)
    occ = _roaming_occupancy(rng, 60, 1500)
    held = rng.random(len(occ.cells)) < 0.1
    _, start, _ = _first_rounds(occ, held, np.zeros_like(held))
    room = np.sort(start[5])[len(start[5]) * 3 // 4] * rng.uniform(0.8, 1.2, len(start[5]))
    count = occ.count.astype(np.int64)
    laid = kernel.layout(occ.cell_start, occ.vehicle_index, count, len(occ.vehicles),
                         int(count.max()), True)  # fmt: skip
    costing = (vehicle_budget._FACTOR * U, T, U, 16, True)
    rounding = (1.0, 1.0 + epsilon_grid.ROUNDING_MARGIN, epsilon_grid.EPSILON_STEP)
    total = occ.total_per_cell().astype(np.float64)
    settings = (costing, rounding, 2.0, 2, 16, exact)
    fresh_laid = (*laid[:2], laid[2].copy(), *laid[3:])
    want = kernel.plan_laid_out(occ.cell_start, occ.vehicle_index, total, room, held.copy(),
                                fresh_laid, *settings)  # fmt: skip
    scratch = kernel.plan_scratch(len(room), len(laid[5]))
    for dirty in scratch:
        dirty[:] = 1  # what a plan before may leave: marks, sat-outs, lists
    first = kernel.first_round(occ.cell_start, total, held.copy(), (*laid[:2], laid[2].copy(),
                               *laid[3:]), costing, rounding, 2.0, 2)  # fmt: skip
    fresh_laid = (*laid[:2], laid[2].copy(), *laid[3:])
    paid = np.zeros(len(room))
    got = kernel.plan_in(occ.cell_start, occ.vehicle_index, total, room, fresh_laid,
                         (*first, paid), False, np.zeros(0, dtype=np.int64), *settings,
                         scratch)  # fmt: skip
    assert want[4] > 2  # several rounds of sit-outs
    for one, other in zip(want, got, strict=True):
        assert np.asarray(one).tobytes() == np.asarray(other).tobytes()

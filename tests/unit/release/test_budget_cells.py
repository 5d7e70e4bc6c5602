"""Adaptive cells under a vehicle budget (docs/math.md §13.1, §13.3): the budget-aware pass
test, finer cells that cannot be released now pooled into their parent, cells held until
their span is full, and the offline engine's last window holding nothing back."""

from __future__ import annotations

from typing import Any

import h3
import numpy as np
import pytest

from stream_dp.dp.adaptive_cells import BudgetChoice, UnitPrice, choose_cells
from stream_dp.dp.budget_ledger import BudgetLedger
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.release.accounting import PrivacyAccountant
from stream_dp.release.params import ReleaseParams
from stream_dp.release.records import WindowRelease
from stream_dp.release.vehicle_budget import cells as budget_cells
from stream_dp.release.window import release_window
from stream_dp.windows.columns import WindowColumns

U, T, HOUR = 65.0, 10.0, 3600
CENTRE = h3.latlng_to_cell(40.70, -74.02, 8)
PARENT = h3.cell_to_parent(CENTRE, 7)
A, B, C = sorted(h3.cell_to_children(PARENT, 8))[:3]


def _choose(room: float | None) -> list[tuple[str, int]]:
    """Two sibling res-8 cells of 10 vehicles × 4 readings (each needs ε 1.95 for T; their
    parent of 20 vehicles 0.98), chosen at the fixed ε 1 or, with ``room``, by price."""
    names = [A, B]
    cell = np.repeat([0, 1], 10)
    vehicle = np.arange(20)
    count = np.full(20, 4)
    budget = None if room is None else BudgetChoice(UnitPrice(np.full(20, room), 1.0, 14.0 / 6))
    chosen = choose_cells(
        names, cell, vehicle, count, upper=U, mean_epsilon=1.0, target=T, finest=8,
        coarsest=7, prefix_limit=64, budget=budget,
    )  # fmt: skip
    return list(zip(chosen.names, chosen.resolution.tolist(), strict=True))


def test_a_finer_cell_is_chosen_where_its_vehicles_can_pay_the_epsilon_it_needs() -> None:
    # At the fixed ε 1 each sibling misses T and they pool into the parent; vehicles whose
    # room is 2 can pay the 1.95 each sibling needs, so both are released at resolution 8.
    assert _choose(None) == [(PARENT, 7)]
    assert sorted(_choose(2.0)) == sorted([(A, 8), (B, 8)])
    # Vehicles with room 1 cannot: the siblings pool into the parent, which they can pay.
    assert _choose(1.0) == [(PARENT, 7)]


def test_the_price_is_the_reading_weighted_median_room_of_a_units_vehicles() -> None:
    price = UnitPrice(np.array([0.5, 1.0, 3.0, 2.0]), 1.0, 10.0)
    group, vehicle = np.array([0, 0, 0, 1]), np.array([0, 1, 2, 3])
    # Unit 0: rooms 0.5, 1.0, 3.0 with 1, 1 and 5 readings: half its readings pay 3.0.
    pay = price.pay(group, vehicle, np.array([1, 1, 5, 2]), 2)
    assert pay.tolist() == [3.0, 2.0]
    assert price.pay(group, vehicle, np.array([5, 1, 1, 2]), 2).tolist() == [0.5, 2.0]


def test_one_room_for_every_vehicle_prices_the_groups_with_entries_from_their_presence() -> None:
    """With one room for every vehicle a group's price is that room (0 without entries):
    given which groups have entries (``present``) the price needs no pass over them, and
    equals, bit for bit, the price read off the entries, each group's weighted median."""
    rng = np.random.default_rng(8)
    price = UnitPrice(np.full(30, 1.0 / 3.0), 1.0, 10.0)
    group = np.sort(rng.integers(0, 12, 200))
    vehicle, count = rng.integers(0, 30, 200), rng.integers(1, 9, 200)
    present = np.bincount(group, minlength=14) > 0
    assert not present.all()  # groups without entries price 0
    want = [1.0 / 3.0 if p else 0.0 for p in present.tolist()]
    assert price.pay(group, vehicle, count, 14).tolist() == want
    assert price.pay(group, vehicle, count, 14, present=present).tolist() == want


#: B 14 per day (burst 2.33), T 10, resolution 8 merged up to 7, spans of up to 2 hours.
BUDGET: dict[str, Any] = dict(
    epsilon=1.0, upper=U, resolution=8, coarsest_resolution=7, target_mean_error=T,
    variance_share=0.0, vehicle_budget=14.0, vehicle_budget_burst=14.0 / 6,
    budget_period_seconds=24 * HOUR, max_span_hours=2, app_id="test", budget_planner="rules",
)  # fmt: skip


def _params(**changes: Any) -> ReleaseParams:
    return ReleaseParams(**{**BUDGET, **changes})


def _twice(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [pair for pair in pairs for _ in range(2)]


def _run(
    params: ReleaseParams, hours: list[list[tuple[str, str]]], ledger: BudgetLedger | None = None
) -> list[WindowRelease]:
    """Release each hour's readings ((cell, vehicle), one reading each) with ledger (``ledger``:
    one with a history) and carry."""
    ledger = PrivacyAccountant(params).new_ledger() if ledger is None else ledger
    carry, releases = None, []
    for hour, pairs in enumerate(hours):
        start = hour * HOUR
        cells = [c for c, _ in pairs]
        vehicles = [v for _, v in pairs]
        ts = [float(start + i) for i in range(len(cells))]
        columns = WindowColumns.from_readings(cells, vehicles, ts, [30.0] * len(cells), 64)
        release = release_window(start, columns, params, LaplaceNoise(), 0, ledger, carry)
        assert release.loss is not None
        ledger.record_released(release.loss)
        carry = release.carry
        releases.append(release)
    return releases


def _shapes(release: WindowRelease) -> list[tuple[str, int, str, int]]:
    return sorted(
        (r["cell"], r["resolution"], r["window_start"], r["n_readings"]) for r in release.cells
    )


def test_a_finer_cell_that_must_wait_pools_into_its_parent_with_older_readings() -> None:
    # Hour 0: B (20 vessels) and C (3 vessels, too few for T on its own). Hour 1: A, 20 new
    # vessels. At hour 1, B's span is full and it is released on its own; A's must wait, so
    # A pools into the parent with C's hour-0 readings, whose span is full: released with
    # them (without pooling, A would be held and C's readings, two hours old, withheld).
    hour0 = _twice([(B, f"b{v}") for v in range(20)] + [(C, f"c{v}") for v in range(3)])
    hour1 = _twice([(A, f"a{v}") for v in range(20)])
    releases = _run(_params(), [hour0, hour1])
    assert releases[0].cells == []
    assert _shapes(releases[1]) == sorted(
        [(B, 8, "1970-01-01T00:00:00Z", 40), (PARENT, 7, "1970-01-01T00:00:00Z", 46)]
    )
    assert releases[1].carry is None  # every reading released once


def test_a_finer_cell_the_plan_drops_pools_into_its_parent() -> None:
    # A (10 vessels × 2 readings, and s0-s4 with one each) passes the price alone (ε 1.56),
    # but s0-s4 are also in D (elsewhere, ε 0.78) and cannot pay both from the burst 2.33:
    # they sit out A, which then misses T and is dropped. Refused, A pools into its parent
    # with C (3 vessels, too few alone): the parent (ε 1.26) is released, s0-s4 pay 2.04.
    far = h3.latlng_to_cell(40.85, -73.80, 8)
    assert h3.cell_to_parent(far, 7) != PARENT
    hour = _twice([(A, f"a{v}") for v in range(10)] + [(C, f"c{v}") for v in range(3)])
    hour += _twice([(far, f"s{v}") for v in range(5)] + [(far, f"d{v}") for v in range(20)])
    hour += [(A, f"s{v}") for v in range(5)]  # s0-s4: one reading in A
    releases = _run(_params(max_span_hours=1), [hour])
    shapes = [(r["cell"], r["resolution"], r["n_readings"]) for r in releases[0].cells]
    assert sorted(shapes) == sorted([(far, 8, 50), (PARENT, 7, 31)])


def test_no_second_choice_for_a_dropped_cell_of_too_few_readings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The refusals stop when the dropped cells hold under ``MIN_REFUSED_SHARE`` of the
    window's chosen readings: the window of the test above, where A holds 25 of 81."""
    far = h3.latlng_to_cell(40.85, -73.80, 8)
    hour = _twice([(A, f"a{v}") for v in range(10)] + [(C, f"c{v}") for v in range(3)])
    hour += _twice([(far, f"s{v}") for v in range(5)] + [(far, f"d{v}") for v in range(20)])
    hour += [(A, f"s{v}") for v in range(5)]
    monkeypatch.setattr(budget_cells, "MIN_REFUSED_SHARE", 0.3)  # A: 31 %, refused
    (release,) = _run(_params(max_span_hours=1), [hour])
    assert {r["cell"] for r in release.cells} == {far, PARENT}
    monkeypatch.setattr(budget_cells, "MIN_REFUSED_SHARE", 0.4)  # A: too few to choose again
    (release,) = _run(_params(max_span_hours=1), [hour])
    assert [r["cell"] for r in release.cells] == [far]  # A dropped (spans of 1 h: withheld)


def test_a_finer_cell_above_its_release_price_waits_for_a_longer_span() -> None:
    # B's 20 vessels could pay for B in hour 0 alone, but its ε (0.97) is above a one-hour
    # record's price (§13.3: the paced share 0.29, or the 0.56 their buckets would overflow
    # by waiting); it waits for hour 1 (a two-hour span costs each of them less per reading)
    # and is released once, with both hours.
    hour0 = _twice([(B, f"b{v}") for v in range(20)])
    hour1 = _twice([(B, f"b{v}") for v in range(20, 40)])
    releases = _run(_params(), [hour0, hour1])
    assert releases[0].cells == []
    assert _shapes(releases[1]) == [(B, 8, "1970-01-01T00:00:00Z", 80)]
    assert releases[1].cells[0]["window_end"] == "1970-01-01T02:00:00Z"


def test_the_offline_engine_releases_held_cells_at_the_end_of_a_file() -> None:
    from stream_dp.config import load_settings
    from stream_dp.engine import OfflineEngine

    lat, lon = h3.cell_to_latlng(CENTRE)
    point = {"lat": lat, "lon": lon, "speed": 30.0}
    readings = [{**point, "vehicle_id": f"v{n // 2}", "ts": 50 * n} for n in range(40)]
    # B 14 per 7 days: the bucket refills slowly, so one hour's cell is above its release
    # price (§13.3) and waits for a longer span
    settings = load_settings(**{**BUDGET, "max_span_hours": 9, "partitions": 2,
                                "budget_period_seconds": 7 * 24 * HOUR})  # fmt: skip
    engine = OfflineEngine(settings, LaplaceNoise())
    kept = [r for rel in (*engine.feed(readings), *engine.finish()) for r in rel.cells]
    assert kept == []  # as the service, which never sees an end: the cell waits
    engine = OfflineEngine(settings, LaplaceNoise())
    releases = list(engine.feed(readings)) + list(engine.finish(release_held=True))
    records = [r for rel in releases for r in rel.cells]
    # The one hour could wait eight more for a longer span, but the input ends: released.
    assert [(r["cell"], r["n_readings"]) for r in records] == [(CENTRE, 40)]


def test_only_a_choice_that_may_be_followed_stops_its_replans_at_a_refused_cell(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """docs/math.md §13.3, "When the re-plans stop": a choice of cells that another may follow
    plans with its finer cells refusable (a plan putting enough of them past their price to
    choose again is read for its refusals only); the last choice allowed plans with none, so
    the plan it releases is the price loop's whole; without ``STOP_AT_REFUSAL`` no choice
    does."""
    seen: list[list[str] | None] = []
    real = budget_cells.budget_plan

    def spy(params: Any, rooms: Any, occupancy: Any, *args: Any) -> Any:
        refusable = args[2] if len(args) > 2 else None
        total = float(occupancy.total_per_cell().sum())
        assert refusable is None or args[3] == budget_cells.MIN_REFUSED_SHARE * total
        seen.append(None if refusable is None else
                    [occupancy.cells[g] for g in np.flatnonzero(refusable)])  # fmt: skip
        return real(params, rooms, occupancy, *args)

    monkeypatch.setattr(budget_cells, "budget_plan", spy)
    # B (res 8) is above its one-hour price (the test above): refused, then its parent chosen.
    hour0 = _twice([(B, f"b{v}") for v in range(20)])
    _run(_params(), [hour0])
    assert seen[0] == [B] and len(seen) >= 2  # refused at the first choice, chosen again
    seen.clear()
    monkeypatch.setattr(budget_cells, "MAX_CHOICES", 1)
    _run(_params(), [hour0])
    assert seen == [None]
    seen.clear()
    monkeypatch.setattr(budget_cells, "MAX_CHOICES", 8)
    # Refusals too few to choose again do not stop the loop: the one plan is the whole loop's,
    # and it is released (as without the stop).
    monkeypatch.setattr(budget_cells, "MIN_REFUSED_SHARE", 1.01)
    stopped = _run(_params(), [hour0])
    assert seen == [[B]]
    seen.clear()
    monkeypatch.setattr(budget_cells, "STOP_AT_REFUSAL", False)
    whole = _run(_params(), [hour0])
    assert seen == [None]
    assert _shapes(stopped[0]) == _shapes(whole[0])
    assert stopped[0].summary["readings_held"] == whole[0].summary["readings_held"] > 0
    seen.clear()
    monkeypatch.setattr(budget_cells, "MIN_REFUSED_SHARE", 1e-3)
    _run(_params(), [hour0])
    assert seen and all(refusable is None for refusable in seen)

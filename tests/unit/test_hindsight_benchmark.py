"""``benchmarks/hindsight.py``'s bound on instances small enough to solve by hand: each
constraint of the linear programme (readings released once, each vehicle's budget, the
median staleness, the finer share) changes the optimum exactly as the hand solution says."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import h3
import numpy as np
import pytest

# The benchmarks are scripts importing their neighbours by name (``from panel import``).
sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

import hindsight  # noqa: E402
from panel import PANEL, DataSet, profile_row  # noqa: E402
from usefulness import settings_of  # noqa: E402

from stream_dp.dp.release_candidates import (  # noqa: E402
    CellOptions,
    cell_options,
    entry_payments,
)
from stream_dp.release.params import ReleaseParams  # noqa: E402

HOUR = 3600.0
#: A finest cell of the AIS week's harbour, and its centre.
LAT, LON = h3.cell_to_latlng(h3.latlng_to_cell(40.7, -74.0, 8))


def _row(budget: float) -> dict[str, Any]:
    return {**profile_row(PANEL[0]), "vehicle_budget": budget}


def _readings(
    vehicles: range, hour: int, at: tuple[float, float] = (LAT, LON), per: int = 1
) -> list[dict[str, Any]]:
    return [{"vehicle_id": f"v{v}", "ts": (hour + 0.5) * HOUR + i, "lat": at[0], "lon": at[1],
             "speed": 10.0} for v in vehicles for i in range(per)]  # fmt: skip


def _options(counts: list[int], budget: float) -> CellOptions:
    """The hand solution's values: one cell of these per-vehicle counts, at the script's ε
    options (as it computes them, at most ``budget``)."""
    row = _row(budget)
    return cell_options(
        np.array([0, len(counts)]), np.array(counts), upper=row["upper"],
        target=row["target_mean_error"], tau=hindsight.USEFUL_SHARE * row["upper"],
        factors=np.array(hindsight.FACTORS), max_epsilon=budget,
    )  # fmt: skip


def test_a_reading_is_released_once_across_resolutions_and_spans() -> None:
    # 30 vehicles in hour 0 and the same 30 in hour 1, one reading each: every resolution
    # and both spans hold them; without the cover rows the LP would add them all up
    readings = _readings(range(30), 100) + _readings(range(30), 101)
    got = hindsight.bound(readings, _row(1000.0), max_span=2, pay="cell")
    hour_best = float(np.max(_options([1] * 30, 1000.0).useful[0]))
    span_best = float(np.max(_options([2] * 30, 1000.0).useful[0]))
    assert got["coverage"] * len(readings) == pytest.approx(max(2 * hour_best, span_best))


def test_each_vehicle_pays_at_most_its_budget() -> None:
    # two hours of the same 30 vehicles, each hour's release at least ε_T: a budget of ε_T
    # buys one hour's release, 2 ε_T both (no option above ε_T is worth more per ε)
    readings = _readings(range(30), 100) + _readings(range(30), 101)
    least = float(_options([1] * 30, 1000.0).epsilon[0, 0])
    for budget, hours in ((least, 1), (2 * least, 2)):
        useful = float(_options([1] * 30, budget).useful[0, 0])
        got = hindsight.bound(readings, _row(budget), max_span=1, pay="cell")
        assert got["coverage"] * len(readings) == pytest.approx(hours * useful)


def test_the_median_staleness_limit_excludes_a_span_mostly_late() -> None:
    # 14 vehicles in hour 0, 8 others in hour 1: at B 1 neither hour meets T alone, their
    # 2-hour span does, but 14 of its 22 readings are an hour late
    readings = _readings(range(14), 100) + _readings(range(14, 22), 101)
    assert float(np.min(_options([1] * 14, 1.0).epsilon[0])) > 1.0  # hours alone: no candidate
    span = float(_options([1] * 22, 1.0).useful[0, 0])
    assert span > 0
    late = hindsight.bound(readings, _row(1.0), max_span=2, pay="cell", median_staleness=1.0)
    now = hindsight.bound(readings, _row(1.0), max_span=2, pay="cell", median_staleness=0.0)
    assert late["coverage"] * len(readings) == pytest.approx(span)
    assert now["coverage"] == pytest.approx(0.0, abs=1e-9)
    # the other way round, 8 of its 22 readings are late: the median is on time
    early = _readings(range(8), 100) + _readings(range(8, 22), 101)
    got = hindsight.bound(early, _row(1.0), max_span=2, pay="cell", median_staleness=0.0)
    assert got["coverage"] * len(early) == pytest.approx(span)


def test_own_shares_let_two_hours_share_a_budget_that_buys_one_whole() -> None:
    # 30 vehicles in hours 0 and 1, half with 2 readings (at the cap: they pay the whole ε)
    # and half with 1 (their own share, about half of it), the halves swapped in hour 1; B is
    # the hour's ε_T: paying whole cells buys one hour, paying shares each hour to the share
    # x = ε / (ε + share) (every vehicle's payments ε x + share x at most B)
    counts = [2] * 15 + [1] * 15
    readings = (_readings(range(15), 100, per=2) + _readings(range(15, 30), 100)
                + _readings(range(15), 101) + _readings(range(15, 30), 101, per=2))  # fmt: skip
    least = float(_options(counts, 1000.0).epsilon[0, 0])
    options = _options(counts, least)
    useful = float(options.useful[0, 0])
    pay = entry_payments(np.array([0, 30]), options)[:, 0]
    assert pay[0] == least and 0 < pay[-1] < least  # at the cap, and under it
    whole = hindsight.bound(readings, _row(least), max_span=1, pay="cell")
    share = hindsight.bound(readings, _row(least), max_span=1, pay="share")
    assert whole["coverage"] * len(readings) == pytest.approx(useful)
    x = least / (least + float(pay[-1]))
    assert share["coverage"] * len(readings) == pytest.approx(2 * x * useful)


def test_the_finer_share_limit_needs_a_finer_cell_that_meets_t() -> None:
    # 12 vehicles in each of two finest cells under different resolution-4 parents of one
    # resolution-3 cell: at B 1 only the resolution-3 cell (24 vehicles) meets T
    r3 = h3.latlng_to_cell(40.7, -74.0, 3)
    first, second = (h3.cell_to_center_child(c, 8) for c in sorted(h3.cell_to_children(r3, 4))[:2])
    readings = (_readings(range(12), 100, h3.cell_to_latlng(first))
                + _readings(range(12, 24), 100, h3.cell_to_latlng(second)))  # fmt: skip
    whole = float(_options([1] * 24, 1.0).useful[0, 0])
    free = hindsight.bound(readings, _row(1.0), max_span=1, pay="cell")
    finer = hindsight.bound(readings, _row(1.0), max_span=1, pay="cell", finer_share=0.3)
    assert free["coverage"] * len(readings) == pytest.approx(whole)
    assert free["finer_share"] == pytest.approx(0.0, abs=1e-9)
    assert finer["coverage"] == pytest.approx(0.0, abs=1e-9)


def test_a_cell_one_resolution_finer_than_r0_counts_as_finer() -> None:
    # 28 vehicles, 4 in each resolution-5 child of one resolution-4 cell: at B 1 its
    # resolution-4 cell (and the resolution-3 parent, the same readings) meets T, no finer one
    r4 = h3.cell_to_children(h3.latlng_to_cell(40.7, -74.0, 3), 4)[0]
    readings = [r for i, c in enumerate(sorted(h3.cell_to_children(r4, 5)))
                for r in _readings(range(4 * i, 4 * i + 4), 100,
                                   h3.cell_to_latlng(h3.cell_to_center_child(c, 8)))]  # fmt: skip
    options = _options([1] * 28, 1.0)
    whole = float(np.max(options.useful[0][options.meets[0]]))  # the best ε within B
    got = hindsight.bound(readings, _row(1.0), max_span=1, pay="cell", finer_share=0.3)
    assert got["coverage"] * len(readings) == pytest.approx(whole)
    assert got["finer_share"] >= 0.3 - 1e-9


def test_no_bound_for_readings_longer_than_one_budget_period() -> None:
    # B over all the readings bounds a plan only within one period (a longer run refills it)
    period = int(_row(1.0)["budget_period_seconds"]) // 3600
    readings = _readings(range(30), 100) + _readings(range(30), 100 + period)
    with pytest.raises(ValueError, match="more than one budget period"):
        hindsight.bound(readings, _row(1.0), max_span=1, pay="cell")
    assert hindsight.bound(readings[:30] + _readings(range(30), 99 + period), _row(1000.0),
                           max_span=1, pay="cell")["coverage"] > 0  # fmt: skip


def test_live_first_pools_no_hour_that_meets_t_alone_within_the_burst() -> None:
    # the same 30 vehicles in hours 0 and 1; B (and the burst) ε_T buys one release each:
    # the 2-hour span covers both hours, but live first releases an hour that meets T alone
    readings = _readings(range(30), 100) + _readings(range(30), 101)
    least = float(_options([1] * 30, 1000.0).epsilon[0, 0])
    hour = float(_options([1] * 30, least).useful[0, 0])
    span = float(_options([2] * 30, least).useful[0, 0])
    assert span > hour > 0
    row = {**_row(least), "vehicle_budget_burst": least}
    pooled = hindsight.bound(readings, row, max_span=2, pay="cell")
    live = hindsight.bound(readings, row, max_span=2, pay="cell", live_first=True)
    assert pooled["coverage"] * len(readings) == pytest.approx(span)
    assert live["coverage"] * len(readings) == pytest.approx(hour)
    # with a burst below ε_T no hour meets T alone within it: the span is allowed again
    low = hindsight.bound(readings, {**row, "vehicle_budget_burst": least / 2}, max_span=2,
                          pay="cell", live_first=True)  # fmt: skip
    assert low["coverage"] == pytest.approx(pooled["coverage"])


def test_live_first_keeps_the_spans_of_a_finer_cell_whose_hours_miss_t_alone() -> None:
    # one resolution-3 cell, two resolution-4 children: A with 10 vehicles an hour, B with
    # 20, new ones each hour. The resolution-3 hours (30 vehicles) meet T within the burst,
    # so live first pools none of them; A's hours (10) and B's (20) do not, so their spans
    # stay, and with every useful reading finer than R0 the bound is the same with live first
    r3 = h3.latlng_to_cell(40.7, -74.0, 3)
    a, b = (h3.cell_to_latlng(h3.cell_to_center_child(c, 8))
            for c in sorted(h3.cell_to_children(r3, 4))[:2])  # fmt: skip
    readings = (_readings(range(10), 100, a) + _readings(range(10, 30), 100, b)
                + _readings(range(30, 40), 101, a) + _readings(range(40, 60), 101, b))  # fmt: skip
    burst = float(_options([1] * 30, 1000.0).epsilon[0, 0])
    budget = float(_options([1] * 20, 1000.0).epsilon[0, 0])
    assert float(_options([1] * 10, 1000.0).epsilon[0, 0]) > budget > burst  # A's hours: no
    row = {**_row(budget), "vehicle_budget_burst": burst}
    pooled = hindsight.bound(readings, row, max_span=2, pay="cell", finer_share=1.0)
    live = hindsight.bound(readings, row, max_span=2, pay="cell", finer_share=1.0,
                           live_first=True)  # fmt: skip
    a_span = float(_options([1] * 20, budget).useful[0, 0])
    assert pooled["coverage"] * len(readings) > a_span  # A's span and B's readings
    assert live["coverage"] == pytest.approx(pooled["coverage"])


def test_the_spread_of_sure_releases_is_none_and_every_worst_is_their_share() -> None:
    # chances 1 and 0: every run the same, 60 of 100 readings useful
    got = hindsight.run_spread(np.array([40.0, 20.0, 30.0]), np.array([1.0, 1.0, 0.0]), 100,
                               draws=500)  # fmt: skip
    assert (got["mean"], got["sd"], got["expected_worst"]) == pytest.approx((0.6, 0.0, 0.6))
    assert got["worst_at_least"] == 0.0  # 60 % never reaches the default 80 %
    assert hindsight.run_spread(np.array([40.0, 20.0]), np.array([1.0, 1.0]), 100, threshold=0.6,
                                draws=500)["worst_at_least"] == 1.0  # fmt: skip


def test_the_worst_of_runs_of_one_release_is_all_or_nothing_by_hand() -> None:
    # one release of 90 of 100 readings at chance 0.86: one run is 0.9 or 0; the worst of 5
    # reaches 0.8 only when all five land, 0.86^5 = 0.470; the sd is 90 sqrt(p (1 - p)) / 100
    p = 0.86
    got = hindsight.run_spread(np.array([90.0]), np.array([p]), 100, draws=40_000, seed=3)
    assert got["mean"] == pytest.approx(0.9 * p)
    assert got["sd"] == pytest.approx(0.9 * np.sqrt(p * (1 - p)))
    assert got["worst_at_least"] == pytest.approx(p**5, abs=0.01)  # 4 sd of 40,000 draws
    assert got["expected_worst"] == pytest.approx(0.9 * p**5, abs=0.01)


def test_more_smaller_releases_of_the_same_readings_spread_less_and_worst_higher() -> None:
    # the same 90 readings at the same chance, in 1 release or in 9: the same expectation,
    # a third of the sd (1 / sqrt(9)), and a worst of 5 nearer the expectation. At 60 %, one
    # release needs all five runs to land (0.86^5); nine need 6 of 9 in each run (binomial)
    p = 0.86
    one = hindsight.run_spread(np.array([90.0]), np.full(1, p), 100, threshold=0.6, seed=1)
    nine = hindsight.run_spread(np.full(9, 10.0), np.full(9, p), 100, threshold=0.6, seed=1)
    assert nine["mean"] == pytest.approx(one["mean"])
    assert nine["sd"] == pytest.approx(one["sd"] / 3)
    assert one["expected_worst"] < nine["expected_worst"] < nine["mean"]
    six_of_nine = sum(math.comb(9, k) * p**k * (1 - p) ** (9 - k) for k in range(6, 10))
    assert one["worst_at_least"] == pytest.approx(p**5, abs=0.015)  # 0.470
    assert nine["worst_at_least"] == pytest.approx(six_of_nine**5, abs=0.015)  # 0.868


def test_the_spread_fills_every_chunk_of_its_draws() -> None:
    # 100 releases x 5 runs x 5,000 draws: past one chunk (2 million), so the draws come in
    # several; with chances 0 and 1 every run is the same, so any draw left unfilled shows
    n = np.full(100, 1.0)
    p = np.r_[np.ones(70), np.zeros(30)]
    got = hindsight.run_spread(n, p, 100, draws=5_000, threshold=0.7)
    assert got["expected_worst"] == pytest.approx(0.7, abs=1e-12)
    assert got["worst_at_least"] == 1.0


def test_the_spread_refuses_chances_outside_zero_to_one_and_unpaired_inputs() -> None:
    with pytest.raises(ValueError, match="chances"):
        hindsight.run_spread(np.array([1.0]), np.array([1.5]), 10)
    with pytest.raises(ValueError, match="pair up"):
        hindsight.run_spread(np.array([1.0, 2.0]), np.array([0.5]), 10)
    with pytest.raises(ValueError, match="at least 1"):
        hindsight.run_spread(np.array([1.0]), np.array([0.5]), 10, runs=0)
    with pytest.raises(ValueError, match="at least 1"):
        hindsight.run_spread(np.array([1.0]), np.array([0.5]), 10, draws=0)


def test_the_bound_reports_the_spread_of_its_own_releases() -> None:
    # one cell, one hour, 40 vehicles: the optimum is that one release at the factor with the
    # most expected useful readings; its spread is that release's alone
    readings = _readings(range(40), 100)
    got = hindsight.bound(readings, _row(1000.0), max_span=1, pay="cell", runs=3,
                          threshold=0.5)  # fmt: skip
    spread = got["spread"]
    assert spread["mean"] == pytest.approx(got["coverage"])
    p = got["coverage"] * len(readings) / (got["released_share"] * len(readings))
    assert 0 < p < 1  # a chance below 1: a spread to read
    assert spread["sd"] == pytest.approx(got["released_share"] * np.sqrt(p * (1 - p)))


def test_overlapping_spans_of_one_cell_form_one_group_and_other_cells_their_own() -> None:
    spans = np.array([
        [7, 0, 7],  # cell 7, hours 0-7
        [7, 5, 9],  # overlaps the first
        [7, 10, 12],  # after both: its own
        [8, 0, 7],  # another cell, the same hours: its own
        [7, 12, 12],  # touches hour 12 of [10, 12]: with it
        [7, 0, 7],  # the first again (another factor): with it
    ])  # fmt: skip
    group = hindsight.overlap_groups(spans)
    assert group[0] == group[1] == group[5]
    assert group[2] == group[4] != group[0]
    assert len({group[0], group[2], group[3]}) == 3
    assert sorted(set(group.tolist())) == [0, 1, 2]


def test_the_bound_draws_a_cells_overlapping_parts_as_one() -> None:
    # 40 vehicles, hours 0 and 1, one cell, B 2: the optimum takes the 2-hour span and both
    # hours, each in part (B bounds the vehicles' payments); drawn apart the three parts
    # spread less than drawn as the one group they overlap in
    readings = _readings(range(40), 100) + _readings(range(40), 101)
    got = hindsight.bound(readings, _row(2.0), max_span=2, pay="cell")
    apart, together = got["spread"], got["spread_by_overlap"]
    assert (got["fractional"], apart["releases"], together["releases"]) == (3, 3.0, 1.0)
    assert together["mean"] == pytest.approx(apart["mean"]) == pytest.approx(got["coverage"])
    assert together["sd"] > apart["sd"]


def test_pacing_holds_one_hours_release_to_the_burst() -> None:
    # one hour, 40 vehicles, B four times ε_T × 2, so the burst (B/4) is exactly that ε:
    # without pacing the best factor (4) is affordable, with the bucket only factor 2
    budget = 4 * float(_options([1] * 40, 1000.0).epsilon[0, 3])
    options = _options([1] * 40, budget)
    readings = _readings(range(40), 100)
    free = hindsight.bound(readings, _row(budget), max_span=1, pay="cell")
    paced = hindsight.bound(readings, _row(budget), max_span=1, pay="cell", pacing=True)
    assert free["coverage"] * 40 == pytest.approx(float(options.useful[0].max()))
    assert paced["coverage"] * 40 == pytest.approx(float(options.useful[0, 3]))


def _params(budget: float, period_seconds: int | None = None) -> ReleaseParams:
    row = _row(budget)
    if period_seconds is not None:
        row["budget_period_seconds"] = period_seconds
    return ReleaseParams.from_settings(settings_of(row))


def test_bucket_rows_by_hand() -> None:
    # payments ending in windows 5, 5 and 7 (vehicles 0, 1, 0) of columns 0, 1, 2: pairs
    # (0, 5), (0, 7), (1, 5); vehicle 0 pays 0.5 then 0.25, vehicle 1 pays 2.0
    params = _params(4.0)
    rate = 4.0 * params.window_seconds / params.ledger_period_seconds
    windows, vehicles = np.array([5, 5, 7]), np.array([0, 1, 0])
    pair, pair_vehicle, pair_window = hindsight.bucket_pairs(windows, vehicles)
    assert (pair.tolist(), pair_vehicle.tolist(), pair_window.tolist()) == (
        [0, 2, 1], [0, 0, 1], [5, 7, 5])  # fmt: skip
    matrix, limits, bounds = hindsight.bucket_rows(
        pair, pair_vehicle, pair_window, np.array([0, 1, 2]), np.array([0.5, 2.0, 0.25]), 3,
        params,
    )  # fmt: skip
    # columns: 3 releases, before levels of pairs 0-2, after levels of pairs 0-2
    assert matrix.toarray().tolist() == [
        [0.5, 0.0, 0.0, -1.0, 0.0, 0.0, 1.0, 0.0, 0.0],  # (0, 5): spend
        [0.0, 0.0, 0.25, 0.0, -1.0, 0.0, 0.0, 1.0, 0.0],  # (0, 7): spend
        [0.0, 2.0, 0.0, 0.0, 0.0, -1.0, 0.0, 0.0, 1.0],  # (1, 5): spend
        [0.0, 0.0, 0.0, 0.0, 1.0, 0.0, -1.0, 0.0, 0.0],  # (0, 7) refilled from (0, 5)
    ]  # fmt: skip
    assert limits.tolist() == pytest.approx([0.0, 0.0, 0.0, 2 * rate])
    burst = params.vehicle_burst
    assert bounds.tolist() == [[0.0, burst]] * 3 + [[0.0, math.inf]] * 3
    assert hindsight.bucket_nonzeros(3, pair_vehicle) == matrix.nnz == 3 + 6 + 2


def _interval_rows(
    windows: np.ndarray, vehicles: np.ndarray, pay: np.ndarray, n_columns: int,
    params: ReleaseParams,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The bucket by its definition: per vehicle and interval [a, b] of windows, the payments
    closing in it at most ``burst + rate (b - a)`` (one payment per column here)."""
    burst = params.vehicle_burst
    rate = float(params.vehicle_budget) * params.window_seconds / params.ledger_period_seconds
    rows, limits = [], []
    for v in np.unique(vehicles):
        for a in range(int(windows.min()), int(windows.max()) + 1):
            for b in range(a, int(windows.max()) + 1):
                inside = (vehicles == v) & (windows >= a) & (windows <= b)
                row = np.zeros(n_columns)
                row[np.flatnonzero(inside)] = pay[inside]
                rows.append(row)
                limits.append(burst + rate * (b - a))
    return np.array(rows), np.array(limits)


@pytest.mark.parametrize("seed", range(6))
def test_bucket_rows_allow_exactly_what_every_interval_of_windows_allows(seed: int) -> None:
    # random payments of 3 vehicles over 24 windows, one column each: the best of random
    # objectives is the same under the bucket's levels as under every interval's row, so the
    # two forms allow the same choices (a wrong refill, cap or spend row changes some optimum)
    rng = np.random.default_rng(seed)
    params = _params(0.5, 86_400)  # a burst of 0.125, refilled in ~8 windows
    burst = params.vehicle_burst
    n = 24
    windows, vehicles = rng.integers(0, 24, n), rng.integers(0, 3, n)
    pay = rng.uniform(0.2, 1.0, n) * burst
    dense, dense_limits = _interval_rows(windows, vehicles, pay, n, params)
    pair, pair_vehicle, pair_window = hindsight.bucket_pairs(windows, vehicles)
    matrix, limits, levels = hindsight.bucket_rows(
        pair, pair_vehicle, pair_window, np.arange(n), pay, n, params
    )
    box = np.tile([0.0, 1.0], (n, 1))
    for _ in range(5):
        value = rng.uniform(0.1, 1.0, n)
        direct = hindsight.linprog(-value, A_ub=dense, b_ub=dense_limits, bounds=box)
        by_levels = hindsight.linprog(
            np.r_[-value, np.zeros(len(levels))], A_ub=matrix, b_ub=limits,
            bounds=np.r_[box, levels],
        )  # fmt: skip
        assert direct.status == by_levels.status == 0
        assert by_levels.fun == pytest.approx(direct.fun, abs=1e-7)
        assert direct.fun > -value.sum() + 1e-6  # the bucket binds: not every payment fits


def test_pacing_beside_the_staleness_and_finer_rows_only_lowers_the_bound() -> None:
    # the rows of every constraint together: each added one can only lower the optimum
    readings = _readings(range(40), 100) + _readings(range(40), 101)
    row = _row(4 * float(_options([1] * 40, 1000.0).epsilon[0, 3]))
    free = hindsight.bound(readings, row, max_span=2, pay="cell", median_staleness=0.5,
                           finer_share=0.0)  # fmt: skip
    paced = hindsight.bound(readings, row, max_span=2, pay="cell", median_staleness=0.5,
                            finer_share=0.0, pacing=True)  # fmt: skip
    assert 0 < paced["coverage"] < free["coverage"]


def test_an_lp_over_the_nonzeros_limit_is_refused_before_it_is_built(monkeypatch) -> None:
    readings = _readings(range(40), 100) + _readings(range(40), 101)
    built = hindsight.bound(readings, _row(2.0), max_span=2, pay="cell")
    assert built["candidates"] > 0

    def no_solve(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the LP was solved")

    monkeypatch.setattr(hindsight, "linprog", no_solve)
    with pytest.raises(hindsight.TooLarge, match="nonzeros, over 10"):
        hindsight.bound(readings, _row(2.0), max_span=2, pay="cell", max_nonzeros=10)


def test_the_script_prints_a_refused_data_set_in_one_line_and_goes_on(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    small = [DataSet("one cell", lambda quick: _readings(range(40), 100), 65.0, 14.0, 604_800),
             DataSet("two hours", lambda quick: _readings(range(40), 100)
                     + _readings(range(40), 101), 65.0, 14.0, 604_800)]  # fmt: skip
    monkeypatch.setattr(hindsight, "PANEL", small)
    monkeypatch.setattr(sys, "argv", ["hindsight.py", "--max-nonzeros", "2000", "--detail"])
    assert hindsight.main() == 0
    out = capsys.readouterr().out
    assert (
        "| two hours | 8 | any | share | none: the LP would hold 4,464 nonzeros, over 2,000" in out
    )
    assert "| one cell | 8 | any | share | " in out and "drawn as one" in out  # solved


def test_without_the_spread_the_bound_draws_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hindsight, "run_spread", None)  # a draw would fail
    got = hindsight.bound(_readings(range(40), 100), _row(1000.0), max_span=1, pay="cell",
                          spread=False)  # fmt: skip
    assert got["coverage"] > 0
    assert (got["spread"], got["spread_by_overlap"]) == (None, None)


def test_the_nonzeros_guard_counts_the_pacing_rows() -> None:
    # two hours of one cell: the LP's payments and cover rows alone hold 4,464 nonzeros, so
    # that limit lets it be built; its pacing rows would pass it
    readings = _readings(range(40), 100) + _readings(range(40), 101)
    row = _row(14.0)
    built = hindsight.bound(readings, row, max_span=8, pay="share", max_nonzeros=4_464)
    assert built["candidates"] > 0
    with pytest.raises(hindsight.TooLarge, match="nonzeros, over 4,464"):
        hindsight.bound(readings, row, max_span=8, pay="share", max_nonzeros=4_464, pacing=True)


def test_paced_lp_over_the_nonzeros_limit_is_refused_before_its_rows_are_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    readings = _readings(range(40), 100) + _readings(range(40), 101)
    monkeypatch.setattr(hindsight.sparse, "csr_matrix", None)  # building a row would fail
    monkeypatch.setattr(hindsight, "bucket_rows", None)
    with pytest.raises(hindsight.TooLarge, match="nonzeros, over 4,464"):
        hindsight.bound(readings, _row(14.0), max_span=8, pay="share", max_nonzeros=4_464,
                        pacing=True)  # fmt: skip

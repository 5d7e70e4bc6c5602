"""The hold option (dp/release_hold.py) against a brute-force loop and its limits."""

from __future__ import annotations

import numpy as np
import pytest

from stream_dp.dp.release_candidates import cell_options
from stream_dp.dp.release_choice import Candidates, choose_releases
from stream_dp.dp.release_hold import arrival_rates, hold_values, staleness_weight

OPTIONS = {"upper": 65.0, "target": 10.0, "tau": 6.5, "factors": np.array([1.0, 1.5, 2.0]),
           "max_epsilon": 3.5}  # fmt: skip


def _brute_hold(counts: list[int], age: int, arrivals: float, each: float, span: int,
                kappa: float) -> tuple[float, int]:  # fmt: skip
    best, wait = 0.0, 0
    for h in range(1, span - age + 1):
        pooled = [*counts, *[max(round(each), 1)] * int(np.floor(h * arrivals + 1e-9))]
        opts = cell_options(np.array([0, len(pooled)]), np.array(pooled), **OPTIONS)
        useful = max((u for u, ok in zip(opts.useful[0], opts.meets[0], strict=True) if ok),
                     default=0.0)  # fmt: skip
        worth = useful * (1 - kappa * (age + h))
        if worth > best + 1e-9:
            best, wait = worth, h
    return best, wait


def test_each_cells_hold_is_its_best_horizon_by_brute_force() -> None:
    rng = np.random.default_rng(41)
    n = 40
    sizes = rng.integers(1, 12, n)
    counts = rng.integers(1, 20, int(sizes.sum()))
    start = np.r_[0, np.cumsum(sizes)].astype(np.int64)
    age = rng.integers(1, 9, n)
    arrivals, each = rng.uniform(0, 6, n), rng.uniform(1, 15, n)
    kappa = staleness_weight(8)
    got = hold_values(start, counts, age, arrivals, each, max_span_hours=8, staleness=kappa,
                      **OPTIONS)  # fmt: skip
    held = 0
    for g in range(n):
        value, wait = _brute_hold(counts[start[g] : start[g + 1]].tolist(), int(age[g]),
                                  float(arrivals[g]), float(each[g]), 8, kappa)  # fmt: skip
        assert got.value[g] == pytest.approx(value) and got.hours[g] == wait
        held += wait > 0
    assert 5 < held < n  # some cells gain by holding, some cannot


def test_a_cell_that_misses_t_now_holds_until_enough_vehicles_arrive_within_the_span() -> None:
    one = np.array([0, 2]), np.array([10, 10])  # two vehicles: misses T at the burst now
    now = cell_options(*one, **OPTIONS)
    assert not now.meets.any()
    kappa = staleness_weight(8)
    hold = hold_values(*one, np.array([1]), np.array([12.0]), np.array([10.0]),
                       max_span_hours=8, staleness=kappa, **OPTIONS)  # fmt: skip
    assert hold.value[0] > 0 and 1 <= hold.hours[0] <= 7 and hold.epsilon[0] <= 3.5
    at_limit = hold_values(*one, np.array([8]), np.array([12.0]), np.array([10.0]),
                           max_span_hours=8, staleness=kappa, **OPTIONS)  # fmt: skip
    assert at_limit.value[0] == 0.0 and at_limit.hours[0] == 0  # the span limit bounds it
    never = hold_values(*one, np.array([1]), np.array([0.0]), np.array([0.0]),
                        max_span_hours=8, staleness=kappa, **OPTIONS)  # fmt: skip
    assert never.value[0] == 0.0  # nobody arrives: holding is worth nothing


def test_the_solver_holds_a_weak_cell_and_releases_a_strong_one_now() -> None:
    # group 0: release now worth 3 (paying 1 of a room of 1) or hold worth 8 (paying nothing)
    # group 1: release now worth 10 or hold worth 2
    value, start = np.array([3.0, 8.0, 10.0, 2.0]), np.array([0, 1, 1, 2, 2])
    cands = Candidates(np.array([0, 0, 1, 1]), value, start, np.array([0, 1]), np.ones(2))
    choice = choose_releases(cands, np.array([1.0, 1.0]))
    assert sorted(choice.chosen.tolist()) == [1, 2]


def test_arrivals_count_the_vehicles_new_to_the_cell_each_window() -> None:
    window = np.array([0, 0, 1, 1, 1, 2, 2, 2])
    cell = np.array([0, 1, 0, 0, 1, 0, 0, 1])
    vehicle = np.array([0, 1, 0, 2, 3, 2, 4, 1])
    count = np.array([5, 5, 5, 7, 9, 5, 3, 4])
    rate, each = arrival_rates(window, cell, vehicle, count, 3)
    assert rate.tolist() == [1.0, 1.0, 0.0]  # cell 0: vehicles 2 then 4; cell 1: 3 then 1
    assert each.tolist() == [5.0, 6.5, 0.0]


def test_the_staleness_weight_halves_a_reading_at_the_span_limit() -> None:
    assert 1 - staleness_weight(8) * 8 == 0.5
    with pytest.raises(ValueError, match="max_span_hours"):
        staleness_weight(0)

"""LEVY's private interval (003 Algorithm 3) and Smith's quantile (2011, Algorithm 2)."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from stream_dp.dp.mechanisms.levy import (
    bin_midpoints,
    concentration_radius,
    interval_costs,
    private_interval,
)
from stream_dp.dp.mechanisms.private_quantile import grid_point, private_quantile, rank_blocks
from stream_dp.dp.randomness import RandomSource

ALPHA = 1e-4
values_strategy = st.lists(st.floats(min_value=0.0, max_value=40.0), min_size=1, max_size=12)


def test_bins_cover_the_range_with_width_tau() -> None:
    np.testing.assert_allclose(bin_midpoints(40.0, 5.0), 2.5 + 5.0 * np.arange(8))
    np.testing.assert_allclose(bin_midpoints(40.0, 15.0), [7.5, 22.5, 35.0])  # last bin cut at U
    np.testing.assert_allclose(bin_midpoints(40.0, 100.0), [20.0])
    assert concentration_radius(65.0, 164, 46, 0.2) == pytest.approx(
        65.0 * math.sqrt(math.log(2 * 164 / 0.2) / 92)
    )


def test_costs_by_hand() -> None:
    # Midpoints 2.5, 7.5, ..., 37.5; means snap to 2.5, 2.5, 7.5, 12.5, 32.5.
    midpoints = bin_midpoints(40.0, 5.0)
    costs = interval_costs(np.array([1.0, 2.0, 6.0, 11.0, 31.0]), midpoints)
    assert costs == [3, 2, 3, 4, 4, 4, 4, 5]
    # A mean half-way between two midpoints snaps to the lower one (30 -> 27.5).
    assert interval_costs(np.array([30.0]), midpoints)[5:7] == [0, 1]


@given(values=values_strategy, data=st.data())
def test_cost_sensitivity_is_one(values: list[float], data: st.DataObject) -> None:
    midpoints = bin_midpoints(40.0, 4.0)
    i = data.draw(st.integers(min_value=0, max_value=len(values) - 1))
    moved = list(values)
    moved[i] = data.draw(st.floats(min_value=0.0, max_value=40.0))
    first = np.array(interval_costs(np.array(values), midpoints))
    second = np.array(interval_costs(np.array(moved), midpoints))
    assert np.abs(first - second).max() <= 1


def test_private_interval_frequencies_match_exp_minus_eps_cost_over_4() -> None:
    means = np.array([1.0, 2.0, 6.0, 11.0, 30.0])
    tau, epsilon_levy = 5.0, 2.0  # Algorithm 3 gets eps/2 = 1.0
    midpoints = bin_midpoints(40.0, tau)
    costs = interval_costs(means, midpoints)
    ideal = np.exp(-epsilon_levy * np.array(costs) / 4)
    ideal /= ideal.sum()
    source = RandomSource.seeded_for_tests(77)
    n = 12_000
    centres = Counter(
        private_interval(means, 40.0, tau, epsilon_levy / 2, source)[2] for _ in range(n)
    )
    observed = [centres[float(m)] for m in midpoints]
    assert sum(observed) == n
    assert stats.chisquare(observed, ideal * n).pvalue > ALPHA
    low, high, centre = private_interval(means, 40.0, tau, 1.0, source)
    assert (low, high) == (max(0.0, centre - 7.5), min(centre + 7.5, 40.0))


@given(values=values_strategy)
def test_rank_blocks_by_brute_force(values: list[float]) -> None:
    bits = 4
    sizes, starts = rank_blocks(values, 0.0, 40.0, bits)
    grid = [grid_point(j, 0.0, 40.0, bits) for j in range(2**bits + 1)]
    ranks = [sum(v < x for v in values) for x in grid]
    assert sum(sizes) == len(grid)
    for i, (size, start) in enumerate(zip(sizes, starts, strict=True)):
        assert ranks[start : start + size] == [i] * size


@given(values=values_strategy, data=st.data())
def test_rank_sensitivity_is_one(values: list[float], data: st.DataObject) -> None:
    grid = [grid_point(j, 0.0, 40.0, 5) for j in range(33)]
    i = data.draw(st.integers(min_value=0, max_value=len(values) - 1))
    moved = list(values)
    moved[i] = data.draw(st.floats(min_value=0.0, max_value=40.0))
    for x in grid:
        assert abs(sum(v < x for v in values) - sum(v < x for v in moved)) <= 1


def test_smith_quantile_frequencies_on_a_coarse_grid() -> None:
    values, target, epsilon, bits = [3.0, 9.0, 9.5, 20.0, 33.0], 2, 1.2, 3
    grid = [grid_point(j, 0.0, 40.0, bits) for j in range(2**bits + 1)]
    ranks = np.array([sum(v < x for v in values) for x in grid])
    ideal = np.exp(-epsilon * np.abs(ranks - target) / 2)
    ideal /= ideal.sum()
    source = RandomSource.seeded_for_tests(91)
    n = 12_000
    draws = Counter(
        private_quantile(values, target, 0.0, 40.0, epsilon, source, grid_bits=bits)
        for _ in range(n)
    )
    observed = [draws[x] for x in grid]
    assert sum(observed) == n
    assert stats.chisquare(observed, ideal * n).pvalue > ALPHA


def test_smith_quantile_concentrates_for_large_epsilon() -> None:
    rng = np.random.default_rng(3)
    values = rng.uniform(10.0, 30.0, size=50)
    ordered = np.sort(values)
    source = RandomSource.seeded_for_tests(4)
    for _ in range(50):
        x = private_quantile(values, 5, 0.0, 65.0, 60.0, source)
        assert ordered[4] <= x <= ordered[5]  # exactly 5 values below x


def test_smith_quantile_refuses_bad_ranks() -> None:
    with pytest.raises(ValueError, match="target_rank"):
        private_quantile([1.0, 2.0], 3, 0.0, 5.0, 1.0, RandomSource.seeded_for_tests(0))

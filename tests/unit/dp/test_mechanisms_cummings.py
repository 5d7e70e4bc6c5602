"""002 Algorithm 2 pieces: cohorts, Sec. 6 initial estimators, the truncation parameter."""

from __future__ import annotations

import math

import numpy as np
import pytest

from stream_dp.dp.mechanisms import CellData, get_mean_mechanism
from stream_dp.dp.mechanisms.cummings import best_truncation, cohorts, truncation_objective
from stream_dp.dp.mechanisms.cummings_initial import (
    _bin,
    initial_mean,
    initial_mean_accuracy,
    initial_std,
    stability_histogram_mode,
)
from stream_dp.dp.randomness import RandomSource


def test_cohorts_split_by_count() -> None:
    counts = np.arange(1, 21)[::-1].copy()  # vehicle i has 20 - i readings
    groups = cohorts(counts, 1.0)
    assert groups.variance.tolist() == [0, 1, 2]  # ceil(ln 20 / 1) = 3 largest
    assert groups.mean.tolist() == [18, 19]  # floor(20 / 10) smallest
    assert groups.final.tolist() == list(range(3, 18))
    assert groups.k_variance == 18
    small = cohorts(np.array([5, 3, 1]), 0.1)
    assert small.variance.size == 1  # capped at floor(3n/5)
    assert small.mean.size == 0 and small.final.size == 2


def test_initial_mean_accuracy_lemma_6_1() -> None:
    log4, log2 = math.log(4 / 0.05), math.log(2 / 0.05)
    expected = 2 * max(
        math.sqrt(12 * 0.3 * log4 / 40 + 36 * log4**2 / 1600) + 6 * log4 / 40, log2 / (0.5 * 40)
    )
    assert initial_mean_accuracy(0.3, 40, 0.5, 0.05) == pytest.approx(expected)
    assert initial_mean_accuracy(0.3, 0, 0.5, 0.05) == 1.0


def test_initial_mean_is_laplace_on_the_cohort_mean() -> None:
    source = RandomSource.seeded_for_tests(1)
    values = np.full(50, 0.4)
    draws = np.array([initial_mean(values, 1.0, source) for _ in range(2000)])
    assert np.all((draws >= 0) & (draws <= 1))
    # Lap(1/50): E|noise| = 0.02 (clamping at 0 and 1 never binds here).
    assert abs(np.abs(draws - 0.4).mean() - 0.02) <= 4 * 0.02 / math.sqrt(2000)
    assert initial_mean(np.empty(0), 1.0, source) is None


def test_bins_are_half_open_powers_of_two() -> None:
    assert _bin(0.0) is None
    assert _bin(1.0) == -1 and _bin(0.75) == -1  # (1/2, 1]
    assert _bin(0.5) == -2 and _bin(0.3) == -2  # (1/4, 1/2]


def test_stability_histogram_hides_rare_bins_and_finds_heavy_ones() -> None:
    source = RandomSource.seeded_for_tests(2)
    # A single user alone in a bin passes the threshold only with probability <= delta / 2.
    assert not any(stability_histogram_mode([-3], 1.0, 1e-6, source)[0] for _ in range(500))
    found, label = stability_histogram_mode([-3] * 400 + [-5] * 100, 1.0, 1e-6, source)
    assert found and label == -3


def test_initial_std_is_within_a_factor_8_lemma_6_2() -> None:
    rng = np.random.default_rng(3)
    sigma = 0.05
    values = np.clip(rng.normal(0.5, sigma, size=4000), 0, 1)
    source = RandomSource.seeded_for_tests(4)
    for _ in range(20):
        estimate = initial_std(values, 1.0, 1e-6, source)
        assert estimate is not None and sigma <= estimate <= 8 * sigma
    assert initial_std(values[:1], 1.0, 1e-6, source) is None


def test_truncation_minimises_eq6() -> None:
    rng = np.random.default_rng(5)
    inv_var = 1 / rng.uniform(0.001, 0.2, size=40)
    widths = rng.uniform(0.05, 1.0, size=40)
    threshold = best_truncation(inv_var, widths, 0.5)
    dense = np.geomspace(np.sqrt(inv_var).min() / 2, np.sqrt(inv_var).max() * 2, 20_000)
    best_dense = truncation_objective(dense, inv_var, widths, 0.5).min()
    chosen = truncation_objective(np.array([threshold]), inv_var, widths, 0.5)[0]
    assert chosen <= best_dense * (1 + 1e-6)


def test_small_cells_fall_back_to_the_public_variance() -> None:
    cell = CellData.from_readings([[10.0, 20.0], [30.0], [5.0, 6.0, 7.0], [40.0]], 65.0)
    release = get_mean_mechanism("cummings", delta=1e-6).release(
        cell, 65.0, 1.0, RandomSource.seeded_for_tests(6)
    )
    assert release.parameters["initial_variance_fallback"]
    assert release.parameters["initial_variance"] == 0.25
    assert 0.0 <= release.value <= 65.0

"""The secret-routes maths (docs/math.md §14): the exact sampler's statistics, the tail and
threshold against brute force, contribution bounding against a plain transcription, the
interval's coverage, and the accountant against dp-accounting directly."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld

from stream_dp.dp.contribution_bound import bounded_cells, kept_pairs, rounded_means
from stream_dp.dp.grid_laplace import draw_many
from stream_dp.dp.laplace_tails import tail_width, upper_tail
from stream_dp.dp.noisy_mean import noisy_means
from stream_dp.dp.partition_selection import threshold_steps
from stream_dp.dp.randomness import RandomSource
from stream_dp.dp.secret_accounting import COUNT_STEPS, SUM_STEPS, SecretRoutesBudget
from stream_dp.secret_routes.params import SecretRoutesParams
from stream_dp.secret_routes.release import release_secret_window
from tests.unit.secret_routes.columns import crowd, window_columns


def pmf(z: np.ndarray, t: float) -> np.ndarray:
    q = math.exp(-1 / t)
    return (1 - q) / (1 + q) * np.exp(-np.abs(z) / t)


def brute_tail(m: int, t: float) -> float:
    z = np.arange(m, m + int(60 * t) + 50)
    return float(pmf(z, t).sum())


@pytest.mark.parametrize("scale", [Fraction(1, 2), Fraction(3), Fraction(25, 2)])
def test_sampler_matches_the_discrete_laplace_pmf(scale: Fraction) -> None:
    source = RandomSource.seeded_for_tests(7)
    z = draw_many(source, 40_000, scale)
    t = float(scale)
    values, counts = np.unique(z, return_counts=True)
    expected = pmf(values, t) * len(z)
    big = expected >= 20  # a chi-square over the well-filled values
    chi2 = float((((counts - expected) ** 2) / expected)[big].sum())
    assert chi2 < big.sum() + 6 * math.sqrt(2 * big.sum())
    q = math.exp(-1 / t)
    assert abs(z.var() - 2 * q / (1 - q) ** 2) < 0.05 * 2 * q / (1 - q) ** 2 + 0.01
    assert abs(z.mean()) < 6 * math.sqrt(2 * q / (1 - q) ** 2 / len(z)) + 1e-9


@pytest.mark.parametrize("t", [Fraction(1, 3), Fraction(2), Fraction(17, 3)])
def test_upper_tail_and_width_against_summing_the_pmf(t: Fraction) -> None:
    for m in range(-3, 12):
        assert upper_tail(m, t) == pytest.approx(brute_tail(m, float(t)), rel=1e-9, abs=1e-15)
    for p in (0.2, 0.0125, 1e-4, 1e-9):
        m = tail_width(p, t)
        assert brute_tail(m, float(t)) <= p * (1 + 1e-9)
        assert m == 1 or brute_tail(m - 1, float(t)) > p  # the least such width


def test_threshold_is_the_least_with_l0_tails_below_delta() -> None:
    scale = Fraction(7, 2)
    for cells in (1, 2, 3):
        t = threshold_steps(10, cells, 1e-4, scale)
        m = t - 10  # one vehicle's count is 10 steps here
        assert cells * brute_tail(m, 3.5) <= 1e-4 * (1 + 1e-9) < cells * brute_tail(m - 1, 3.5)


def test_kept_pairs_is_each_vehicles_busiest_cells_ties_by_cell() -> None:
    rng = np.random.default_rng(3)
    vehicle = rng.integers(0, 30, 400)
    cell = rng.integers(0, 12, 400)
    pairs = np.unique(np.stack([vehicle, cell], 1), axis=0)
    count = rng.integers(1, 4, len(pairs))
    for cells in (1, 2, 3):
        kept = kept_pairs(pairs[:, 0], pairs[:, 1], count, cells)
        for v in np.unique(pairs[:, 0]):
            mine = [(-int(count[i]), int(pairs[i, 1]), i) for i in np.flatnonzero(pairs[:, 0] == v)]
            chosen = {i for _, _, i in sorted(mine)[:cells]}
            assert {i for _, _, i in mine if kept[i]} == chosen


def test_bounded_cells_sums_rounded_clipped_means() -> None:
    vehicle = np.array([0, 0, 1, 2, 2])
    cell = np.array([0, 1, 0, 0, 1])
    count = np.array([3, 1, 2, 1, 1])
    total = np.array([300.0, 5.0, 60.0, -4.0, 1.0])  # means 100 (> U), 5, 30, -4 (< 0), 1
    out = bounded_cells(vehicle, cell, count, total, 65.0, 1, SUM_STEPS)
    # vehicle 0 keeps cell 0 (3 readings), vehicle 2 keeps cell 0 (tie: the first cell)
    assert out.cell.tolist() == [0] and out.vehicles.tolist() == [3]
    expected = rounded_means(np.array([3, 2, 1]), np.array([300.0, 60.0, -4.0]), 65.0, SUM_STEPS)
    assert expected.tolist() == [SUM_STEPS, round(30 / 65 * SUM_STEPS), 0]
    assert out.sum_steps.tolist() == [int(expected.sum())]


def test_interval_covers_the_true_mean_at_least_95_percent() -> None:
    budget = SecretRoutesBudget(14.0, 1e-6, 56, 1)
    eps_count, eps_sum = budget.cell_epsilons
    count_scale, sum_scale = COUNT_STEPS / eps_count, SUM_STEPS / eps_sum
    source = RandomSource.seeded_for_tests(11)
    upper, n, draws = 65.0, 120, 20_000
    for true_mean in (3.0, 30.0, 64.0):
        s_steps = round(true_mean / upper * SUM_STEPS) * n
        count = (n * COUNT_STEPS + draw_many(source, draws, count_scale)) / COUNT_STEPS
        total = (s_steps + draw_many(source, draws, sum_scale)) * upper / SUM_STEPS
        side = 0.05 / 4
        widths = (tail_width(side, count_scale) / COUNT_STEPS,
                  tail_width(side, sum_scale) * upper / SUM_STEPS)  # fmt: skip
        means = noisy_means(count, total, *widths, upper, upper / (2 * SUM_STEPS))
        truth = s_steps / n * upper / SUM_STEPS
        covered = np.mean((means.low <= truth) & (truth <= means.high))
        assert covered >= 0.95
        assert np.all(means.error_bar >= 0) and np.all(means.low <= means.mean)


def _composed(budget: SecretRoutesBudget, windows: int, interval: float) -> float:
    count, total = budget.cell_epsilons
    one = pld.from_discrete_laplace_mechanism(
        parameter=float(count) / COUNT_STEPS, sensitivity=COUNT_STEPS,
        value_discretization_interval=interval,
    ).compose(pld.from_discrete_laplace_mechanism(
        parameter=float(total) / SUM_STEPS, sensitivity=SUM_STEPS,
        value_discretization_interval=interval,
    ))  # fmt: skip
    return one.self_compose(budget.cells * windows).get_epsilon_for_delta(budget.composition_delta)


@pytest.mark.parametrize(("windows", "cells"), [(56, 1), (84, 2)])
def test_accountant_against_dp_accounting_directly(windows: int, cells: int) -> None:
    budget = SecretRoutesBudget(14.0, 1e-6, windows, cells)
    claimed = budget.period_epsilon(windows)
    selection = windows * -math.log1p(-budget.selection_delta)
    assert claimed <= 14.0
    assert claimed == pytest.approx(_composed(budget, windows, 1e-3) + selection, abs=1e-9)
    # a finer PLD grid (tighter pessimistic bound) stays below the claim; the budget is used
    assert _composed(budget, windows, 1e-4) + selection <= claimed + 1e-9
    assert claimed > 13.5
    assert budget.period_delta(windows) == pytest.approx(1e-6)
    # one window's pure epsilon, composed basically, bounds the PLD figure from above
    assert windows * budget.window_epsilon >= claimed
    count, total = budget.cell_epsilons
    assert budget.window_epsilon == pytest.approx(cells * float(count + total), abs=1e-8)


@pytest.mark.parametrize("budget_b", [0.5, 1.0, 2.0, 3.0, 7.3, 20.0])
@pytest.mark.parametrize("delta", [1e-6, 1e-9])
@pytest.mark.parametrize("windows", [1, 2, 3])
@pytest.mark.parametrize("cells", [1, 2, 4])
def test_few_windows_never_publish_more_than_b(budget_b: float, delta: float, windows: int,
                                               cells: int) -> None:  # fmt: skip
    """For few mechanisms the PLD's pessimistic grid exceeds basic composition; the claim is
    the smaller of the two, so it never exceeds B, and the basic sum bounds it."""
    budget = SecretRoutesBudget(budget_b, delta, windows, cells)
    for k in range(1, windows + 1):
        claimed = budget.period_epsilon(k)
        assert claimed <= budget_b
        assert claimed <= k * budget.window_epsilon * (1 + 1e-12)
        assert budget.period_delta(k) <= delta * (1 + 1e-12)


def covered(params: SecretRoutesParams, vehicles: int, value: float, draws: int, seed: int,
            ) -> float:  # fmt: skip
    """Share of releases (the real window release) whose interval holds the true mean
    ``value`` of ``vehicles`` vehicles; a cell not shown counts as a miss."""
    columns = window_columns(crowd("a", vehicles, value))
    source = RandomSource.seeded_for_tests(seed)
    return sum(
        any(c["mean_low"] <= value <= c["mean_high"] for c in release.cells)
        for release in (release_secret_window(0, columns, params, source, 1) for _ in range(draws))
    ) / draws  # fmt: skip


@pytest.mark.parametrize("vehicles", [7, 40])
def test_interval_coverage_is_tight_near_the_threshold(vehicles: int) -> None:
    """Count noise small (share 0.95): the sum's two tails at alpha/4 each leave ~97.5 %;
    widths taken at alpha/2 would leave ~95 % and fail here. 7 vehicles: T is ~5."""
    params = SecretRoutesParams(SecretRoutesBudget(4.0, 1e-6, 1, 1, count_share=0.95))
    assert 5 < params.threshold / COUNT_STEPS < vehicles + 1
    assert 0.97 <= covered(params, vehicles, 30.0, 6000, seed=3) <= 0.99


def test_interval_allows_for_each_vehicles_rounded_mean() -> None:
    """Noise nearly nil: 30 is 0.46 of a sum step off the grid, so only the half-step
    rounding term keeps the unrounded true mean inside the interval."""
    params = SecretRoutesParams(SecretRoutesBudget(2000.0, 1e-6, 1, 1))
    assert abs(30.0 / 65 * SUM_STEPS - round(30.0 / 65 * SUM_STEPS)) > 0.4
    assert covered(params, 200, 30.0, 300, seed=4) == 1.0

"""A vehicle below its cell's cap loses only its own share of the cell's ε (docs/math.md
§13.1, "The loss"): checked against the exact sampler's own grid, by brute force over
neighbouring means, also the float means the release computes (§4.2, "Float inputs")."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from stream_dp.dp.accurate_sum import grouped_sums
from stream_dp.dp.clip_mean import ClipMeanCombiner, ClippedSums, clipped_means
from stream_dp.dp.epsilon_grid import EPSILON_STEP
from stream_dp.dp.float_mean import sampler_sensitivity
from stream_dp.dp.individual_loss import entry_epsilons
from stream_dp.dp.noise import _plan, _round_to_grid

U = 65.0


def _largest_ratio(kept: int, cap: int, kept_sum: int, epsilon_mean: float, rng) -> float:
    """The largest log probability ratio of the sampler's output between neighbours that move
    one vehicle's ``kept`` readings from 0 to U, over random datasets: the index shift after
    rounding to the grid over the discrete Laplace's grid scale (§4.2)."""
    sensitivity = float(sampler_sensitivity(U, cap, kept_sum))
    plan = _plan(sensitivity, epsilon_mean)
    assert plan is not None
    worst = Fraction(0)
    for _ in range(200):
        rest = rng.uniform(0.0, U * (kept_sum - kept))  # the other readings' clipped sum
        low = float(rest / kept_sum)
        high = float((rest + U * kept) / kept_sum)
        shift = abs(_round_to_grid(high, plan.k) - _round_to_grid(low, plan.k))
        worst = max(worst, shift / plan.grid_scale)
    return float(worst)


@pytest.mark.parametrize("seed", range(6))
def test_a_vehicle_below_the_cap_loses_no_more_than_its_share_and_not_much_less(seed: int) -> None:
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 60, size=12)
    cap = int(np.sort(counts)[-3])  # two vehicles above the cap
    kept = np.minimum(counts, cap)
    kept_sum = int(kept.sum())
    epsilon = float(rng.integers(1, 300)) * EPSILON_STEP
    n = len(kept)
    own = entry_epsilons(np.full(n, epsilon), kept, np.full(n, cap), np.full(n, kept_sum), 1.0)
    for k, charged in zip(kept.tolist(), own.tolist(), strict=True):
        assert charged / EPSILON_STEP == round(charged / EPSILON_STEP)  # on the grid
        if k == cap:
            assert charged == epsilon  # the cell's own vehicle at the cap: the whole ε
            continue
        ratio = _largest_ratio(k, cap, kept_sum, epsilon, rng)
        assert ratio <= charged  # the sampler's privacy loss for this vehicle
        assert charged <= epsilon * k / cap + 2 * EPSILON_STEP  # its share, rounded up once
        assert charged < epsilon or epsilon * k / cap > epsilon - 2 * EPSILON_STEP


def test_the_brute_force_ratio_reaches_the_share_it_bounds() -> None:
    """The check above is not vacuous: the worst shift found is the vehicle's share of ε
    (within the grid's rounding), well above what a charge of half the share would allow."""
    rng = np.random.default_rng(7)
    ratio = _largest_ratio(10, 40, 400, 1.0, rng)
    assert 0.25 * 0.999 <= ratio <= 0.25 * 1.001


def test_the_variance_share_is_charged_whole_and_the_mean_share_in_part() -> None:
    epsilon, share = 1.0, 0.75  # the mean ε 0.75, the variance's 0.25
    kept = np.array([10, 5, 0])
    own = entry_epsilons(np.array([epsilon] * 3), kept, np.array([10] * 3), np.full(3, 15), share)
    assert own[0] == epsilon
    assert 0.25 + 0.75 * 0.5 <= own[1] <= 0.25 + 0.75 * 0.5 + EPSILON_STEP
    assert 0.25 <= own[2] <= 0.25 + EPSILON_STEP


def test_a_cell_with_nothing_kept_or_no_cap_costs_its_epsilon() -> None:
    own = entry_epsilons(np.array([0.5, 0.5]), np.array([3, 0]), np.array([0, 0]), np.zeros(2), 1.0)
    assert own.tolist() == [0.5, 0.5]


def _grid_loss(low: float, high: float, sensitivity: float, epsilon_mean: float) -> float:
    """The sampler's log probability ratio between inputs ``low`` and ``high`` given
    ``sensitivity``: their grid indices' distance over the discrete Laplace's scale (§4.2)."""
    plan = _plan(sensitivity, epsilon_mean)
    assert plan is not None
    shift = abs(_round_to_grid(high, plan.k) - _round_to_grid(low, plan.k))
    return float(shift / plan.grid_scale)


#: (vehicles, cap, ε): the issue's 12,000 vehicles at cap 4 (S 48,000, ε 1/128), and others
#: where a search found the old path losing more than ε at the cap.
FLOAT_CASES = [(12_000, 4, 1 / 128), (20_000, 1, 1.0), (5_000, 2, 0.5)]


@pytest.mark.parametrize(("n_vehicles", "cap", "epsilon"), FLOAT_CASES)
def test_the_charge_bounds_the_loss_of_the_float_means_the_release_computes(
    n_vehicles: int, cap: int, epsilon: float
) -> None:
    """One vehicle's kept readings go from 0 to U; the others' pair sums are random floats.
    The float means are the release's (accurate sum, one division), the sensitivity the
    combiner's: the loss on the sampler's grid never exceeds the vehicle's charge, at the cap
    (the whole ε) or below. The old path (a running sum, ``U top / S``) loses more than ε at
    the cap in a few of these cases (by up to ~4e-12 ε): the check is not vacuous."""
    old_over = 0
    for seed in range(200):
        rng = np.random.default_rng(seed)
        kept = np.full(n_vehicles, cap) if seed % 2 == 0 else rng.integers(1, cap + 1, n_vehicles)
        at_cap, below = rng.choice(n_vehicles, 2, replace=False)  # anywhere in the sum's order
        kept[at_cap], kept[below] = cap, max(cap - 1, 1)
        pair_low = rng.uniform(0.0, U, size=n_vehicles) * kept  # the pairs' float sums
        kept_sum = int(kept.sum())
        cell_kept = np.full(n_vehicles, kept_sum)
        own = entry_epsilons(np.full(n_vehicles, epsilon), kept, np.full(n_vehicles, cap),
                             cell_kept, 1.0)  # fmt: skip
        sums = ClippedSums(np.zeros(1), np.array([kept_sum]), np.array([cap]), np.array([kept_sum]))
        sensitivity = float(ClipMeanCombiner(U, epsilon).sampler_sensitivity(sums)[0])
        bounds = np.array([0, n_vehicles])
        for moved in (at_cap, below):
            low, high = pair_low.copy(), pair_low.copy()
            low[moved], high[moved] = 0.0, U * kept[moved]
            means = [clipped_means(grouped_sums(bounds, p), kept_sum)[0] for p in (low, high)]
            assert _grid_loss(*means, sensitivity, epsilon) <= own[moved]
            if moved == at_cap:  # the old path's loss at the cap
                old = [np.cumsum(p)[-1] / kept_sum for p in (low, high)]
                old_over += _grid_loss(*old, U * cap / kept_sum, epsilon) > epsilon
    assert old_over > 0

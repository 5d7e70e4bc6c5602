"""The variance's sampler sensitivity covers floating point (docs/math.md §4.2, "Float
inputs", the variance): checked against the bound of the argument in exact rationals, and
the formula against the exact variance of its float inputs."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from stream_dp.dp.float_variance import rounding_allowance, sampler_sensitivity
from tests.unit.release.test_float_mean_neighbours import one_cell_statistics

UNIT = Fraction(1, 2**53)
TINY = Fraction(1, 2**1075)  # half the smallest subnormal: one rounding's error near 0


def exact_sensitivity(upper: float, top: int, kept: int) -> Fraction:
    """§3.2's ``Delta_Var`` (Lemma III.3) in exact rationals."""
    u2 = Fraction(upper) ** 2
    if kept > 2 * top:
        return u2 * top * (kept - top) / kept**2
    return u2 / 4 if kept % 2 == 0 else u2 / 4 * (1 - Fraction(1, kept**2))


def per_neighbour_error(upper: float, top: int) -> Fraction:
    """``E`` of §4.2: the float variance's distance from the exact variance of its readings
    (``G = gamma_top``, ``e`` the relative error of ``fl(Q~/S)`` and of ``m``)."""
    u2 = Fraction(upper) ** 2
    gamma = top * UNIT / (1 - top * UNIT)
    e = (1 + gamma) * (1 + 2 * UNIT) * (1 + UNIT) - 1  # Sum2: 1.5 u (1 + 2^-26) <= 2 u
    square = u2 * ((1 + e) ** 2 * (1 + UNIT) - 1) + 2 * TINY  # fl(m m) against mu^2
    quotient = u2 * e + (2 + e) * TINY  # fl(Q~/S) against Q/S
    return (1 + UNIT) * (square + quotient) + UNIT * u2 / 4


CASES = [
    (65.0, 4, 48_000), (65.0, 1, 1), (65.0, 1, 2), (65.0, 1, 10**9), (65.0, 7, 7),
    (65.0, 7, 15), (0.1, 3, 1000), (1e-300, 5, 77), (2.0**-530, 2, 3), (2.0**-540, 9, 31),
    (1e150, 3, 5), (65.0, 10**6, 10**6 + 3), (123.456, 999, 10**7), (3.0, 2, 2**40 + 1),
]  # fmt: skip


@pytest.mark.parametrize(("upper", "top", "kept"), CASES)
def test_the_sampler_sensitivity_bounds_the_float_variances_movement(
    upper: float, top: int, kept: int
) -> None:
    given = sampler_sensitivity(upper, np.array([top]), np.array([kept]))[0]
    bound = exact_sensitivity(upper, top, kept) + 2 * per_neighbour_error(upper, top)
    assert Fraction(given) >= bound


def test_random_parameters_are_covered_and_the_allowance_is_a_few_roundings() -> None:
    rng = np.random.default_rng(5)
    upper = rng.uniform(1e-3, 1e3, size=300)
    top = rng.integers(1, 50, size=300)
    kept = rng.integers(1, 10**6, size=300)
    for u, t, k in zip(upper.tolist(), top.tolist(), kept.tolist(), strict=True):
        given = sampler_sensitivity(u, np.array([t]), np.array([k]))[0]
        assert Fraction(given) >= exact_sensitivity(u, t, k) + 2 * per_neighbour_error(u, t)
    allowance = rounding_allowance(upper, top) / upper**2
    assert np.all(allowance <= (8 * top + 33) * 2.0**-53)
    assert sampler_sensitivity(65.0, np.array([0]), np.array([0]))[0] == np.inf


def exact_variance(values: np.ndarray) -> Fraction:
    """The population variance of these floats in exact rationals."""
    exact = [Fraction(x) for x in values.tolist()]
    mean = sum(exact) / len(exact)
    return sum(x * x for x in exact) / len(exact) - mean * mean


def test_each_float_variance_is_within_e_of_its_readings_exact_variance() -> None:
    """The release's variance of one cell (its own path) against ``E`` in rationals: random
    readings, readings near the ends, and equal readings (variance 0), where a running sum
    of the squares drifts one way (88 ``E`` off at 20,000 readings of 64.9)."""
    rng = np.random.default_rng(11)
    for trial in range(24):
        upper, top = float(rng.uniform(0.5, 100.0)), int(rng.integers(1, 9))
        counts = rng.integers(1, top + 1, size=int(rng.integers(1, 60)))
        counts[0] = top
        values = rng.uniform(0.0, upper, size=int(counts.sum()))
        if trial % 2:  # near the extremes, where the variance is largest
            values = np.where(values < upper / 2, values * 1e-15, upper - values * 1e-15)
        variance = one_cell_statistics(values, counts)[0].variances[0]
        assert abs(Fraction(variance) - exact_variance(values)) <= per_neighbour_error(upper, top)
    for top, n_vehicles in ((1, 20_000), (4, 5_000)):
        counts = np.full(n_vehicles, top)
        variance = one_cell_statistics(np.full(n_vehicles * top, 64.9), counts)[0].variances[0]
        assert Fraction(variance) <= per_neighbour_error(65.0, top)

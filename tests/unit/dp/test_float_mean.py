"""The CLIP mean's sampler sensitivity covers floating point (docs/math.md §4.2, "Float
inputs"): checked against the bound of the argument in exact rationals."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from stream_dp.dp.float_mean import rounding_allowance, sampler_sensitivity, share_slack

UNIT = Fraction(1, 2**53)
TINY = Fraction(1, 2**1075)  # half the smallest subnormal: one rounding's error near 0


def growth(top: int) -> Fraction:
    """An upper bound of ``(1 + u)^(top - 1)``: ``1 + x + x^2`` with ``x = (top - 1) u``."""
    x = (top - 1) * UNIT
    return 1 + x + x * x


def movement_bound(upper: float, top: int, kept: int) -> Fraction:
    """The largest change of the float mean between neighbours (§4.2, "Float inputs"): one
    vehicle's float sum moves ``T`` by ``top U (1 + u)^(top - 1)``, and each neighbour's
    float mean lies within ``1.5 u`` (the sum) and ``u`` (the division) of ``U (1 + u)^(top
    - 1)``, or half a subnormal, of its exact mean."""
    mean_max = Fraction(upper) * growth(top)
    per_side = Fraction(3, 2) * UNIT * mean_max + UNIT * mean_max * (1 + Fraction(3, 2) * UNIT)
    return top * mean_max / kept + 2 * (per_side + TINY)


CASES = [
    (65.0, 4, 48_000), (65.0, 1, 1), (65.0, 1, 10**9), (65.0, 7, 7), (0.1, 3, 1000),
    (1e-300, 5, 77), (2.0**-1060, 2, 3), (1e300, 3, 5), (65.0, 10**6, 10**6 + 3),
    (123.456, 999, 10**7), (3.0, 2, 2**40 + 1),
]  # fmt: skip


@pytest.mark.parametrize(("upper", "top", "kept"), CASES)
def test_the_sampler_sensitivity_bounds_the_float_means_movement(
    upper: float, top: int, kept: int
) -> None:
    given = sampler_sensitivity(upper, np.array([top]), np.array([kept]))[0]
    assert Fraction(given) >= movement_bound(upper, top, kept)
    assert given > upper * top / kept  # the allowance is there


def test_random_parameters_are_covered_and_the_allowance_is_a_few_roundings_of_u() -> None:
    rng = np.random.default_rng(3)
    upper = rng.uniform(1e-3, 1e3, size=300)
    top = rng.integers(1, 50, size=300)
    kept = top * rng.integers(1, 10**6, size=300)
    for u, t, k in zip(upper.tolist(), top.tolist(), kept.tolist(), strict=True):
        given = sampler_sensitivity(u, np.array([t]), np.array([k]))[0]
        assert Fraction(given) >= movement_bound(u, t, k)
    allowance = rounding_allowance(upper, top) / upper
    assert np.all(allowance <= (top + 9) * 2.0**-52)


def test_nothing_kept_has_no_finite_sensitivity_and_no_cap_no_slack() -> None:
    assert sampler_sensitivity(65.0, np.array([0, 1]), np.array([0, 2]))[0] == np.inf
    slack = share_slack(np.array([0, 4]), np.array([0, 48_000]))
    assert slack[0] == 0.0
    assert slack[1] == pytest.approx(2.0**-40 + 12 * 12_000 * 2.0**-51, rel=1e-12)

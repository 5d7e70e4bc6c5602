"""Tests of LaplaceNoise: distribution, output grid, Mironov's attack, OpenDP cross-check."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from stream_dp.dp.noise import GRID_BITS, LaplaceNoise, _grid_to_float, _round_to_grid
from stream_dp.dp.randomness import RandomSource

ALPHA = 1e-6  # goodness-of-fit tests must not reject at this level


def _seeded(seed: int) -> LaplaceNoise:
    return LaplaceNoise(RandomSource.seeded_for_tests(seed))


def _is_multiple_of_pow2(x: float, k: int) -> bool:
    return (Fraction(x) / Fraction(2) ** k).denominator == 1


# -- distribution ----------------------------------------------------------------------------


def test_seeded_sample_matches_laplace() -> None:
    value, sensitivity, epsilon = 5.0, 2.0, 0.5
    noise = _seeded(11)
    b = noise.effective_scale(sensitivity, epsilon)
    n = 20_000
    x = np.array([noise.release(value, sensitivity, epsilon) for _ in range(n)]) - value
    # |X| ~ Exp(b): mean b, sd b.
    assert abs(np.mean(np.abs(x)) - b) <= 5 * b / math.sqrt(n)
    # E X^2 = 2 b^2, Var X^2 = E X^4 - (2 b^2)^2 = 24 b^4 - 4 b^4 = 20 b^4.
    assert abs(np.mean(x**2) - 2 * b**2) <= 5 * math.sqrt(20) * b**2 / math.sqrt(n)
    positives = int(np.sum(x > 0))
    assert abs(positives - n / 2) <= 5 * math.sqrt(n) / 2
    assert stats.kstest(x, stats.laplace(scale=b).cdf).pvalue > ALPHA


def test_secure_sample_matches_laplace() -> None:
    noise = LaplaceNoise()
    assert noise.source.is_seeded is False
    b = noise.effective_scale(1.0, 1.0)
    n = 3_000
    x = np.array([noise.release(-3.0, 1.0, 1.0) for _ in range(n)]) + 3.0
    assert abs(np.mean(np.abs(x)) - b) <= 6 * b / math.sqrt(n)
    assert stats.kstest(x, stats.laplace(scale=b).cdf).pvalue > ALPHA


@pytest.mark.parametrize(
    ("source", "epsilon", "n"),
    [
        (RandomSource.seeded_for_tests(21), 0.5, 40_000),  # compiled (laplace_kernel)
        (RandomSource(), 0.5, 20_000),
        (RandomSource.seeded_for_tests(22), 0.05, 3_000),  # every plan on the Python path
    ],
)
def test_release_many_matches_laplace(source: RandomSource, epsilon: float, n: int) -> None:
    rng = np.random.default_rng(23)
    values = rng.uniform(0.0, 65.0, n)
    sensitivity = 65.0 / 7  # one plan, so one scale: |X| ~ Exp(b)
    noise = LaplaceNoise(source)
    b = noise.effective_scale(sensitivity, epsilon)
    k = noise.grid_exponent(sensitivity, epsilon)
    assert k is not None
    out = noise.release_many(values, sensitivity, epsilon)
    grid_index = np.ldexp(out, -k)  # exact: a power-of-two scaling of normal floats
    assert np.array_equal(grid_index, np.round(grid_index))  # on the 2^k grid
    x = out - values  # exact up to rounding far below b
    assert abs(np.mean(np.abs(x)) - b) <= 5 * b / math.sqrt(n)
    assert abs(np.mean(x**2) - 2 * b**2) <= 5 * math.sqrt(20) * b**2 / math.sqrt(n)
    assert abs(int(np.sum(x > 0)) - n / 2) <= 5 * math.sqrt(n) / 2
    assert stats.kstest(x, stats.laplace(scale=b).cdf).pvalue > ALPHA


def test_release_many_keeps_values_of_zero_sensitivity() -> None:
    values = np.array([0.1, -0.0, 1e-310, -3.5, 1.7976931348623157e308])
    out = _seeded(24).release_many(values, np.array([0.0, 0.0, 0.0, 1.0, 0.0]), 0.5)
    kept = [0, 1, 2, 4]
    assert np.array_equal(out[kept], values[kept])
    assert np.signbit(out[1]) and out[3] != values[3]


def test_opendp_float_laplace_agrees() -> None:
    dp = pytest.importorskip("opendp.prelude")
    dp.enable_features("contrib")
    sensitivity, epsilon = 1.0, 0.8
    ours = _seeded(12)
    scale = ours.effective_scale(sensitivity, epsilon)
    space = dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float)
    theirs = dp.m.make_laplace(*space, scale)
    n = 2_000
    a = [ours.release(1.5, sensitivity, epsilon) for _ in range(n)]
    b = [theirs(1.5) for _ in range(n)]
    assert stats.ks_2samp(a, b).pvalue > ALPHA


# -- scale and grid --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sensitivity", "epsilon"), [(1.0, 1.0), (65.0, 0.1), (0.001, 8.0), (3.0, 1e-9)]
)
def test_effective_scale_accounts_for_rounding(sensitivity: float, epsilon: float) -> None:
    k = LaplaceNoise.grid_exponent(sensitivity, epsilon)
    assert k is not None
    grid = Fraction(2) ** k
    exact = (Fraction(sensitivity) + grid) / Fraction(epsilon)
    assert LaplaceNoise.effective_scale(sensitivity, epsilon) == float(exact)
    # The grid is far finer than both the sensitivity and the nominal scale.
    assert grid <= Fraction(sensitivity) * Fraction(2) ** -GRID_BITS
    assert grid <= Fraction(sensitivity) / Fraction(epsilon) * Fraction(2) ** -GRID_BITS
    assert grid > Fraction(sensitivity) / max(Fraction(epsilon), 1) * Fraction(2) ** (
        -GRID_BITS - 1
    )


@settings(max_examples=200, deadline=None)
@given(
    value=st.floats(allow_nan=False, allow_infinity=False),
    sensitivity=st.floats(min_value=1e-300, max_value=1e300),
    epsilon=st.floats(min_value=1e-6, max_value=1e3),
    seed=st.integers(0, 2**32),
)
def test_released_values_lie_on_the_grid(
    value: float, sensitivity: float, epsilon: float, seed: int
) -> None:
    noise = _seeded(seed)
    k = noise.grid_exponent(sensitivity, epsilon)
    assert k is not None and k >= -1074
    out = noise.release(value, sensitivity, epsilon)
    if math.isfinite(out):
        assert _is_multiple_of_pow2(out, k)


@settings(max_examples=300, deadline=None)
@given(value=st.floats(allow_nan=False, allow_infinity=False), k=st.integers(-1200, 1100))
def test_round_to_grid_is_exact_nearest(value: float, k: int) -> None:
    n = _round_to_grid(value, k)
    assert n == round(Fraction(value) / Fraction(2) ** k)  # Fraction rounds half to even


@settings(max_examples=300, deadline=None)
@given(n=st.integers(-(2**80), 2**80), k=st.integers(-1150, 900))
def test_grid_to_float_is_correctly_rounded(n: int, k: int) -> None:
    exact = Fraction(n) * Fraction(2) ** k
    try:
        expected = float(exact)
    except OverflowError:
        expected = math.copysign(math.inf, n)
    assert _grid_to_float(n, k) == expected


def test_extreme_magnitudes() -> None:
    noise = _seeded(13)
    assert math.isfinite(noise.release(1e300, 1.0, 1.0))
    tiny = noise.release(0.0, 5e-324, 1.0)  # grid 2^-1114 below the smallest subnormal
    assert math.isfinite(tiny) and abs(tiny) < 1e-300
    top = [noise.release(1.7976931348623157e308, 1e308, 0.5) for _ in range(50)]
    assert any(v == math.inf for v in top)  # overflow saturates instead of raising


# -- Mironov (2012) --------------------------------------------------------------------------


def _event_a(x: np.ndarray, j: int) -> np.ndarray:
    """|x| < 2^(j-2) and x not a multiple of 2^(j-53) (Mironov 2012, Sec. 4)."""
    scaled = np.ldexp(x, 53 - j)  # exact power-of-two scaling
    return (np.abs(x) < 2.0 ** (j - 2)) & (scaled != np.floor(scaled))


def _not_separated(count_a: int, count_b: int, epsilon: float) -> bool:
    """Neither count exceeds e^eps times the other plus 5 SE of sampling slack."""
    slack = 5 * math.sqrt(count_a + count_b + 1)
    e = math.exp(epsilon)
    return count_a <= e * count_b + slack and count_b <= e * count_a + slack


def test_mironov_event_does_not_separate_neighbours() -> None:
    j, sensitivity, epsilon = 0, 1.0, 1.0  # neighbours 0 and 2^j, scale ~ 1
    n = 20_000
    noise = _seeded(14)
    low = np.array([noise.release(0.0, sensitivity, epsilon) for _ in range(n)])
    high = np.array([noise.release(2.0**j, sensitivity, epsilon) for _ in range(n)])
    a_low, a_high = int(_event_a(low, j).sum()), int(_event_a(high, j).sum())
    assert _not_separated(a_low, a_high, epsilon)
    assert a_low == a_high == 0  # outputs lie on the 2^-40 grid, inside the 2^(j-53) one

    # A low-order-bit event that does occur: x * 2^-k odd and |x| < 2^(j-2).
    k = noise.grid_exponent(sensitivity, epsilon)
    assert k is not None

    def odd_low(x: np.ndarray) -> int:
        m = np.ldexp(x, -k)
        return int(np.sum((np.abs(x) < 2.0 ** (j - 2)) & (np.mod(m, 2) == 1)))

    b_low, b_high = odd_low(low), odd_low(high)
    assert b_low > 500 and b_high > 500
    assert _not_separated(b_low, b_high, epsilon)


def test_mironov_event_separates_textbook_sampler() -> None:
    """Negative control: the same event breaks float inverse-CDF Laplace (numpy)."""
    j, epsilon = 0, 1.0
    n = 20_000
    rng = np.random.RandomState(15)
    low = rng.laplace(0.0, 1.0 / epsilon, n)
    high = rng.laplace(2.0**j, 1.0 / epsilon, n)
    a_low, a_high = int(_event_a(low, j).sum()), int(_event_a(high, j).sum())
    assert a_low > 0.05 * n  # P(|x| < 1/4) ~ 0.22, most such floats are off the 2^-53 grid
    assert a_high == 0  # 1 + y with |1 + y| < 1/4 is exact (Sterbenz), a multiple of 2^-53
    assert not _not_separated(a_low, a_high, epsilon)


# -- arguments, reproducibility, batches -----------------------------------------------------


@pytest.mark.parametrize(
    ("value", "sensitivity", "epsilon", "name"),
    [
        (math.nan, 1.0, 1.0, "value"),
        (math.inf, 1.0, 1.0, "value"),
        (1.0, -1.0, 1.0, "sensitivity"),
        (1.0, math.nan, 1.0, "sensitivity"),
        (1.0, math.inf, 1.0, "sensitivity"),
        (1.0, 1.0, 0.0, "epsilon"),
        (1.0, 1.0, -0.5, "epsilon"),
        (1.0, 1.0, math.nan, "epsilon"),
        (1.0, 1.0, math.inf, "epsilon"),
    ],
)
def test_release_refuses_bad_arguments(
    value: float, sensitivity: float, epsilon: float, name: str
) -> None:
    with pytest.raises(ValueError, match=name):
        _seeded(0).release(value, sensitivity, epsilon)


def test_zero_sensitivity_returns_value_exactly() -> None:
    noise = _seeded(16)
    assert noise.release(0.1, 0.0, 1.0) == 0.1
    assert noise.effective_scale(0.0, 1.0) == 0.0
    assert noise.grid_exponent(0.0, 1.0) is None


def test_seeded_noise_reproduces() -> None:
    a = [_seeded(17).release(2.5, 1.0, 0.3) for _ in range(3)]
    assert a[0] == a[1] == a[2]
    first = _seeded(17)
    second = _seeded(17)
    xs = [first.release(2.5, 1.0, 0.3) for _ in range(50)]
    assert xs == [second.release(2.5, 1.0, 0.3) for _ in range(50)]
    assert len(set(xs)) == 50


def test_default_source_is_secure() -> None:
    assert LaplaceNoise().source.is_seeded is False
    assert LaplaceNoise(RandomSource.seeded_for_tests(1)).source.is_seeded is True


def test_release_many_broadcasts_and_matches_release() -> None:
    values = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    sens = np.array([0.5, 0.0, 2.0])
    out = _seeded(18).release_many(values, sens, 0.7)
    assert out.shape == (2, 3) and out.dtype == np.float64
    assert np.array_equal(out[:, 1], values[:, 1])  # sensitivity 0 keeps the value
    reference = _seeded(18)
    pairs = zip(values.ravel(), np.tile(sens, 2), strict=True)
    expected = [reference.release(v, s, 0.7) for v, s in pairs]
    assert np.array_equal(out.ravel(), np.array(expected))
    scalar = _seeded(18).release_many([1.0, 2.0], 1.0, 0.7)
    assert scalar.shape == (2,)


def test_release_many_refuses_bad_arguments() -> None:
    noise = _seeded(19)
    with pytest.raises(ValueError, match="values"):
        noise.release_many([1.0, math.nan], 1.0, 1.0)
    with pytest.raises(ValueError, match="sensitivities"):
        noise.release_many([1.0, 2.0], [1.0, -1.0], 1.0)
    with pytest.raises(ValueError, match="epsilon"):
        noise.release_many([1.0], 1.0, 0.0)

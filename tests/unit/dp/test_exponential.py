"""The exact exponential mechanism: base bound, privacy loss, output distribution."""

from __future__ import annotations

import math
from collections import Counter
from decimal import Decimal, localcontext
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from stream_dp.dp.exponential import (
    exponential_base,
    exponential_probabilities,
    sample_exponential,
)
from stream_dp.dp.randomness import RandomSource

ALPHA = 1e-4  # goodness-of-fit tests must not reject at this level (seeded: deterministic)


def _exp_neg_decimal(x: Fraction) -> Decimal:
    with localcontext() as ctx:
        ctx.prec = 80
        return (-(Decimal(x.numerator) / Decimal(x.denominator))).exp()


@given(
    epsilon=st.floats(min_value=1e-4, max_value=60.0, allow_nan=False),
    sensitivity=st.integers(min_value=1, max_value=20),
)
@settings(max_examples=60, deadline=None)
def test_base_bounds_the_exponential_from_above_and_spends_at_most_epsilon(
    epsilon: float, sensitivity: int
) -> None:
    base = exponential_base(epsilon, sensitivity)
    x = Fraction(epsilon) / (2 * sensitivity)
    exact = _exp_neg_decimal(x)
    assert Decimal(base.numerator) / Decimal(base.denominator) >= exact  # => loss <= epsilon
    assert base < 1
    # The loss actually spent, 2 Delta ln(1/b), is epsilon up to the 2^-32 rounding.
    spent = 2 * sensitivity * -math.log(float(base))
    assert spent <= epsilon * (1 + 1e-12)
    assert spent >= epsilon * (1 - 1e-7)


def test_probabilities_match_the_ideal_exponential_mechanism() -> None:
    scores, sizes, epsilon = [3, 0, 1, 5, 2], [2, 1, 4, 7, 1], 0.8
    exact = exponential_probabilities(scores, epsilon, sizes)
    ideal = [n * math.exp(-epsilon * s / 2) for s, n in zip(scores, sizes, strict=True)]
    total = sum(ideal)
    assert sum(exact) == 1
    for p, q in zip(exact, ideal, strict=True):
        assert float(p) == pytest.approx(q / total, rel=1e-8)


def test_probability_ratios_of_neighbouring_scores_stay_within_e_epsilon() -> None:
    # Neighbouring score vectors (each score moved by at most Delta = 1): output ratio <= e^eps.
    epsilon = 0.7
    first = exponential_probabilities([0, 1, 2, 3], epsilon, [1, 2, 3, 1])
    second = exponential_probabilities([1, 0, 3, 2], epsilon, [1, 2, 3, 1])
    bound = math.exp(epsilon)
    for p, q in zip(first, second, strict=True):
        assert float(p / q) <= bound and float(q / p) <= bound


@pytest.mark.parametrize("sensitivity", [1, 2])
def test_sample_frequencies_match_the_exact_distribution(sensitivity: int) -> None:
    scores, sizes, epsilon = [0, 1, 2, 3, 1], [1, 2, 3, 1, 0], 1.5
    target = exponential_probabilities(scores, epsilon, sizes, sensitivity)
    source = RandomSource.seeded_for_tests(20240601 + sensitivity)
    n = 20_000
    counts = Counter(
        sample_exponential(scores, epsilon, source, sizes, sensitivity) for _ in range(n)
    )
    assert counts[4] == 0  # zero-size blocks are never chosen
    observed = [counts[i] for i in range(4)]
    expected = [float(p) * n for p in target[:4]]
    assert stats.chisquare(observed, expected).pvalue > ALPHA


def test_far_blocks_are_rare_but_reachable_with_large_score_ranges() -> None:
    # Scores up to 1000 and a tiny epsilon: weights stay exact, sampling terminates quickly.
    scores = list(range(1001))
    source = RandomSource.seeded_for_tests(5)
    draws = [sample_exponential(scores, 0.004, source) for _ in range(1_500)]
    # A truncated geometric law with ratio b = e^{-0.002}: compare the mean of the draws.
    b = math.exp(-0.002)
    weights = [b**s for s in scores]
    mean = sum(s * w for s, w in zip(scores, weights, strict=True)) / sum(weights)
    sd = math.sqrt(
        sum((s - mean) ** 2 * w for s, w in zip(scores, weights, strict=True)) / sum(weights)
    )
    assert abs(sum(draws) / len(draws) - mean) <= 4 * sd / math.sqrt(len(draws))


@pytest.mark.parametrize(
    ("scores", "sizes", "sensitivity", "epsilon"),
    [
        ([0, 1], [1], 1, 1.0),
        ([0, 1], [0, 0], 1, 1.0),
        ([0, 1], [1, -1], 1, 1.0),
        ([0, 1], None, 0, 1.0),
        ([0, 1], None, 1, 0.0),
        ([0, 1], None, 1, math.inf),
    ],
)
def test_invalid_arguments_are_refused(
    scores: list[int], sizes: list[int] | None, sensitivity: int, epsilon: float
) -> None:
    with pytest.raises(ValueError):
        sample_exponential(scores, epsilon, RandomSource.seeded_for_tests(0), sizes, sensitivity)

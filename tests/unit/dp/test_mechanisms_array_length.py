"""m_UB rules of 003: median, eq. (9), m^(eps) (Lemmas V.2-V.4) and the surrogate (19)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dp.dp.mechanisms.array_length import (
    choose_length,
    eq9_length,
    median_length,
    minimax_error,
    opt_length,
    paper_surrogate_length,
    surrogate_error,
    surrogate_length,
)

counts_strategy = st.lists(st.integers(min_value=1, max_value=60), min_size=1, max_size=30)
U = 65.0


def _real_minimax_error(counts: list[int], m: float, epsilon: float) -> float:
    """eq. (15) with m treated as a real number (the setting of Lemma V.2's proof)."""
    kept = sum(min(c, m) for c in counts)
    return U * (1 - kept / sum(counts)) + U * m / (epsilon * kept)


@given(counts=counts_strategy)
def test_median_has_half_of_the_counts_at_or_above_it(counts: list[int]) -> None:
    med = median_length(counts)
    half = math.ceil(len(counts) / 2)
    assert sum(c >= med for c in counts) >= half > sum(c > med for c in counts)


@given(counts=counts_strategy)
def test_eq9_is_the_smallest_integer_maximiser(counts: list[int]) -> None:
    candidates = range(min(counts), max(counts) + 1)
    values = [sum(min(c, m) for c in counts) / math.sqrt(m) for m in candidates]
    best = max(values)
    expected = next(m for m, v in zip(candidates, values, strict=True) if v >= best * (1 - 1e-12))
    assert eq9_length(counts) == expected


@given(counts=counts_strategy, epsilon=st.floats(min_value=0.01, max_value=5.0))
@settings(max_examples=80, deadline=None)
def test_lemma_v2_a_minimiser_of_eq15_lies_in_the_counts(counts: list[int], epsilon: float) -> None:
    chosen = opt_length(counts, epsilon)
    assert chosen in counts
    best_on_counts = float(minimax_error(counts, chosen, U, epsilon))
    # A fine scan over real m in [m_*, m^*] never does better.
    scan = np.linspace(min(counts), max(counts), 2001)
    best_on_scan = min(_real_minimax_error(counts, float(m), epsilon) for m in scan)
    assert best_on_counts <= best_on_scan * (1 + 1e-12)
    # And it is the smallest integer minimiser.
    integers = range(min(counts), max(counts) + 1)
    values = [minimax_error(counts, m, U, epsilon) for m in integers]
    assert chosen == next(m for m, v in zip(integers, values, strict=True) if v == min(values))


@given(counts=counts_strategy)
@settings(max_examples=60, deadline=None)
def test_lemma_v3_m_eps_is_non_decreasing_in_epsilon(counts: list[int]) -> None:
    epsilons = np.geomspace(1e-4, 50.0, 120)
    chosen = [opt_length(counts, float(e)) for e in epsilons]
    assert all(a <= b for a, b in zip(chosen, chosen[1:], strict=False))


@given(counts=counts_strategy)
@settings(max_examples=60, deadline=None)
def test_corollary_v1_extreme_epsilons_give_the_extreme_counts(counts: list[int]) -> None:
    total, n = sum(counts), len(counts)
    eps_min = min(counts) / (n * total)
    eps_max = (total / (n * min(counts))) ** 2
    assert opt_length(counts, eps_min) == min(counts)
    assert opt_length(counts, eps_max) == max(counts)


@given(counts=counts_strategy)
def test_surrogate_is_the_exact_integer_minimiser_of_problem_19(counts: list[int]) -> None:
    integers = range(min(counts), max(counts) + 1)
    values = [surrogate_error(counts, m) for m in integers]
    expected = next(m for m, v in zip(integers, values, strict=True) if v == min(values))
    assert surrogate_length(counts) == expected
    # The paper's KKT procedure (Lemma VI.2, steps (i)-(ii)) is never better.
    assert surrogate_error(counts, paper_surrogate_length(counts)) >= min(values)


def test_paper_surrogate_procedure_misses_the_kink_at_the_mean() -> None:
    # Erratum: E-bar is piecewise linear; its minimum can sit at ceil(m-bar), not at a boundary.
    counts = [10] + [1] * 9  # sum 19, m^* = 10, m-bar = 1.9, q = 1.9 not an integer
    assert paper_surrogate_length(counts) == 1  # step (ii): best boundary
    assert surrogate_length(counts) == 2
    assert surrogate_error(counts, 2) < surrogate_error(counts, 1) < surrogate_error(counts, 10)
    assert surrogate_error(counts, 10) == 1  # the paper's remark: E-bar(m^*) = 1


def test_minimax_error_matches_eq15_by_hand() -> None:
    counts = [4, 2, 1]
    # m = 2: sum Gamma = 5, sum m = 7.
    assert minimax_error(counts, 2, 10.0, 0.5) == Fraction(10) * (1 - Fraction(5, 7)) + Fraction(
        10 * 2
    ) / (Fraction(1, 2) * 5)


@pytest.mark.parametrize("choice", ["nope", 0, -3, True, 2.5])
def test_unknown_rules_are_refused(choice: object) -> None:
    with pytest.raises(ValueError, match="m_ub"):
        choose_length(choice, [1, 2, 3], 1.0)  # type: ignore[arg-type]


def test_explicit_lengths_pass_through() -> None:
    assert choose_length(7, [1, 2, 9], 1.0) == 7
    assert choose_length(7, [1, 2, 3], 1.0) == 3  # capped at m^*
    assert choose_length("median", [5, 1, 3, 9], 1.0) == 5

"""Stated sensitivities and worst-case biases against brute force on tiny instances.

Neighbours differ in one vehicle's readings; readings range over a grid in [0, U]. Every
estimator here is non-decreasing in each reading and (for the biases) the error is a sum of
per-reading terms extreme at 0 or U, so the grid {0, U} is exhaustive; a 3-point grid is
used as well where cheap.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dp.dp.mechanisms.akmv import clipped_sum_mean
from stream_dp.dp.mechanisms.array_averaging import (
    estimate,
    exact_sensitivity,
    stated_sensitivity,
    worst_case_bias,
)
from stream_dp.dp.mechanisms.base import CellData
from stream_dp.dp.mechanisms.baseline import baseline_sensitivity
from stream_dp.dp.mechanisms.clip import clipped_mean
from stream_dp.dp.mechanisms.cummings import final_stage
from stream_dp.dp.mechanisms.grouping import array_means, bestfit, group, wraparound
from stream_dp.dp.mechanisms.levy import influence_factor, projected_mean
from stream_dp.dp.mechanisms.worst_case_optimal import (
    optimal_threshold,
    projected_estimate,
    projection_bounds,
    sensitivity_of,
)
from stream_dp.dp.mechanisms.worst_case_optimal import (
    worst_case_bias as wco_bias,
)

U = 65.0
Estimator = Callable[[list[np.ndarray]], float]


def _evaluate(counts: Sequence[int], grid: Sequence[float], estimator: Estimator) -> np.ndarray:
    """The estimator on every dataset, as an array with one axis per reading."""
    bounds = np.cumsum([0, *counts])
    values = []
    for flat in itertools.product(grid, repeat=int(bounds[-1])):
        x = np.array(flat)
        values.append(estimator([x[a:b] for a, b in itertools.pairwise(bounds)]))
    return np.array(values).reshape([len(grid)] * int(bounds[-1]))


def brute_sensitivity(counts: Sequence[int], grid: Sequence[float], estimator: Estimator) -> float:
    """max over vehicles l and the others' data of the range of f over l's readings."""
    table = _evaluate(counts, grid, estimator)
    bounds = np.cumsum([0, *counts])
    return max(
        float(np.ptp(table, axis=tuple(range(a, b))).max()) for a, b in itertools.pairwise(bounds)
    )


def brute_bias(counts: Sequence[int], grid: Sequence[float], estimator: Estimator) -> float:
    """max over datasets of |estimator - true mean|."""
    errors = _evaluate(
        counts, grid, lambda r: estimator(r) - float(np.concatenate(r).sum() / sum(counts))
    )
    return float(np.abs(errors).max())


def _cell(readings: list[np.ndarray]) -> CellData:
    return CellData.from_readings(readings, U)


tiny_counts = st.lists(st.integers(min_value=1, max_value=4), min_size=1, max_size=4).filter(
    lambda c: sum(c) <= 8
)


@given(counts=tiny_counts)
@settings(max_examples=25, deadline=None)
def test_baseline_sensitivity_eq2(counts: list[int]) -> None:
    brute = brute_sensitivity(counts, [0.0, U], lambda r: float(np.concatenate(r).mean()))
    assert brute == pytest.approx(baseline_sensitivity(np.array(counts), U), rel=1e-12)


@given(counts=tiny_counts, data=st.data())
@settings(max_examples=25, deadline=None)
def test_clip_sensitivity_and_bias(counts: list[int], data: st.DataObject) -> None:
    kept = np.array([data.draw(st.integers(min_value=0, max_value=c)) for c in counts])
    if kept.sum() == 0:
        kept[0] = 1
    brute = brute_sensitivity(counts, [0.0, U], lambda r: clipped_mean(_cell(r), kept))
    assert brute == pytest.approx(U * kept.max() / kept.sum(), rel=1e-12)  # eq. (9)
    bias = brute_bias(counts, [0.0, U], lambda r: clipped_mean(_cell(r), kept))
    assert bias == pytest.approx(U * (1 - kept.sum() / sum(counts)), rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("fill", ["readings", "user-mean"])
@given(counts=tiny_counts, data=st.data())
@settings(max_examples=20, deadline=None)
def test_array_averaging_sensitivities_and_worst_case_bias(
    fill: str, counts: list[int], data: st.DataObject
) -> None:
    m_ub = data.draw(st.integers(min_value=min(counts), max_value=max(counts)))
    for strategy in ("bestfit", "wraparound"):
        grouping = group(strategy, counts, m_ub)

        def f(r: list[np.ndarray], g=grouping) -> float:
            return estimate(g, _cell(r), fill)  # type: ignore[arg-type]

        brute = brute_sensitivity(counts, [0.0, U], f)
        assert brute == pytest.approx(exact_sensitivity(grouping, U), rel=1e-12)
        assert brute <= stated_sensitivity(grouping, U) * (1 + 1e-12)
        if strategy == "bestfit":  # eq. (4) is attained: the top vehicle fills an array alone
            assert brute == pytest.approx(U / grouping.n_arrays, rel=1e-12)
        bias = worst_case_bias(grouping, np.array(counts), U, fill)  # type: ignore[arg-type]
        assert brute_bias(counts, [0.0, U], f) == pytest.approx(bias, rel=1e-12, abs=1e-12)


def test_wraparound_stated_sensitivity_is_loose() -> None:
    # 003 states 2U/K; the split vehicle of A1 = (v0, v0, v1), A2 = (v1, v2, v2) moves f by U/3.
    grouping = wraparound([2, 2, 2], 3)
    brute = brute_sensitivity(
        [2, 2, 2], [0.0, U / 2, U], lambda r: estimate(grouping, _cell(r), "readings")
    )
    assert brute == pytest.approx(U / 3)
    assert stated_sensitivity(grouping, U) == pytest.approx(U)


def test_lemma_v1_bias_with_fully_filled_arrays() -> None:
    counts = [5, 3, 3, 2, 1]
    grouping = wraparound(counts, 3)  # sum Gamma = 12 = 4 * 3: nothing dropped
    assert grouping.n_arrays * 3 == 12
    expected = U * (1 - 12 / sum(counts))
    assert worst_case_bias(grouping, np.array(counts), U, "readings") == pytest.approx(expected)
    # Filling with user means (003 Sec. IV-A) can only lower the worst-case bias.
    assert worst_case_bias(grouping, np.array(counts), U, "user-mean") < expected


@pytest.mark.parametrize(
    ("strategy", "counts"), [("bestfit", [3, 2, 1, 1]), ("wraparound", [3, 2, 2, 2])]
)
@pytest.mark.parametrize(("low", "high"), [(10.0, 30.0), (0.0, U), (20.0, 20.5)])
def test_projected_array_means_sensitivity_eq6(
    strategy: str, counts: list[int], low: float, high: float
) -> None:
    grouping = group(strategy, counts, 3)
    brute = brute_sensitivity(
        counts,
        [0.0, U],
        lambda r: projected_mean(array_means(grouping, _cell(r), "readings"), low, high),
    )
    stated = influence_factor(grouping) * (high - low) / grouping.n_arrays
    assert brute <= stated * (1 + 1e-12)
    if strategy == "bestfit":
        assert brute == pytest.approx(stated, rel=1e-12)


@pytest.mark.parametrize("fill", ["readings", "user-mean"])
@pytest.mark.parametrize("epsilon", [0.3, 0.7, 1.0, 2.5])
def test_worst_case_optimal_sensitivity_and_bias(fill: str, epsilon: float) -> None:
    counts = np.array([3, 1, 1, 1])
    threshold = optimal_threshold(counts, U, epsilon)
    low, high = projection_bounds(counts, U, threshold)

    def f(r: list[np.ndarray]) -> float:
        return projected_estimate(_cell(r), U, low, high, fill)  # type: ignore[arg-type]

    grid = [0.0, U / 3, U]
    assert brute_sensitivity(counts.tolist(), grid, f) == pytest.approx(
        sensitivity_of(counts, low, high), rel=1e-12, abs=1e-12
    )
    assert brute_bias(counts.tolist(), grid, f) == pytest.approx(
        wco_bias(counts, U, low, high), rel=1e-12, abs=1e-12
    )


def test_worst_case_optimal_threshold_and_eq12() -> None:
    counts = np.array([8, 4, 2, 1, 1])
    assert optimal_threshold(counts, U, 1.0) == U * 4  # ceil(2/1) = 2nd largest of U m_l
    assert optimal_threshold(counts, U, 0.5) == U * 1  # 4th largest
    assert optimal_threshold(counts, U, 0.39) == 0.0  # eps < 2/L = 0.4
    threshold = optimal_threshold(counts, U, 1.0)
    low, high = projection_bounds(counts, U, threshold)
    total = counts.sum()
    # Corrected eq. (12): (sum_l max((U m_l - T)/2, 0) + max_l min(T, U m_l) / eps) / sum m.
    expected = (np.maximum((U * counts - threshold) / 2, 0).sum() + threshold / 1.0) / total
    assert wco_bias(counts, U, low, high) + sensitivity_of(counts, low, high) / 1.0 == (
        pytest.approx(expected)
    )


@pytest.mark.parametrize("threshold", [10.0, 100.0, 4 * U])
def test_akmv_sensitivity_eq15(threshold: float) -> None:
    counts = [4, 2, 1, 1]
    brute = brute_sensitivity(
        counts, [0.0, U], lambda r: clipped_sum_mean(_cell(r).sums, np.array(counts), threshold)
    )
    assert brute == pytest.approx(min(threshold, U * max(counts)) / sum(counts), rel=1e-12)
    assert brute <= threshold / sum(counts) * (1 + 1e-12)


@pytest.mark.parametrize("initial", [(0.3, 0.05, 0.02), (0.5, 1.0, 0.25), (0.9, 0.01, 0.0)])
def test_cummings_final_stage_sensitivity(initial: tuple[float, float, float]) -> None:
    counts = np.array([3, 2, 2, 1])

    def stage(r: list[np.ndarray]) -> float:
        p = _cell(r).user_means() / U
        return U * final_stage(p, counts, 10, initial, 0.5, 0.05).estimate

    zeros = [np.zeros(c) for c in counts]
    claimed = U * final_stage(np.zeros(4), counts, 10, initial, 0.5, 0.05).sensitivity
    assert brute_sensitivity(counts.tolist(), [0.0, U], stage) == pytest.approx(claimed, rel=1e-12)
    assert stage(zeros) >= 0.0


def test_bestfit_grouping_for_brute_force_instances_is_nontrivial() -> None:
    # Guard: the parametrised instances above really exercise shared arrays.
    assert bestfit([3, 2, 1, 1], 3).n_arrays == 3  # v1 and v2 share an array
    assert wraparound([3, 2, 2, 2], 3).influence == 2  # v2 is split over two kept arrays
    assert wraparound([2, 2, 2], 3).influence == 2


@given(
    counts=st.lists(st.integers(min_value=1, max_value=50), min_size=1, max_size=15),
    epsilon=st.floats(min_value=0.05, max_value=5.0),
)
@settings(max_examples=40, deadline=None)
def test_theorem_iii1_threshold_solves_the_linear_program_8(
    counts: list[int], epsilon: float
) -> None:
    """001 (8): min sum alpha_l + S / eps s.t. U m_l - 2 alpha_l <= S, alpha, S >= 0."""
    from scipy.optimize import linprog

    m = np.array(counts)
    n = m.size
    cost = np.concatenate([np.ones(n), [1 / epsilon]])
    constraints = np.hstack([-2 * np.eye(n), -np.ones((n, 1))])
    solution = linprog(cost, A_ub=constraints, b_ub=-U * m, bounds=[(0, None)] * (n + 1))
    assert solution.success
    threshold = optimal_threshold(m, U, epsilon)
    low, high = projection_bounds(m, U, threshold)
    ours = (wco_bias(m, U, low, high) + sensitivity_of(m, low, high) / epsilon) * m.sum()
    assert ours == pytest.approx(solution.fun, rel=1e-7, abs=1e-7)

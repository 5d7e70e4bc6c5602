"""Repeated releases of one mechanism on one fixed cell, without redoing the fixed work.

For a fixed cell and epsilon, everything a mechanism computes before its first random draw
(groupings, m_UB, array means, projections, the rank blocks of a private quantile) is the
same in every run. :func:`prepare` computes it once with the mechanism modules' own public
functions and returns a :data:`Sampler` that performs only the random steps, in the same
order and with the same samplers as ``mechanism.release``: for the same ``RandomSource``
state it returns exactly ``mechanism.release(cell, upper, epsilon, source).value``
(tests/test_experiment_mean_estimators.py checks this bit for bit). Other mechanisms (CLIP)
fall back to ``release`` itself.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import numpy as np

from stream_dp.dp.exponential import sample_exponential
from stream_dp.dp.mechanisms.akmv import AkmvMean, clipped_sum_mean, target_rank
from stream_dp.dp.mechanisms.array_averaging import ArrayAveraging, estimate, stated_sensitivity
from stream_dp.dp.mechanisms.base import CellData, MeanMechanism, clamp, laplace_release
from stream_dp.dp.mechanisms.baseline import BaselineMean, baseline_sensitivity
from stream_dp.dp.mechanisms.cummings import CummingsMean, cohorts, final_stage
from stream_dp.dp.mechanisms.cummings_initial import (
    initial_mean,
    initial_mean_accuracy,
    initial_std,
)
from stream_dp.dp.mechanisms.grouping import array_means
from stream_dp.dp.mechanisms.levy import (
    LevyMean,
    concentration_radius,
    influence_factor,
    private_interval,
    projected_mean,
)
from stream_dp.dp.mechanisms.private_quantile import grid_point, rank_blocks
from stream_dp.dp.mechanisms.quantile import QuantileMean, tail_count
from stream_dp.dp.mechanisms.worst_case_optimal import (
    WorstCaseOptimalMean,
    optimal_threshold,
    projected_estimate,
    projection_bounds,
    sensitivity_of,
)
from stream_dp.dp.randomness import RandomSource

#: One run: a RandomSource in, the published (clamped) value out.
Sampler = Callable[[RandomSource], float]


def prepare(mechanism: MeanMechanism, cell: CellData, upper: float, epsilon: float) -> Sampler:
    """A sampler equal in distribution *and* draw-for-draw to ``mechanism.release``."""
    cell.check_bounds(upper)
    data = cell.participants()
    if isinstance(mechanism, BaselineMean):
        mean = float(data.sums.sum() / data.counts.sum())
        return _laplace(mean, baseline_sensitivity(data.counts, upper), epsilon, upper)
    if isinstance(mechanism, ArrayAveraging):
        grouping = mechanism.grouping_for(data.counts, epsilon)
        value = estimate(grouping, data, mechanism.fill)
        return _laplace(value, stated_sensitivity(grouping, upper), epsilon, upper)
    if isinstance(mechanism, WorstCaseOptimalMean):
        threshold = optimal_threshold(data.counts, upper, epsilon)
        low, high = projection_bounds(data.counts, upper, threshold)
        value = projected_estimate(data, upper, low, high, mechanism.fill)
        return _laplace(value, sensitivity_of(data.counts, low, high), epsilon, upper)
    if isinstance(mechanism, LevyMean):
        return _levy(mechanism, data, upper, epsilon)
    if isinstance(mechanism, QuantileMean):
        return _quantile(mechanism, data, upper, epsilon)
    if isinstance(mechanism, AkmvMean):
        threshold_of = akmv_threshold_sampler(data, upper, epsilon)
        total = int(data.counts.sum())

        def akmv(source: RandomSource) -> float:
            threshold = threshold_of(source)
            value = clipped_sum_mean(data.sums, data.counts, threshold)
            raw, _ = laplace_release(value, threshold / total, epsilon / 2, source)
            return clamp(raw, upper)

        return akmv
    if isinstance(mechanism, CummingsMean):
        return _cummings(mechanism, data, upper, epsilon)
    return lambda source: mechanism.release(cell, upper, epsilon, source).value


def _laplace(value: float, sensitivity: float, epsilon: float, upper: float) -> Sampler:
    def draw(source: RandomSource) -> float:
        return clamp(laplace_release(value, sensitivity, epsilon, source)[0], upper)

    return draw


class _Quantile:
    """Smith's private quantile of fixed values (``private_quantile`` with cached blocks)."""

    def __init__(self, values: np.ndarray, lo: float, hi: float) -> None:
        self.sizes, self.starts = rank_blocks(values, lo, hi)
        self.lo, self.hi = lo, hi

    def draw(self, rank: int, epsilon: float, source: RandomSource, sensitivity: int = 1) -> float:
        scores = [abs(i - rank) for i in range(len(self.sizes))]
        block = sample_exponential(
            scores, epsilon, source, sizes=self.sizes, sensitivity=sensitivity
        )
        index = self.starts[block] + source.randbelow(self.sizes[block])
        return grid_point(index, self.lo, self.hi)


def akmv_threshold_sampler(
    data: CellData, upper: float, epsilon: float
) -> Callable[[RandomSource], float]:
    """AKMV's private threshold T (001 Sec. IV-A step 2) for a fixed cell."""
    quantile = _Quantile(data.sums, 0.0, upper * float(data.counts.max()))
    rank = target_rank(data.n_vehicles, epsilon / 2)
    return lambda source: quantile.draw(rank, epsilon / 2, source)


def _levy(mechanism: LevyMean, data: CellData, upper: float, epsilon: float) -> Sampler:
    half = epsilon / 2
    grouping = mechanism.grouping_for(data.counts, half)
    means = array_means(grouping, data, mechanism.fill)
    tau = concentration_radius(upper, grouping.n_arrays, grouping.m_ub, mechanism.gamma)
    rank_sensitivity = max(1, grouping.influence)
    factor = influence_factor(grouping)

    def draw(source: RandomSource) -> float:
        low, high, _ = private_interval(
            means, upper, tau, half, source, sensitivity=rank_sensitivity
        )
        sensitivity = factor * (high - low) / grouping.n_arrays
        raw, _ = laplace_release(projected_mean(means, low, high), sensitivity, half, source)
        return clamp(raw, upper)

    return draw


def _quantile(mechanism: QuantileMean, data: CellData, upper: float, epsilon: float) -> Sampler:
    half, quarter = epsilon / 2, epsilon / 4
    grouping = mechanism.grouping_for(data.counts, half)
    means = array_means(grouping, data, mechanism.fill)
    k = grouping.n_arrays
    cut = tail_count(mechanism.variant, k, epsilon, Fraction(str(mechanism.q)))
    rank_sensitivity = max(1, grouping.influence)
    factor = influence_factor(grouping)
    quantile = _Quantile(means, 0.0, upper)

    def draw(source: RandomSource) -> float:
        low, high = sorted(
            quantile.draw(rank, quarter, source, rank_sensitivity) for rank in (cut, k - cut)
        )
        sensitivity = factor * (high - low) / k
        raw, _ = laplace_release(projected_mean(means, low, high), sensitivity, half, source)
        return clamp(raw, upper)

    return draw


def _cummings(mechanism: CummingsMean, data: CellData, upper: float, epsilon: float) -> Sampler:
    delta = float(mechanism.delta)  # type: ignore[arg-type]
    groups = cohorts(data.counts, epsilon, mechanism.prefix_limit)
    first = np.array([data.partial_sum(v, 0, 1) for v in groups.mean.tolist()]) / upper
    k = groups.k_variance
    firsts = np.array([data.partial_sum(v, 0, k) / (k * upper) for v in groups.variance.tolist()])
    final_means = data.user_means()[groups.final] / upper
    final_counts = data.counts[groups.final]

    def draw(source: RandomSource) -> float:
        p0 = initial_mean(first, epsilon, source)
        p0 = 0.5 if p0 is None else p0
        alpha = initial_mean_accuracy(p0, groups.mean.size, epsilon, mechanism.beta)
        sigma = initial_std(firsts, epsilon, delta, source)
        var_p = 0.25 if sigma is None else min(sigma**2, 0.25)
        stage = final_stage(
            final_means, final_counts, data.n_vehicles, (p0, alpha, var_p), epsilon, mechanism.beta
        )
        raw, _ = laplace_release(upper * stage.estimate, upper * stage.sensitivity, epsilon, source)
        return clamp(raw, upper)

    return draw

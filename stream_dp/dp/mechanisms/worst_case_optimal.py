"""The worst-case-error-optimal clipping of 001 (Thm III.1), with Lap(Delta / eps).

``T_eps`` = the ceil(2/eps)-th largest of {U m_l} (0 if eps < 2/L). Every reading of
vehicle l is projected onto ``[a_l, b_l]`` with ``a_l = max((U m_l - T)/(2 m_l), 0)`` and
``b_l = min((U m_l + T)/(2 m_l), U)``; the estimator is ``sum of projections / sum m``
(001 eq. (4)), with sensitivity ``max_l m_l (b_l - a_l) / sum m = max_l min(T, U m_l) / sum m``
(eq. (6)/(14)); if T = 0 the estimator is the constant U/2 and no noise is needed.

Worst-case error (001 Lemma III.1 / eq. (12)), ``E = (sum_l m_l a_l + T / eps) / sum m``
for this symmetric strategy. Errata: eq. (12) prints ``(U m_l - T)/(2 m_l)`` where the sum
over the m_l readings gives ``(U m_l - T)/2``, and ``min_l min{T, U m_l}`` where eq. (6)
gives ``max_l``; and eq. (5) (Lemma III.1) sums ``max{a, U - b}`` per reading, which
overstates the bias of asymmetric intervals: the exact value is
``max(sum a, sum (U - b)) / sum m`` (:func:`worst_case_bias`), equal for symmetric ones.

``fill="user-mean"`` (001 Sec. IV-D pre-processing) projects each vehicle's mean and
needs aggregates only; ``fill="readings"`` projects every reading, so vehicles with
``U m_l > T`` need all their readings stored.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from stream_dp.dp.mechanisms.base import (
    CellData,
    Fill,
    FloatArray,
    IntArray,
    MeanMechanism,
    MeanRelease,
    check_fill,
    laplace_mean_release,
)
from stream_dp.dp.randomness import RandomSource


def optimal_threshold(counts: IntArray, upper: float, epsilon: float) -> float:
    """001: T_eps, the ceil(2/eps)-th largest of {U m_l}; 0 when ceil(2/eps) > L (eps < 2/L)."""
    rank = math.ceil(Fraction(2) / Fraction(epsilon))
    if rank > counts.size:
        return 0.0
    return float(upper * np.sort(counts)[::-1][rank - 1])


def projection_bounds(
    counts: IntArray, upper: float, threshold: float
) -> tuple[FloatArray, FloatArray]:
    """001 Thm III.1: per vehicle ``(a_l, b_l)``."""
    m = counts.astype(np.float64)
    low = np.maximum((upper * m - threshold) / (2 * m), 0.0)
    high = np.minimum((upper * m + threshold) / (2 * m), upper)
    return low, high


def projected_estimate(
    cell: CellData, upper: float, low: FloatArray, high: FloatArray, fill: Fill
) -> float:
    """001 eq. (4): ``sum_l sum_j Pi_[a_l, b_l](x_j) / sum m`` (or ``m_l Pi(mu_l)`` per vehicle)."""
    total = float(cell.counts.sum())
    if fill == "user-mean":
        return float((cell.counts * np.clip(cell.user_means(), low, high)).sum() / total)
    parts = []
    for v, (a, b) in enumerate(zip(low.tolist(), high.tolist(), strict=True)):
        if a <= 0.0 and b >= upper:  # the identity on [0, U]: the stored sum is exact
            parts.append(float(cell.sums[v]))
        else:
            readings = cell.first_readings(v, int(cell.counts[v]))
            parts.append(float(np.clip(readings, a, b).sum()))
    return float(sum(parts) / total)


def sensitivity_of(counts: IntArray, low: FloatArray, high: FloatArray) -> float:
    """001 eq. (6): ``max_l m_l (b_l - a_l) / sum m``."""
    return float((counts * (high - low)).max() / counts.sum())


def worst_case_bias(counts: IntArray, upper: float, low: FloatArray, high: FloatArray) -> float:
    """Exact max over [0, U]-datasets of ``|f - f_bar|``: ``max(sum m a, sum m (U - b)) / sum m``.

    ``x - Pi_[a,b](x)`` ranges over ``[-a, U - b]`` and the sum is linear in each reading.
    """
    total = float(counts.sum())
    return float(max((counts * low).sum(), (counts * (upper - high)).sum()) / total)


@dataclass(frozen=True)
class WorstCaseOptimalMean(MeanMechanism):
    """001 Thm III.1 projection with threshold T_eps, then Laplace with the full eps."""

    fill: Fill = "user-mean"
    name: str = "worst-case-optimal"

    def __post_init__(self) -> None:
        check_fill(self.fill)

    def _release(
        self, cell: CellData, upper: float, epsilon: float, source: RandomSource
    ) -> MeanRelease:
        data = cell.participants()
        threshold = optimal_threshold(data.counts, upper, epsilon)
        low, high = projection_bounds(data.counts, upper, threshold)
        bias = worst_case_bias(data.counts, upper, low, high)
        parameters = {
            "threshold": threshold,
            "projected_vehicles": int(np.sum((low > 0) | (high < upper))),
            "fill": self.fill,
            "worst_case_bias": bias,
            "vehicles": data.n_vehicles,
        }
        return laplace_mean_release(
            self.name,
            projected_estimate(data, upper, low, high, self.fill),
            sensitivity_of(data.counts, low, high),
            epsilon,
            upper,
            source,
            parameters,
            worst_case_bias=bias,
        )

    def _prefix_needed(self, counts: IntArray, epsilon: float) -> IntArray:
        if self.fill == "user-mean":
            return np.zeros(counts.size, dtype=np.int64)
        threshold = optimal_threshold(counts, 1.0, epsilon)  # T scales with U: compare U m_l > T
        return np.where(counts > threshold, counts, 0).astype(np.int64)

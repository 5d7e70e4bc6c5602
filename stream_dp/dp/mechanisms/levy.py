"""LEVY (003 Sec. III-D): arrays, a private interval (Algorithm 3), projected array means.

1. BESTFIT arrays with m_UB from eq. (9) (grouping and m_UB rule selectable).
2. Concentration radius ``tau = U sqrt(log(2 K / gamma) / (2 m_UB))``, eq. (7).
3. PRIVATEINTERVAL (Algorithm 3) with budget eps/2: bins of width tau over [0, U],
   each array mean snapped to its nearest bin midpoint, cost
   ``c(x) = max(#{mu_i < x}, #{mu_i > x})``, midpoint sampled with probability
   proportional to ``exp(-(eps/2) c(x) / 2)`` = the paper's ``exp(-eps c(x) / 4)``,
   then ``[a, b] = [max(0, mu - 3 tau / 2), min(mu + 3 tau / 2, U)]``.
4. ``f_Levy = (1/K) sum_i Pi_[a,b](A-bar_i)`` plus ``Lap(Delta / (eps/2))`` with
   ``Delta = (b - a)/K``, eq. (6) (times 2 under WRAPAROUND, as for ARRAY-AVERAGING).

Total eps by basic composition. Errata handled: Algorithm 3 line 3 prints
``mu_i <- min_x |A_i - x|`` (a distance); the text means the nearest midpoint (argmin).
"U/tau bins" is read as ``ceil(U/tau)`` bins of width tau, the last one cut at U.
Under WRAPAROUND one vehicle can move two array means, so the cost's sensitivity is the
vehicles' maximal array count (the paper does not say).

Prefix: as ARRAY-AVERAGING (aggregates suffice with ``fill="user-mean"``).
"""

from __future__ import annotations

import math
from abc import abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np

from stream_dp.dp.exponential import sample_exponential
from stream_dp.dp.mechanisms.array_based import ArrayMeanMechanism
from stream_dp.dp.mechanisms.base import (
    CellData,
    Fill,
    FloatArray,
    MeanRelease,
    laplace_mean_release,
)
from stream_dp.dp.mechanisms.grouping import Grouping, Strategy, array_means
from stream_dp.dp.randomness import RandomSource


def concentration_radius(upper: float, n_arrays: int, m_ub: int, gamma: float) -> float:
    """003 eq. (7): ``tau = U sqrt(log(2 K / gamma) / (2 m_UB))``."""
    return upper * math.sqrt(math.log(2 * n_arrays / gamma) / (2 * m_ub))


def bin_midpoints(upper: float, tau: float) -> FloatArray:
    """Midpoints of ceil(U / tau) bins of width tau covering [0, U] (last one cut at U)."""
    n_bins = max(1, math.ceil(upper / tau))
    left = tau * np.arange(n_bins, dtype=np.float64)
    right = np.minimum(left + tau, upper)
    right[-1] = upper
    return (left + right) / 2


def interval_costs(means: FloatArray, midpoints: FloatArray) -> list[int]:
    """Algorithm 3 lines 3-4: snap each mean to its nearest midpoint, then c(x) per midpoint."""
    nearest = np.sort(np.argmin(np.abs(means[:, None] - midpoints[None, :]), axis=1))
    positions = np.arange(midpoints.size)
    below = np.searchsorted(nearest, positions, side="left")  # #{mu_i < x}
    above = means.size - np.searchsorted(nearest, positions, side="right")  # #{mu_i > x}
    return np.maximum(below, above).astype(int).tolist()


def private_interval(
    means: FloatArray,
    upper: float,
    tau: float,
    epsilon: float,
    source: RandomSource,
    sensitivity: int = 1,
) -> tuple[float, float, float]:
    """003 Algorithm 3 with budget ``epsilon``: returns ``(a, b, mu_hat)``."""
    midpoints = bin_midpoints(upper, tau)
    costs = interval_costs(np.asarray(means, dtype=np.float64), midpoints)
    centre = float(midpoints[sample_exponential(costs, epsilon, source, sensitivity=sensitivity)])
    return max(0.0, centre - 1.5 * tau), min(centre + 1.5 * tau, upper), centre


def projected_mean(means: FloatArray, low: float, high: float) -> float:
    """(1/K) sum_i Pi_[a,b](A-bar_i), 003 Sec. III-D/E."""
    return float(np.clip(means, low, high).mean())


def influence_factor(grouping: Grouping) -> int:
    """The paper's multiplier of (b - a)/K: 2 under WRAPAROUND, 1 under BESTFIT."""
    return 2 if grouping.strategy == "wraparound" else 1


#: ``(a, b, parameters)``: a private interval and the choices made to find it.
Interval = tuple[float, float, dict[str, Any]]


def interval_sensitivity(grouping: Grouping, low: float, high: float) -> float:
    """003 eq. (6): ``Delta = (b - a)/K`` of the projected mean (times 2 under WRAPAROUND)."""
    return influence_factor(grouping) * (high - low) / grouping.n_arrays


class ProjectedArrayMean(ArrayMeanMechanism):
    """LEVY and QUANTILE: a private interval ``[a, b]`` of the array means at half the
    budget, then ``f = (1/K) sum_i Pi_[a,b](A-bar_i)`` plus Laplace at the other half.

    Subclasses implement :meth:`_interval`.
    """

    def mean_epsilon(self, epsilon: float) -> float:
        """eps/2 for the interval, eps/2 for the mean (basic composition)."""
        return epsilon / 2

    @abstractmethod
    def _interval(
        self, grouping: Grouping, means: FloatArray, upper: float, eps: float, source: RandomSource
    ) -> Interval:
        """``(a, b, parameters)`` from the array means, spending eps/2 of the total ``eps``."""

    def _release(
        self, cell: CellData, upper: float, epsilon: float, source: RandomSource
    ) -> MeanRelease:
        data = cell.participants()
        half = self.mean_epsilon(epsilon)
        grouping = self.grouping_for(data.counts, half)
        means = array_means(grouping, data, self.fill)
        low, high, own = self._interval(grouping, means, upper, epsilon, source)
        parameters = {
            **self.array_parameters(grouping),
            **own,
            "interval": (low, high),
            "vehicles": data.n_vehicles,
        }
        return laplace_mean_release(
            self.name,
            projected_mean(means, low, high),
            interval_sensitivity(grouping, low, high),
            half,
            upper,
            source,
            parameters,
            epsilon_spent=epsilon,
        )


@dataclass(frozen=True)
class LevyMean(ProjectedArrayMean):
    """LEVY with confidence parameter gamma of eq. (7)."""

    gamma: float = 0.2
    m_ub: str | int = "eq9"
    grouping: Strategy = "bestfit"
    fill: Fill = "user-mean"
    name: str = "levy"

    def __post_init__(self) -> None:
        if not 0 < self.gamma < 1:
            raise ValueError(f"gamma must lie in (0, 1), got {self.gamma!r}")
        super().__post_init__()

    def _interval(
        self, grouping: Grouping, means: FloatArray, upper: float, eps: float, source: RandomSource
    ) -> Interval:
        half = eps / 2
        tau = concentration_radius(upper, grouping.n_arrays, grouping.m_ub, self.gamma)
        low, high, centre = private_interval(
            means, upper, tau, half, source, sensitivity=max(1, grouping.influence)
        )
        own = {"gamma": self.gamma, "tau": tau, "interval_centre": centre, "interval_epsilon": half}
        return low, high, own

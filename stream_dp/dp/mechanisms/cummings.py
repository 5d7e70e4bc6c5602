"""Cummings, Feldman, McMillan, Talwar (2022), Algorithm 2, public-size user-level (eps, delta)-DP.

Readings are scaled from [0, U] to [0, 1]; the result and its sensitivity are scaled back.
Vehicles are sorted by count, descending (ties by index), and split into three disjoint
cohorts (public, from the counts):

* the ``floor(n/10)`` vehicles with the fewest readings -> ``p0`` by Sec. 6.1 (eps-DP);
* the ``L = min(ceil(ln(n)/eps), floor(3n/5))`` vehicles with the most readings ->
  ``sigma_p^2`` by Sec. 6.2 / Algorithm 5 on the means of their first ``k = min(k_L, C)``
  readings ((eps, delta)-DP; ``C`` the readings stored per pair, see below); Theorem 4.1
  requires L <= 3n/5;
* the rest, ``i in [L+1, 9n/10]``, for the final estimate (lines 5-14):
  ``sigma_i^2 = p0 (1 - p0) / k_i + (1 - 1/k_i) sigma_p^2``,
  ``[a_i, b_i] = [p0 - alpha - f_i, p0 + alpha + f_i]`` intersected with [0, 1],
  ``T* = argmin_T`` eq. (6), ``w_i = min(1/sigma_i^2, T/sigma_i) / sum_j (...)``,
  release ``sum_i w_i Pi_[a_i,b_i](p_i) + Lap(Lambda / eps)``,
  ``Lambda = max_i w_i (b_i - a_i)``.

Each cohort's data is used once, so by parallel composition the whole is (eps, delta)-DP;
everything between the three uses is post-processing of private outputs and public counts.

Choices where 002 leaves a free parameter: the concentration function is the sub-Gaussian
union bound ``f_i = sigma_i sqrt(2 ln(2 n / beta))`` (it satisfies Theorem 4.3's
``sigma_k <= f <= 2 sigma_k sqrt(log(n/beta))`` up to constants); ``beta`` is a parameter;
if a cohort is empty or Algorithm 5 keeps no bin, the public fallbacks ``p0 = 1/2`` and
``sigma_p^2 = 1/4`` (the largest variance on [0, 1]) are used. Errata: Algorithm 2 line 9
mixes sums to 8n/10 and 9n/10 and drops the ``1/eps^2`` of eq. (6); eq. (6) is used over
the final cohort. ``T*`` is found numerically (log-spaced search between the kinks 1/sigma_i
with local refinement); its exact optimality does not affect privacy.

Within the stored prefix (``prefix_limit = C``, the readings the engine keeps per (window,
cell, vehicle); None = whole arrays): Algorithm 2 uses each variance-cohort vehicle's first
``k_L`` readings, ``k_L`` the smallest count in that cohort, but only the first ``C`` are
stored, so a cell whose ``L`` busiest vehicles all have more than ``C`` readings (a depot, a
1 Hz tracker) could not be released. We use ``k = min(k_L, C)``. Privacy: ``k`` is a function
of the public counts and the public ``C`` only, so which readings enter is fixed before any
value is looked at; each cohort vehicle still gives exactly one value (the mean of its first
``k`` readings, in [0, 1]) and changing one vehicle's data moves one ``|Y_i|`` between two
bins, so Algorithm 5's (eps, delta) argument holds for any fixed ``k >= 1`` and the parallel
composition above is unchanged. Accuracy: the mean of ``k`` readings has variance
``sigma_p^2 + E[p(1 - p)]/k``, so a smaller ``k`` can only overestimate ``sigma_p^2``: the
intervals ``[a_i, b_i]`` widen (more noise, less truncation bias), never narrow.

Prefix: the smallest cohort needs its first reading, the largest its first k readings
(only where that is not all of them); the rest needs aggregates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from stream_dp.dp.mechanisms.base import (
    CellData,
    FloatArray,
    IntArray,
    MeanMechanism,
    MeanRelease,
    laplace_mean_release,
)
from stream_dp.dp.mechanisms.cummings_initial import (
    initial_mean,
    initial_mean_accuracy,
    initial_std,
)
from stream_dp.dp.mechanisms.grouping import processing_order
from stream_dp.dp.randomness import RandomSource

_MIN_VARIANCE = 1e-12  # floor of sigma_i^2 so that weights stay finite (post-processing)


@dataclass(frozen=True)
class Cohorts:
    """Vehicle indices of the three cohorts of Algorithm 2 and the variance cohort's k."""

    variance: IntArray
    final: IntArray
    mean: IntArray
    k_variance: int


def cohorts(counts: IntArray, epsilon: float, prefix_limit: int | None = None) -> Cohorts:
    """Split vehicles by count (descending): top L, middle, bottom floor(n/10).

    ``k_variance = min(k_L, prefix_limit)`` (module docstring: within the stored prefix)."""
    order = processing_order(counts)
    n = order.size
    n_mean = n // 10
    n_variance = min(math.ceil(math.log(n) / epsilon), (3 * n) // 5)
    variance = order[:n_variance]
    k = int(counts[variance].min()) if variance.size else 0
    if prefix_limit is not None:
        k = min(k, prefix_limit)
    return Cohorts(
        variance=variance,
        final=order[n_variance : n - n_mean],
        mean=order[n - n_mean :],
        k_variance=k,
    )


def truncation_objective(
    thresholds: FloatArray, inv_var: FloatArray, widths: FloatArray, epsilon: float
) -> FloatArray:
    """002 eq. (6) at each T: ``[sum min(1/s^2, T^2) + max v^2 w^2 / eps^2] / (sum v)^2``.

    ``v = min(1/s^2, T/s)`` are the unnormalised truncated weights.
    """
    t = np.asarray(thresholds, dtype=np.float64).reshape(-1, 1)
    weights = np.minimum(inv_var, t * np.sqrt(inv_var))
    numerator = np.minimum(inv_var, t**2).sum(axis=1)
    numerator += (weights**2 * widths**2).max(axis=1) / epsilon**2
    return numerator / weights.sum(axis=1) ** 2


def best_truncation(inv_var: FloatArray, widths: FloatArray, epsilon: float) -> float:
    """T* of eq. (6) between the kinks ``T = 1/sigma_i`` (constant objective outside them)."""
    kinks = np.sqrt(inv_var)
    low, high = float(kinks.min()), float(kinks.max())
    if high <= low:
        return high
    grid = np.unique(np.concatenate([np.geomspace(low, high, 257), kinks]))
    for _ in range(3):  # local refinement around the best grid point
        i = int(np.argmin(truncation_objective(grid, inv_var, widths, epsilon)))
        left, right = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
        grid = np.linspace(left, right, 65)
    return float(grid[int(np.argmin(truncation_objective(grid, inv_var, widths, epsilon)))])


def weighted_estimate(
    p: FloatArray, inv_var: FloatArray, low: FloatArray, high: FloatArray, threshold: float
) -> tuple[float, float]:
    """Lines 10-14: ``(sum w_i Pi_[a_i,b_i](p_i), Lambda = max_i w_i (b_i - a_i))``."""
    raw = np.minimum(inv_var, threshold * np.sqrt(inv_var))
    weights = raw / raw.sum()
    return float((weights * np.clip(p, low, high)).sum()), float((weights * (high - low)).max())


@dataclass(frozen=True)
class FinalStage:
    """The final cohort's non-private estimate (in [0, 1] units), its Lambda and T*."""

    estimate: float
    sensitivity: float
    threshold: float


def final_stage(
    p: FloatArray,
    counts: IntArray,
    n_vehicles: int,
    initial: tuple[float, float, float],
    epsilon: float,
    beta: float,
) -> FinalStage:
    """Algorithm 2 lines 5-14 for the final cohort, given ``initial = (p0, alpha, sigma_p^2)``."""
    p0, alpha, var_p = initial
    k = counts.astype(np.float64)
    var_i = np.maximum(p0 * (1 - p0) / k + (1 - 1 / k) * var_p, _MIN_VARIANCE)
    spread = np.sqrt(var_i) * math.sqrt(2 * math.log(2 * n_vehicles / beta))
    low = np.maximum(p0 - alpha - spread, 0.0)
    high = np.minimum(p0 + alpha + spread, 1.0)
    threshold = best_truncation(1 / var_i, high - low, epsilon)
    estimate, sensitivity = weighted_estimate(p, 1 / var_i, low, high, threshold)
    return FinalStage(estimate=estimate, sensitivity=sensitivity, threshold=threshold)


@dataclass(frozen=True)
class CummingsMean(MeanMechanism):
    """002 Algorithm 2 with the Sec. 6 initial estimators; requires ``delta`` in (0, 1).

    ``prefix_limit``: ``C``, the readings stored per vehicle (public); None = all stored."""

    delta: float | None = None
    beta: float = 0.05
    prefix_limit: int | None = None
    name: str = "cummings"

    def __post_init__(self) -> None:
        if self.delta is None:
            raise ValueError("cummings requires delta (it is (epsilon, delta)-DP)")
        if not 0 < self.delta < 1:
            raise ValueError(f"cummings: delta must lie in (0, 1), got {self.delta!r}")
        if not 0 < self.beta < 1:
            raise ValueError(f"cummings: beta must lie in (0, 1), got {self.beta!r}")
        if self.prefix_limit is not None and self.prefix_limit < 1:
            raise ValueError(f"cummings: prefix_limit must be >= 1, got {self.prefix_limit!r}")

    def _release(
        self, cell: CellData, upper: float, epsilon: float, source: RandomSource
    ) -> MeanRelease:
        data = cell.participants()
        delta = float(self.delta)  # type: ignore[arg-type]
        groups = cohorts(data.counts, epsilon, self.prefix_limit)
        first = np.array([data.partial_sum(v, 0, 1) for v in groups.mean.tolist()]) / upper
        p0 = initial_mean(first, epsilon, source)
        p0 = 0.5 if p0 is None else p0
        alpha = initial_mean_accuracy(p0, groups.mean.size, epsilon, self.beta)
        k = groups.k_variance
        firsts = np.array(
            [data.partial_sum(v, 0, k) / (k * upper) for v in groups.variance.tolist()]
        )
        sigma = initial_std(firsts, epsilon, delta, source)
        var_p = 0.25 if sigma is None else min(sigma**2, 0.25)

        stage = final_stage(
            data.user_means()[groups.final] / upper,
            data.counts[groups.final],
            data.n_vehicles,
            (p0, alpha, var_p),
            epsilon,
            self.beta,
        )
        parameters = {
            "composition": "parallel",
            "initial_mean": p0,
            "initial_mean_accuracy": alpha,
            "initial_variance": var_p,
            "initial_variance_fallback": sigma is None,
            "truncation": stage.threshold,
            "cohort_sizes": (groups.variance.size, groups.final.size, groups.mean.size),
            "variance_k": k,
            "beta": self.beta,
            "initial_mean_epsilon": epsilon,
            "initial_variance_epsilon": epsilon,
            "initial_variance_delta": delta,
            "vehicles": data.n_vehicles,
        }
        return laplace_mean_release(
            self.name,
            upper * stage.estimate,
            upper * stage.sensitivity,
            epsilon,
            upper,
            source,
            parameters,
            delta_spent=delta,
        )

    def _prefix_needed(self, counts: IntArray, epsilon: float) -> IntArray:
        groups = cohorts(counts, epsilon, self.prefix_limit)
        need = np.zeros(counts.size, dtype=np.int64)
        need[groups.mean] = np.where(counts[groups.mean] > 1, 1, 0)
        k = groups.k_variance
        need[groups.variance] = np.where(counts[groups.variance] > k, k, 0)
        return need

"""AKMV: the clipping strategy of Amin et al. (2019, Sec. 3) as adapted in 001 Sec. IV-A.

Each vehicle is one item ``sigma_l = sum of its readings`` in ``[0, U m_l]``:

1. ``eps' = eps'' = eps/2`` (001 Sec. IV-C).
2. ``T`` = an eps'-DP estimate of the ceil(1/eps'')-th largest sigma_l: Smith's (2011)
   exponential-mechanism quantile over the public range ``[0, U m^*]``, target rank
   ``max(L - ceil(1/eps''), 0)`` values below (:mod:`.private_quantile`).
3. ``g_T = sum_l min(sigma_l, T) / sum m`` (001 eq. (13)) plus ``Lap(T / (eps'' sum m))``,
   sensitivity ``T / sum m`` (eq. (15)).

001 writes ceil(1/eps'') in Step 2 and ceil(2/eps'') a few lines later; Step 2 (Amin et
al.'s rule for noise ``T / eps''``) is used. The worst-case error is random (it depends on
T); ``parameters["worst_case_error_given_threshold"]`` is the integrand of 001's E_AKMV:
``(sum_l max(0, U m_l - T) + T / eps'') / sum m``. Needs aggregates only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from stream_dp.dp.mechanisms.base import (
    CellData,
    IntArray,
    MeanMechanism,
    MeanRelease,
    laplace_mean_release,
)
from stream_dp.dp.mechanisms.private_quantile import private_quantile
from stream_dp.dp.randomness import RandomSource


def target_rank(n_vehicles: int, epsilon_mean: float) -> int:
    """Values below the ceil(1/eps'')-th largest: ``max(L - ceil(1/eps''), 0)``."""
    return max(n_vehicles - math.ceil(1 / Fraction(epsilon_mean)), 0)


def clipped_sum_mean(sums: np.ndarray, counts: IntArray, threshold: float) -> float:
    """001 eq. (13): ``sum_l min(sigma_l, T) / sum m``."""
    return float(np.minimum(sums, threshold).sum() / counts.sum())


@dataclass(frozen=True)
class AkmvMean(MeanMechanism):
    """Amin et al.'s private-threshold clipping of per-vehicle sums."""

    name: str = "akmv"

    def _release(
        self, cell: CellData, upper: float, epsilon: float, source: RandomSource
    ) -> MeanRelease:
        data = cell.participants()
        eps_threshold, eps_mean = epsilon / 2, epsilon / 2
        total = int(data.counts.sum())
        rank = target_rank(data.n_vehicles, eps_mean)
        range_top = upper * float(data.counts.max())
        threshold = private_quantile(data.sums, rank, 0.0, range_top, eps_threshold, source)
        given = float(
            (np.maximum(0.0, upper * data.counts - threshold).sum() + threshold / eps_mean) / total
        )
        parameters = {
            "threshold": threshold,
            "target_rank": rank,
            "threshold_epsilon": eps_threshold,
            "worst_case_error_given_threshold": given,
            "vehicles": data.n_vehicles,
        }
        return laplace_mean_release(
            self.name,
            clipped_sum_mean(data.sums, data.counts, threshold),
            threshold / total,
            eps_mean,
            upper,
            source,
            parameters,
            epsilon_spent=epsilon,
        )

    def _prefix_needed(self, counts: IntArray, epsilon: float) -> IntArray:
        return np.zeros(counts.size, dtype=np.int64)

"""BASELINE (003 Sec. III-B): the plain mean plus Lap(Delta_f / eps).

``f = sum of all readings / sum_l m_l`` has user-level sensitivity
``Delta_f = U m^* / sum_l m_l``, eq. (2). No clipping, so the worst-case error is
``E|Lap| = Delta_f / eps``. Exact with aggregates only (count and sum per vehicle).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stream_dp.dp.mechanisms.base import (
    CellData,
    IntArray,
    MeanMechanism,
    MeanRelease,
    clamp,
    laplace_release,
)
from stream_dp.dp.randomness import RandomSource


def baseline_sensitivity(counts: IntArray, upper: float) -> float:
    """003 eq. (2): ``U m^* / sum_l m_l``."""
    return float(upper * counts.max() / counts.sum())


@dataclass(frozen=True)
class BaselineMean(MeanMechanism):
    """Laplace on the unclipped mean."""

    name: str = "baseline"

    def _release(
        self, cell: CellData, upper: float, epsilon: float, source: RandomSource
    ) -> MeanRelease:
        data = cell.participants()
        sensitivity = baseline_sensitivity(data.counts, upper)
        mean = float(data.sums.sum() / data.counts.sum())
        raw, scale = laplace_release(mean, sensitivity, epsilon, source)
        return MeanRelease(
            value=clamp(raw, upper),
            raw_value=raw,
            epsilon_spent=epsilon,
            delta_spent=0.0,
            sensitivity=sensitivity,
            worst_case_error=sensitivity / epsilon,
            parameters={"mean_epsilon": epsilon, "noise_scale": scale, "vehicles": data.n_vehicles},
            mechanism=self.name,
        )

    def _prefix_needed(self, counts: IntArray, epsilon: float) -> IntArray:
        return np.zeros(counts.size, dtype=np.int64)

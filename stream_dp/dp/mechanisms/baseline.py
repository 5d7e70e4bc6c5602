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
    laplace_mean_release,
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
        return laplace_mean_release(
            self.name,
            float(data.sums.sum() / data.counts.sum()),
            baseline_sensitivity(data.counts, upper),
            epsilon,
            upper,
            source,
            {"vehicles": data.n_vehicles},
            worst_case_bias=0.0,  # unbiased: the error is E|Lap| alone
        )

    def _prefix_needed(self, counts: IntArray, epsilon: float) -> IntArray:
        return np.zeros(counts.size, dtype=np.int64)

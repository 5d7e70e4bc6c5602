"""CLIP mean of the composition paper (docs/math.md §3.5, §7.2).

Each vehicle keeps its first Gamma'_l readings (``CellData.kept_counts``, chosen by
CLIP-USER and the pseudo-user post-step from the public occupancy); the clipped mean
``sum of kept readings / S`` (``S = sum_l Gamma'_l``, ``top = max_l Gamma'_l``) has
sensitivity ``U top / S`` (eq. (9)) and gets ``Lap(U top / S / eps)``. Worst-case error:
bias ``U (1 - S/M)`` (Thm IV.1, ``M = sum_l m_l``) plus ``U top / (S eps)``.

Prefix: a vehicle with ``0 < Gamma'_l < m_l`` needs its first Gamma'_l readings stored;
fully kept or suppressed vehicles need only aggregates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from stream_dp.dp.grid_error import mean_bias, mean_sensitivity
from stream_dp.dp.mechanisms.base import (
    CellData,
    IntArray,
    MeanMechanism,
    MeanRelease,
    check_epsilon,
    laplace_mean_release,
)
from stream_dp.dp.randomness import RandomSource


def clipped_mean(cell: CellData, kept: IntArray) -> float:
    """Mean of the first ``kept[l]`` readings of every vehicle."""
    total = sum(cell.partial_sum(v, 0, int(k)) for v, k in enumerate(kept.tolist()) if k > 0)
    return float(total / kept.sum())


@dataclass(frozen=True)
class ClipMean(MeanMechanism):
    """Laplace on the CLIP-USER-clipped mean; ``kept_counts=None`` means nothing clipped."""

    name: str = "clip"

    def _release(
        self, cell: CellData, upper: float, epsilon: float, source: RandomSource
    ) -> MeanRelease:
        kept = cell.counts if cell.kept_counts is None else cell.kept_counts
        kept_total, top, total = int(kept.sum()), int(kept.max()), int(cell.counts.sum())
        if kept_total == 0:
            raise ValueError("clip: every reading of the cell is suppressed (S = 0): no release")
        bias = float(mean_bias(upper, kept_total, total))
        return laplace_mean_release(
            self.name,
            clipped_mean(cell, kept),
            float(mean_sensitivity(upper, top, kept_total)),
            epsilon,
            upper,
            source,
            {"kept": kept_total, "total": total, "top": top, "worst_case_bias": bias},
            worst_case_bias=bias,
        )

    def prefix_needed(
        self, counts: ArrayLike, epsilon: float, kept_counts: ArrayLike | None = None
    ) -> IntArray:
        """Gamma'_l where ``0 < Gamma'_l < m_l``, else 0."""
        check_epsilon(epsilon)
        counts_arr = np.asarray(counts, dtype=np.int64).reshape(-1)
        if kept_counts is None:
            return np.zeros(counts_arr.size, dtype=np.int64)
        kept = np.asarray(kept_counts, dtype=np.int64).reshape(-1)
        return np.where(kept < counts_arr, kept, 0).astype(np.int64)

    def _prefix_needed(self, counts: IntArray, epsilon: float) -> IntArray:
        return np.zeros(counts.size, dtype=np.int64)

"""CLIP mean of the composition paper as a mean mechanism (docs/math.md §3.5, §7.2).

The one-cell use of :mod:`stream_dp.dp.clip_mean`, which the window release calls with all
cells at once. Each vehicle keeps its first Gamma'_l readings (``CellData.kept_counts``,
chosen by CLIP-USER and the pseudo-user post-step from the public occupancy); the clipped
mean ``sum of kept readings / S`` (``S = sum_l Gamma'_l``, ``top = max_l Gamma'_l``) has
sensitivity ``U top / S`` (eq. (9)) and gets ``Lap(U top / S / eps)``, the sampler given eq.
(9) plus the float rounding allowance (§4.2, "Float inputs"; the reported ``sensitivity``).
Worst-case error: bias ``U (1 - S/M)`` (Thm IV.1, ``M = sum_l m_l``) plus that sensitivity
over ``eps``.

Prefix: a vehicle with ``0 < Gamma'_l < m_l`` needs its first Gamma'_l readings stored;
fully kept or suppressed vehicles need only aggregates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from stream_dp.dp.accurate_sum import grouped_sums
from stream_dp.dp.clip_mean import ClipMeanCombiner, ClippedSums
from stream_dp.dp.mechanisms.base import (
    CellData,
    IntArray,
    MeanMechanism,
    MeanRelease,
    check_epsilon,
    noisy_mean_release,
)
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.dp.randomness import RandomSource


def clipped_sums(cell: CellData, kept: IntArray) -> ClippedSums:
    """The cell's :class:`ClippedSums` (one cell): the sum of the first ``kept[l]`` readings
    of every vehicle (the accurate sum of the vehicles' float sums, as the window release
    forms it: docs/math.md §4.2, "Float inputs"), S, top and M."""
    own = [cell.partial_sum(v, 0, int(k)) for v, k in enumerate(kept.tolist()) if k > 0]
    kept_sum = grouped_sums(np.array([0, len(own)]), np.array(own, dtype=np.float64))[0]
    return ClippedSums(
        np.array([kept_sum], dtype=np.float64),
        np.array([kept.sum()], dtype=np.int64),
        np.array([kept.max()], dtype=np.int64),
        np.array([cell.counts.sum()], dtype=np.int64),
    )


def clipped_mean(cell: CellData, kept: IntArray) -> float:
    """Mean of the first ``kept[l]`` readings of every vehicle (eq. (6))."""
    return float(clipped_sums(cell, kept).means[0])


@dataclass(frozen=True)
class ClipMean(MeanMechanism):
    """Laplace on the CLIP-USER-clipped mean; ``kept_counts=None`` means nothing clipped."""

    name: str = "clip"

    def _release(
        self, cell: CellData, upper: float, epsilon: float, source: RandomSource
    ) -> MeanRelease:
        sums = clipped_sums(cell, cell.counts if cell.kept_counts is None else cell.kept_counts)
        kept_total, top, total = int(sums.kept[0]), int(sums.top[0]), int(sums.total[0])
        if kept_total == 0:
            raise ValueError("clip: every reading of the cell is suppressed (S = 0): no release")
        combiner, noise = ClipMeanCombiner(upper, epsilon), LaplaceNoise(source)
        bias = float(combiner.bias(sums)[0])
        return noisy_mean_release(
            self.name,
            float(combiner.noisy_means(sums, noise)[0]),
            float(combiner.noise_scale(sums, noise)[0]),
            float(combiner.sampler_sensitivity(sums)[0]),
            epsilon,
            upper,
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

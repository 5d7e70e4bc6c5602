"""Stage 4 of the release, noise (docs/math.md §3.5, §9.4): each released cell's mean and
variance with independent Laplace noise at ε/2 each, or the cell's mean from the configured
mean mechanism (§7) at ε/2."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from stream_dp.dp.grid_error import variance_bias
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.dp.pseudo_user import PseudoUserResult
from stream_dp.release.accounting import WindowAccountant
from stream_dp.release.statistics import CellStatistics
from stream_dp.windows.columns import WindowColumns


@dataclass(frozen=True)
class NoisyCells:
    """Per released cell: the noisy mean and variance (not yet clamped) and the worst-case
    error published with them (None where the mechanism gives none)."""

    means: list[float]
    variances: list[float]
    error_bounds: list[float | None]


def noisy_cells(
    stats: CellStatistics,
    capped: PseudoUserResult,
    accountant: WindowAccountant,
    noise: LaplaceNoise,
    mechanism: Any = None,
    cell_data: Any = None,
) -> NoisyCells:
    """Noise every cell: all variances in one batch, then all CLIP means in one (independent
    draws: their order does not matter); with a ``mechanism`` (None: the CLIP mean), each
    cell's mean is its release on ``cell_data(g)`` instead, in cell order."""
    variances = noise.release_many(
        stats.variances, capped.variance_sensitivity, accountant.variance_epsilon
    ).tolist()
    if mechanism is None:
        means = noise.release_many(
            stats.means, capped.mean_sensitivity, accountant.mean_epsilon
        ).tolist()
        return NoisyCells(means, variances, capped.error.tolist())
    var_bias = variance_bias(
        cell_data.upper, stats.kept_readings.astype(np.int64), stats.n_readings
    )
    means, bounds = [], []
    for g in range(len(variances)):
        outcome = mechanism.release(
            cell_data(g), cell_data.upper, accountant.mean_epsilon, noise.source
        )
        means.append(outcome.value)
        # eq. (11): the mechanism's mean error, the variance's bias and its noise scale at ε/2
        variance_part = var_bias[g] + 2.0 * capped.variance_sensitivity[g] / accountant.epsilon
        bounds.append(
            None
            if outcome.worst_case_error is None
            else float(outcome.worst_case_error + variance_part)
        )
    return NoisyCells(means, variances, bounds)


@dataclass(frozen=True)
class CellDataOf:
    """``CellData`` of released cell ``g`` for a mean mechanism: its kept entries' counts,
    sums, reading prefixes and kept counts."""

    columns: WindowColumns
    entry_of: np.ndarray
    kept_count: np.ndarray
    cell_start: np.ndarray
    upper: float

    def __call__(self, g: int) -> Any:
        from stream_dp.dp.mechanisms import CellData

        start, stop = int(self.cell_start[g]), int(self.cell_start[g + 1])
        chosen = self.entry_of[start:stop]
        return CellData(
            counts=self.columns.count[chosen],
            sums=self.columns.total[chosen],
            sumsqs=self.columns.total_sq[chosen],
            prefixes=self.columns.prefixes(chosen),
            kept_counts=np.asarray(self.kept_count[start:stop], dtype=np.int64),
        )

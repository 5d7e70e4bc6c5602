"""Stage 4 of the release, noise (docs/math.md §3.5, §9.4): each released cell's mean with
(1 − s)·ε and its variance with s·ε of independent Laplace noise (no variance when s = 0),
or the cell's mean from the configured mean mechanism (§7) at (1 − s)·ε; and the 95 % error
bars published with them (:mod:`stream_dp.dp.error_bars`), functions of public counts.

The default CLIP mean is :mod:`stream_dp.dp.clip_mean`'s combiner, called once with every cell
of the window (the ``clip`` mean mechanism is the same code for one cell)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from stream_dp.dp.clip_mean import ClipMeanCombiner, ClippedSums
from stream_dp.dp.error_bars import mechanism_mean_error, variance_error
from stream_dp.dp.float_variance import sampler_sensitivity as variance_sampler_sensitivity
from stream_dp.dp.grid_error import variance_bias
from stream_dp.dp.pseudo_user import PseudoUserResult
from stream_dp.release.accounting import PrivacyAccountant
from stream_dp.release.statistics import CellStatistics
from stream_dp.windows.columns import WindowColumns

if TYPE_CHECKING:  # the noise's module loads its compiled sampler: ``plan`` draws none
    from stream_dp.dp.noise import LaplaceNoise


@dataclass(frozen=True)
class ErrorBars:
    """Per cell, the 95 % bounds on the released mean's and variance's errors."""

    mean: np.ndarray
    variance: np.ndarray | None


def clip_mean_cells(stats: CellStatistics, capped: PseudoUserResult) -> ClippedSums:
    """The CLIP mean's accumulator of every cell (§7.2): the kept readings' sum, S, the cap
    (each cell's largest kept count, ``top``) and M."""
    return ClippedSums(stats.kept_sums, stats.kept_readings, capped.cap, stats.n_readings)


def error_bars(
    stats: CellStatistics, capped: PseudoUserResult, accountant: PrivacyAccountant, upper: float
) -> ErrorBars:
    """The CLIP mean's and the variance's error bars from the kept counts and the cap."""
    kept, total = stats.kept_readings, stats.n_readings
    mean = ClipMeanCombiner(upper, accountant.mean_epsilon).error_bar(
        clip_mean_cells(stats, capped)
    )
    variance = None
    if accountant.variance_share:
        variance = variance_error(upper, accountant.variance_epsilon, capped.cap, kept, total)
    return ErrorBars(mean, variance)


@dataclass(frozen=True)
class NoisyCells:
    """Per cell: the noisy mean and variance (not yet clamped; variance None when it gets no
    budget), the worst-case error and the mean's error bar published with them (None where
    the mechanism gives none; None for a withheld cell of a mechanism)."""

    means: list[float | None]
    variances: list[float | None]
    error_bounds: list[float | None]
    mean_errors: list[float | None]


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


def noisy_cells(
    stats: CellStatistics,
    capped: PseudoUserResult,
    accountant: PrivacyAccountant,
    noise: LaplaceNoise,
    bars: ErrorBars,
    released: np.ndarray,
    upper: float,
    mechanism: Any = None,
    cell_data: CellDataOf | None = None,
) -> NoisyCells:
    """Noise every cell: all variances in one batch (the sampler given the variance's
    sensitivity with its float allowance, §4.2), then all CLIP means in one (independent
    draws: their order does not matter); with a ``mechanism`` (None: the CLIP mean), each
    ``released`` cell's mean is its release on ``cell_data(g)`` instead, in cell order."""
    n_cells = len(released)
    variances: list[float | None] = [None] * n_cells
    if accountant.variance_share:
        sensitivity = variance_sampler_sensitivity(upper, capped.cap, stats.kept_readings)
        if accountant.per_cell is not None:
            variances = noise.release_each(
                stats.variances, sensitivity, accountant.variance_epsilon
            ).tolist()
        else:
            variances = noise.release_many(
                stats.variances, sensitivity, accountant.variance_epsilon
            ).tolist()
    if mechanism is None:
        combiner = ClipMeanCombiner(upper, accountant.mean_epsilon)
        means = combiner.noisy_means(clip_mean_cells(stats, capped), noise).tolist()
        return NoisyCells(means, variances, capped.error.tolist(), bars.mean.tolist())
    assert cell_data is not None
    out = NoisyCells([None] * n_cells, variances, [None] * n_cells, [None] * n_cells)
    for g in np.flatnonzero(released).tolist():
        _mechanism_cell(g, out, mechanism, cell_data, stats, capped, accountant, noise)
    return out


def _mechanism_cell(
    g: int,
    out: NoisyCells,
    mechanism: Any,
    cell_data: CellDataOf,
    stats: CellStatistics,
    capped: PseudoUserResult,
    accountant: PrivacyAccountant,
    noise: LaplaceNoise,
) -> None:
    """Cell ``g``'s mean by the mechanism, its worst-case error (the mechanism's plus the
    variance's bias and noise scale, eq. (11)) and its error bar, into ``out``."""
    upper, data = cell_data.upper, cell_data(g)
    outcome = mechanism.release(data, upper, accountant.mean_epsilon, noise.source)
    out.means[g] = outcome.value
    variance_part = 0.0
    if accountant.variance_share:
        kept, total = int(stats.kept_readings[g]), int(stats.n_readings[g])
        bias = float(variance_bias(upper, np.array([kept]), np.array([total]))[0])
        variance_part = bias + capped.variance_sensitivity[g] / accountant.variance_epsilon
    if outcome.worst_case_error is not None:
        out.error_bounds[g] = float(outcome.worst_case_error + variance_part)
    participants = int(data.counts[data.kept_counts > 0].sum())
    out.mean_errors[g] = mechanism_mean_error(
        mechanism.name, outcome.parameters, outcome.worst_case_error, outcome.sensitivity,
        upper, participants, int(stats.n_readings[g]),
    )  # fmt: skip

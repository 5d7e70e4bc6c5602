"""The CLIP mean, written once for any number of cells (docs/math.md §3.1–§3.3, §3.5, §7.2).

Each vehicle keeps its first ``Gamma'_l`` readings of a cell (CLIP-USER and the pseudo-user cap,
§5, §6); the cell's CLIP mean is ``sum of the kept readings / S`` (``S = sum_l Gamma'_l``, eq.
(6)), its user-level sensitivity ``U top / S`` (``top = max_l Gamma'_l``, eq. (9)), its
worst-case clipping bias ``U (1 - S/M)`` against all ``M`` readings (Thm IV.1), and it is
released with ``Lap(U top / S / eps_mu)`` from the exact sampler of :mod:`stream_dp.dp.noise`,
given :func:`~stream_dp.dp.float_mean.sampler_sensitivity`: eq. (9) plus what floating point
can add to the float mean's movement (§4.2, "Float inputs"; the kept sum must be the accurate
sum of the pairs' float sums, :mod:`stream_dp.dp.accurate_sum`).

Shaped like a PipelineDP combiner: :class:`ClippedSums` is the accumulator (per cell, the only
data the mean reads: the kept readings' sum, and the public ``S``, ``top`` and ``M``);
:class:`ClipMeanCombiner` holds the parameters (``U``, ``eps_mu``) and computes everything
published about the mean from it. The window release calls it once with every cell of the
window (per-cell arrays); :class:`~stream_dp.dp.mechanisms.clip.ClipMean` calls it with one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike, NDArray

from stream_dp.dp.error_bars import mean_error
from stream_dp.dp.float_mean import sampler_sensitivity
from stream_dp.dp.grid_error import mean_bias, mean_sensitivity

if TYPE_CHECKING:  # the sampler is passed in: importing this module loads no compiled kernel
    from stream_dp.dp.noise import LaplaceNoise

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


def clipped_means(kept_sum: ArrayLike, kept: ArrayLike) -> FloatArray:
    """``mu_clip = (sum of the kept readings) / S`` per cell (eq. (6), §3.1): one division of
    ``kept_sum``, the accurate sum of the pairs' float sums (§4.2, "Float inputs"); NaN where
    ``S = 0`` (such a cell is not released)."""
    return np.asarray(kept_sum) / np.asarray(kept)


def clip_mean_sensitivity(upper: float, top: ArrayLike, kept: ArrayLike) -> FloatArray:
    """``Delta_mu = U top / S`` per cell (eq. (9), §3.2); +inf where ``S = 0``."""
    kept_i = np.asarray(kept)
    released = kept_i > 0
    safe = np.where(released, kept_i, 1)
    return np.where(released, mean_sensitivity(upper, top, safe), np.inf)


@dataclass(frozen=True)
class ClippedSums:
    """The CLIP mean's accumulator, per cell: ``kept_sum`` the sum of the kept readings
    (private; the accurate sum of the kept pairs' float sums,
    :func:`~stream_dp.dp.accurate_sum.grouped_sums`), ``kept`` = S, ``top`` = the largest
    kept count of a vehicle and ``total`` = M (public, from the occupancy)."""

    kept_sum: FloatArray
    kept: IntArray
    top: IntArray
    total: IntArray

    @property
    def means(self) -> FloatArray:
        """The cells' clipped means (:func:`clipped_means`)."""
        return clipped_means(self.kept_sum, self.kept)


@dataclass(frozen=True)
class ClipMeanCombiner:
    """The CLIP mean at budget ``epsilon`` (the mean's share ``eps_mu`` of a cell's ε) for
    readings in ``[0, upper]`` (§7.2): its sensitivity, bias, error bar and noisy values
    (the worst-case error ``bias + Delta_mu / eps_mu`` is every Laplace mechanism's, §7.1)."""

    upper: float
    epsilon: float

    def sensitivity(self, sums: ClippedSums) -> FloatArray:
        """Per cell ``U top / S`` (eq. (9)); +inf where nothing is kept."""
        return clip_mean_sensitivity(self.upper, sums.top, sums.kept)

    def sampler_sensitivity(self, sums: ClippedSums) -> FloatArray:
        """Per cell the sensitivity the sampler is given: eq. (9) plus the float rounding
        allowance (:func:`~stream_dp.dp.float_mean.sampler_sensitivity`, §4.2); +inf where
        nothing is kept."""
        return sampler_sensitivity(self.upper, sums.top, sums.kept)

    def bias(self, sums: ClippedSums) -> FloatArray:
        """Per cell the worst-case clipping bias ``U (1 - S/M)`` (Thm IV.1, §3.3)."""
        return mean_bias(self.upper, sums.kept, sums.total)

    def error_bar(self, sums: ClippedSums) -> FloatArray:
        """Per cell the 95 % bound published as ``mean_error`` (§12.1): the bias plus
        ``ln 20`` noise scales (:func:`~stream_dp.dp.error_bars.mean_error`)."""
        return mean_error(self.upper, self.epsilon, sums.top, sums.kept, sums.total)

    def noise_scale(self, sums: ClippedSums, noise: LaplaceNoise) -> FloatArray:
        """Per cell the Laplace scale ``noise`` actually uses (§4.2); +inf where nothing is
        kept (no release)."""
        scale = noise.effective_scale
        return np.array(
            [
                scale(s, self.epsilon) if np.isfinite(s) else np.inf
                for s in self.sampler_sensitivity(sums).tolist()
            ]
        )

    def noisy_means(self, sums: ClippedSums, noise: LaplaceNoise) -> FloatArray:
        """Per cell ``mu_clip + Lap(Delta_mu / eps_mu)`` (§3.5), independent draws, not yet
        clamped into ``[0, U]`` (the caller's post-processing); the sampler is given
        :meth:`sampler_sensitivity`."""
        sensitivity = self.sampler_sensitivity(sums)
        if np.ndim(self.epsilon):  # per-cell ε (docs/math.md §13); a dropped cell: NaN
            with np.errstate(invalid="ignore", divide="ignore"):
                means = sums.means
            return noise.release_each(means, sensitivity, self.epsilon)
        return noise.release_many(sums.means, sensitivity, self.epsilon)

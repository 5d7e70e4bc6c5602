"""Closed forms for one grid (H3 cell) of the composition paper (Rameshwar & Tandon).

Notation (docs/math.md §1): ``total`` = M = sum_l m[g,l]; ``kept`` = S = sum_l Gamma[g,l];
``top`` = max_l Gamma[g,l]; ``upper`` = U, the public bound of a reading.
Every function accepts scalars or numpy arrays (broadcast) and returns float64.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike, NDArray

if TYPE_CHECKING:
    from stream_dp.dp.error_bars import ErrorModel

FloatArray = NDArray[np.float64]


def mean_sensitivity(upper: float, top: ArrayLike, kept: ArrayLike) -> FloatArray:
    """User-level sensitivity of the clipped mean, eq. (9): ``U * top / S``."""
    top_f = np.asarray(top, dtype=np.float64)
    kept_f = np.asarray(kept, dtype=np.float64)
    return upper * top_f / kept_f


def variance_sensitivity(upper: float, top: ArrayLike, kept: ArrayLike) -> FloatArray:
    """User-level sensitivity of the clipped variance, Prop. III.1 / Lemma III.3 (all three cases).

    ``U^2 top (S - top) / S^2`` if ``S > 2 top``; else ``U^2/4`` for even ``S``;
    else ``U^2/4 (1 - 1/S^2)``.
    """
    top_i = np.asarray(top, dtype=np.int64)
    kept_i = np.asarray(kept, dtype=np.int64)
    kept_f = kept_i.astype(np.float64)
    u2 = float(upper) ** 2
    spread = u2 * top_i * (kept_i - top_i) / kept_f**2
    quarter = np.where(kept_i % 2 == 0, u2 / 4.0, u2 / 4.0 * (1.0 - 1.0 / kept_f**2))
    return np.where(kept_i > 2 * top_i, spread, quarter).astype(np.float64)


def mean_bias(upper: float, kept: ArrayLike, total: ArrayLike) -> FloatArray:
    """Worst-case clipping bias of the mean, Thm IV.1: ``U (1 - S/M)``."""
    kept_f = np.asarray(kept, dtype=np.float64)
    total_f = np.asarray(total, dtype=np.float64)
    return upper * (1.0 - kept_f / total_f)


def variance_bias(upper: float, kept: ArrayLike, total: ArrayLike) -> FloatArray:
    """Worst-case clipping bias of the variance, Thm IV.2 **corrected** (docs/math.md §10.1).

    0 if ``S == M``; ``U^2 S (M - S) / M^2`` if ``M < 2 S`` (the paper prints ``M > 2S``:
    reversed); else ``U^2/4`` for even ``M``; else ``U^2/4 (1 - 1/M^2)``.
    """
    kept_i = np.asarray(kept, dtype=np.int64)
    total_i = np.asarray(total, dtype=np.int64)
    total_f = total_i.astype(np.float64)
    u2 = float(upper) ** 2
    spread = u2 * kept_i * (total_i - kept_i) / total_f**2
    quarter = np.where(total_i % 2 == 0, u2 / 4.0, u2 / 4.0 * (1.0 - 1.0 / total_f**2))
    bias = np.where(total_i < 2 * kept_i, spread, quarter)
    return np.where(kept_i == total_i, 0.0, bias).astype(np.float64)


def grid_error(
    upper: float,
    epsilon: float,
    top: ArrayLike,
    kept: ArrayLike,
    total: ArrayLike,
    model: ErrorModel | None = None,
) -> FloatArray:
    """Worst-case error of one grid, eq. (11)/(13).

    ``E_g = bias_mu + bias_var + 2 D_mu / eps + 2 D_var / eps`` (``E|Lap(b)| = b`` and each
    statistic gets ``eps/2``). A grid with nothing kept (``S == 0``) has no release: +inf.
    With a ``model`` (:class:`~stream_dp.dp.error_bars.ErrorModel`; ``epsilon`` is then unused):
    ``bias_mu + q D_mu / eps_mean + w (bias_var + q D_var / eps_var)`` (the same operations as
    the compiled kernel; ``ErrorModel.split(eps)`` gives the line above bit for bit).
    """
    kept_i = np.asarray(kept, dtype=np.int64)
    safe_kept = np.where(kept_i > 0, kept_i, 1)
    if model is not None:
        eps_m, eps_v, weight, q = model.kernel_args()
        error = (
            mean_bias(upper, safe_kept, total)
            + weight * variance_bias(upper, safe_kept, total)
            + q * mean_sensitivity(upper, top, safe_kept) / eps_m
            + weight * (q * variance_sensitivity(upper, top, safe_kept) / eps_v)
        )
        return np.where(kept_i > 0, error, np.inf).astype(np.float64)
    error = (
        mean_bias(upper, safe_kept, total)
        + variance_bias(upper, safe_kept, total)
        + 2.0 * mean_sensitivity(upper, top, safe_kept) / epsilon
        + 2.0 * variance_sensitivity(upper, top, safe_kept) / epsilon
    )
    return np.where(kept_i > 0, error, np.inf).astype(np.float64)

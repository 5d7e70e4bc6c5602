"""Closed forms for one grid (H3 cell) of the composition paper (Rameshwar & Tandon).

Notation (docs/math.md §1): ``total`` = M = sum_l m[g,l]; ``kept`` = S = sum_l Gamma[g,l];
``top`` = max_l Gamma[g,l]; ``upper`` = U, the public bound of a reading.

The cell's worst-case error, eq. (13) generalised by :class:`ErrorModel` (docs/math.md §3.4,
§12.3), is written once, as the scalar :func:`~stream_dp.dp.cell_error.cell_error` (its own
module; plain Python that numba compiles unchanged in :mod:`stream_dp.dp.grid_error_kernel`), so
CLIP-USER's kernel, the vectorised :func:`grid_error` and the test references perform the same
floating-point operations and break ties identically. The four named terms (:func:`mean_bias`,
:func:`variance_bias`, :func:`mean_sensitivity`, :func:`variance_sensitivity`) are the numpy
forms the error bars and the mechanisms use; they accept scalars or arrays (broadcast) and
return float64, and the tests check that they compose to that scalar bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from stream_dp.dp import kernels

__all__ = [
    "ErrorModel",
    "composed_error",
    "grid_error",
    "mean_bias",
    "mean_sensitivity",
    "variance_bias",
    "variance_sensitivity",
]

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class ErrorModel:
    """The per-cell error function CLIP-USER and the cap minimise (eq. 13 generalised,
    docs/math.md §12.3): ``bias_mu + q D_mu / eps_mean + w (bias_var + q D_var / eps_var)``.

    ``mean_epsilon`` / ``variance_epsilon``: the budgets of the two Laplace releases
    (``(1 - s) eps`` and ``s eps`` for a variance share ``s``); ``variance_weight`` 1 when the
    variance is released, 0 when not (then ``variance_epsilon`` is a placeholder 1.0);
    ``quantile``: the multiple of the noise scale counted (1: expected |noise|; ``ln 20``: 95 %).
    """

    mean_epsilon: float
    variance_epsilon: float
    variance_weight: float
    quantile: float

    @classmethod
    def split(
        cls, epsilon: float, variance_share: float = 0.5, quantile: float = 1.0
    ) -> ErrorModel:
        """The model of a cell budget ``epsilon`` with ``variance_share`` of it for the variance.

        ``split(eps)`` is the paper's eq. 13 (``eps/2`` each, expected noise) bit for bit:
        ``x / (eps * 0.5)`` and ``2.0 * x / eps`` round the same exact quotient."""
        if not epsilon > 0:
            raise ValueError("epsilon must be positive")
        if not 0.0 <= variance_share < 1.0:
            raise ValueError("variance_share must lie in [0, 1)")
        if variance_share == 0.0:
            return cls(float(epsilon), 1.0, 0.0, float(quantile))
        return cls(
            float(epsilon) * (1.0 - variance_share),
            float(epsilon) * variance_share,
            1.0,
            float(quantile),
        )

    @property
    def releases_variance(self) -> bool:
        return self.variance_weight > 0.0

    def kernel_args(self) -> tuple[float, float, float, float]:
        """``(eps_mean, eps_var, variance_weight, quantile)``, the model's arguments of
        :func:`~stream_dp.dp.cell_error.cell_error`."""
        return self.mean_epsilon, self.variance_epsilon, self.variance_weight, self.quantile


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
    """:func:`~stream_dp.dp.cell_error.cell_error` over arrays (broadcast; integer counts):
    eq. (11)/(13), +inf where nothing is kept (``S == 0``: no release).

    ``model`` defaults to ``ErrorModel.split(epsilon)``, the paper's
    ``E_g = bias_mu + bias_var + 2 D_mu / eps + 2 D_var / eps`` (``E|Lap(b)| = b``, each
    statistic gets ``eps/2``); with a ``model``, ``epsilon`` is unused. Runs
    :data:`~stream_dp.dp.kernels.CELL_ERRORS`: the compiled loop of ``cell_error`` or
    :func:`composed_error` (the same value, bit for bit).
    """
    if model is None:
        model = ErrorModel.split(epsilon)
    shape = np.broadcast_shapes(np.shape(top), np.shape(kept), np.shape(total))
    counts = np.empty((3, *shape), dtype=np.int64)  # one contiguous, writeable layout
    counts[0], counts[1], counts[2] = top, kept, total
    errors = kernels.CELL_ERRORS.pick(counts[0].size)
    return errors(upper, model, counts[0], counts[1], counts[2])  # type: ignore[no-any-return]


def composed_error(
    upper: float, model: ErrorModel, top: ArrayLike, kept: ArrayLike, total: ArrayLike
) -> FloatArray:
    """:func:`grid_error` in numpy: the four named terms composed as
    :func:`~stream_dp.dp.cell_error.cell_error` composes them (docs/math.md §3.4), the same
    floating-point operations in the same order, so the same value bit for bit. Without the
    variance (``w = 0``) its two terms are left out: where ``S > 0`` they are finite, so they
    add exactly ``+0.0`` to non-negative sums."""
    eps_m, eps_v, weight, q = model.kernel_args()
    with np.errstate(divide="ignore", invalid="ignore"):  # S == 0: +inf below
        if weight == 0.0:
            error = mean_bias(upper, kept, total) + q * mean_sensitivity(upper, top, kept) / eps_m
        else:
            error = (
                mean_bias(upper, kept, total)
                + weight * variance_bias(upper, kept, total)
                + q * mean_sensitivity(upper, top, kept) / eps_m
                + weight * (q * variance_sensitivity(upper, top, kept) / eps_v)
            )
    return np.where(np.asarray(kept) > 0, error, np.inf)

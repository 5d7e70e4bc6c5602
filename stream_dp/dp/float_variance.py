"""The clipped variance in floating point and the sensitivity its sampler needs: a bound on
how far the *float* variance can move between neighbours (docs/math.md §4.2, "Float inputs",
the variance).

The release computes a cell's variance as ``v = max(fl(fl(Q~ / S) - fl(m m)), 0)``
(:func:`clipped_variances`): ``m = fl(T~ / S)`` the float clipped mean, ``Q~`` the accurate
sum (:mod:`stream_dp.dp.accurate_sum`: within ``1.5 u`` of its exact sum to 10^-8 of it,
``2 u`` below) of the kept pairs' float sums of squares, each a running float sum of one
vehicle's ``fl(x^2)``, ``x`` in ``[0, U]``. With ``u = 2^-53``,
``G = gamma_top = top u / (1 - top u)`` and ``e = (1 + G)(1 + 2 u)(1 + u) - 1`` each
neighbour's ``v`` lies within

    E = (1 + u) U^2 (e + (1 + e)^2 (1 + u) - 1) + u U^2 / 4 + 2^-1072

of the exact variance of its readings (§4.2), which moves by at most ``Delta_Var`` (§3.2,
Lemma III.3).
:func:`sampler_sensitivity` returns a float at least ``Delta_Var + 2 E`` (with its own float
operations' rounding): ``Delta_Var`` plus :func:`rounding_allowance`.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from stream_dp.dp.grid_error import variance_sensitivity

FloatArray = NDArray[np.float64]

#: ``8 u``: the allowance is ``(top + 4)`` of these times ``U^2`` (docs/math.md §4.2).
_EIGHT_UNIT_ROUNDOFF = 2.0**-50
#: Covers the subnormal terms (half the smallest subnormal per rounding) for any ``U``.
_SUBNORMAL_ALLOWANCE = 2.0**-1068


def clipped_variances(sum_sq: ArrayLike, means: ArrayLike, kept: ArrayLike) -> FloatArray:
    """``Var_clip = Q / S - mu_clip^2`` per cell (eq. (7), §3.1), floored at 0: ``sum_sq`` the
    accurate sum of the kept pairs' sums of squares, ``means`` the float clipped means (the
    formula whose rounding :func:`rounding_allowance` bounds, §4.2); NaN where ``S = 0``."""
    means_f = np.asarray(means, dtype=np.float64)
    variances = np.asarray(sum_sq, dtype=np.float64) / np.asarray(kept) - means_f * means_f
    return np.where(variances < 0.0, 0.0, variances)  # max(v, 0.0), NaN kept


def rounding_allowance(upper: float, top: ArrayLike) -> FloatArray:
    """``U^2 (top + 4) 2^-50 + 2^-1068``: what floating point may add to the float variance's
    movement between neighbours beyond ``Delta_Var`` (module docstring; at least ``2 E`` plus
    the rounding of ``Delta_Var`` and of the sum, for ``top < 2^40``)."""
    top_f = np.asarray(top, dtype=np.float64)
    return (upper * upper) * ((top_f + 4.0) * _EIGHT_UNIT_ROUNDOFF) + _SUBNORMAL_ALLOWANCE


def sampler_sensitivity(upper: float, top: ArrayLike, kept: ArrayLike) -> FloatArray:
    """``Delta_Var`` (§3.2, Lemma III.3) plus :func:`rounding_allowance`: at least the
    largest change of the released float variance between neighbours; +inf where ``S = 0``."""
    kept_i = np.asarray(kept)
    released = kept_i > 0
    safe = np.where(released, kept_i, 1)
    bound = variance_sensitivity(upper, top, safe) + rounding_allowance(upper, top)
    return np.where(released, bound, np.inf)

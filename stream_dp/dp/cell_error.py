"""The worst-case error of one cell, eq. (13) generalised (docs/math.md §3.4, §12.3), written
once as a scalar function of plain Python: :mod:`stream_dp.dp.grid_error` re-exports it and
vectorises it, and numba compiles this same function for the kernels
(:mod:`stream_dp.dp.grid_error_kernel`, :mod:`stream_dp.dp.clip_user_kernel`), so every path
performs the same floating-point operations and breaks ties identically. Importing this module
loads no numba."""

from __future__ import annotations

import math


def cell_error(
    upper: float,
    u2: float,
    eps_m: float,
    eps_v: float,
    weight: float,
    q: float,
    top: int,
    kept: int,
    total: int,
) -> float:
    """One cell's eq. (13) error under the model ``(eps_m, eps_v, weight, q)`` of
    :meth:`stream_dp.dp.grid_error.ErrorModel.kernel_args` (``u2 = upper**2``); +inf when
    nothing is kept.

    ``bias_mu + w bias_var + q D_mu / eps_m + w (q D_var / eps_v)``, the terms as in
    ``mean_bias``, ``variance_bias``, ``mean_sensitivity`` and ``variance_sensitivity`` of
    :mod:`stream_dp.dp.grid_error` (docs/math.md §3.2-§3.4). The one definition: numba compiles
    it for the kernels (keep it to scalar operations numba's nopython mode accepts)."""
    if kept <= 0:
        return math.inf
    kept_f = float(kept)
    total_f = float(total)
    mean_bias = upper * (1.0 - kept_f / total_f)  # Thm IV.1
    if kept == total:  # Thm IV.2, corrected (§10.1)
        var_bias = 0.0
    elif total < 2 * kept:
        var_bias = u2 * kept_f * float(total - kept) / (total_f * total_f)
    elif total % 2 == 0:
        var_bias = u2 / 4.0
    else:
        var_bias = u2 / 4.0 * (1.0 - 1.0 / (total_f * total_f))
    mean_sens = upper * float(top) / kept_f  # eq. (9)
    if kept > 2 * top:  # Prop. III.1 / Lemma III.3
        var_sens = u2 * float(top) * float(kept - top) / (kept_f * kept_f)
    elif kept % 2 == 0:
        var_sens = u2 / 4.0
    else:
        var_sens = u2 / 4.0 * (1.0 - 1.0 / (kept_f * kept_f))
    return mean_bias + weight * var_bias + q * mean_sens / eps_m + weight * (q * var_sens / eps_v)

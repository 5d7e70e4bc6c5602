"""The CLIP mean's sensitivity as the exact sampler needs it: a bound on how far the *float*
clipped mean can move between neighbours (docs/math.md §4.2, "Float inputs").

The release computes a cell's mean as ``fl(T~ / S)``: ``T~`` is the accurate sum
(:mod:`stream_dp.dp.accurate_sum`, within ``1.5 u`` of the exact ``T``) of the kept pairs'
float sums ``t_p``, each a float sum of one vehicle's kept readings in ``[0, U]``, and one
division rounds it. With ``u = 2^-53``:

- a float sum of ``k`` readings in ``[0, U]``, in any order, lies in ``[0, k U (1 + u)^(k-1)]``
  (each addition rounds up by at most a factor ``1 + u``), so changing one vehicle moves ``T``
  by at most ``top U (1 + u)^(top-1)``, and ``T / S <= U (1 + u)^(top-1)``;
- the sum's ``1.5 u`` and the division's ``u`` (or half the smallest subnormal) put each
  neighbour's float mean within ``2.51 u U (1 + u)^(top-1)`` of its exact ``T / S``.

:func:`sampler_sensitivity` returns a float at least ``U top / S`` plus all of that, both
neighbours' (with its own float operations' rounding), so the sampler's proof (§4.2) holds for
the float it is given.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from stream_dp.dp.grid_error import mean_sensitivity

FloatArray = NDArray[np.float64]

#: ``2 u``: the allowance is ``(top + 8)`` of these times ``U`` (docs/math.md §4.2).
_TWO_UNIT_ROUNDOFF = 2.0**-52
#: The sampler's grid term: its step is at most 2^-40 of the sensitivity (§4.2).
GRID_SLACK = 2.0**-40
#: Twice the allowance relative to ``U``, per ``top + 8``: :func:`share_slack`'s unit.
SHARE_SLACK_UNIT = 2.0 * _TWO_UNIT_ROUNDOFF
#: Covers the subnormal terms (half the smallest subnormal per rounding) for any ``U``.
_SUBNORMAL_ALLOWANCE = 2.0**-1070


def rounding_allowance(upper: float, top: ArrayLike) -> FloatArray:
    """``U (top + 8) 2^-52``: what floating point may add to the float mean's movement between
    neighbours beyond ``U top / S`` (module docstring), in the sampler's sensitivity."""
    top_f = np.asarray(top, dtype=np.float64)
    return upper * (top_f + 8.0) * _TWO_UNIT_ROUNDOFF + _SUBNORMAL_ALLOWANCE


def sampler_sensitivity(upper: float, top: ArrayLike, kept: ArrayLike) -> FloatArray:
    """``U top / S`` (eq. (9)) plus :func:`rounding_allowance`: at least the largest change of
    the released float mean between neighbours; +inf where ``S = 0``."""
    kept_i = np.asarray(kept)
    released = kept_i > 0
    safe = np.where(released, kept_i, 1)
    bound = mean_sensitivity(upper, top, safe) + rounding_allowance(upper, top)
    return np.where(released, bound, np.inf)


def share_slack(top: ArrayLike, cell_kept: ArrayLike) -> FloatArray:
    """What a vehicle with ``k`` kept readings loses beyond ``ε_μ k / top`` on the sampler's
    grid (§13.1, "The loss"), in units of ``ε_μ``: ``2^-40 + (top + 8) S / top 2^-51`` (the
    grid step and twice the allowance, each relative to ``U top / S``; ``S = cell_kept``);
    0 where ``top = 0``."""
    top_f = np.asarray(top, dtype=np.float64)
    safe = np.where(top_f > 0, top_f, 1.0)
    slack = GRID_SLACK + (safe + 8.0) * np.asarray(cell_kept, dtype=np.float64) / safe * (
        SHARE_SLACK_UNIT
    )
    return np.where(top_f > 0, slack, 0.0)

"""Sums of floats per group, accurate to about one rounding (docs/math.md §4.2, "Float
inputs").

:func:`grouped_sums` runs Ogita, Rump and Oishi's ``Sum2`` (2005, "Accurate Sum and Dot
Product", Alg. 4.4: Knuth's error-free TwoSum cascaded, the errors summed apart and added
back once) over each group, from 0.0 in order. Their Prop. 4.5 bounds the result ``res`` of
``n`` floats ``p_i`` (underflow included) by

    |res - sum p_i| <= u |sum p_i| + gamma_n^2 sum |p_i|,   gamma_n = n u / (1 - n u),

with ``u = 2^-53``. For non-negative values and ``n <= MAX_TERMS = 2^26``
(``gamma_n^2 <= (1 + 2^-26) u/2``) that is at most ``1.5 u`` of the exact sum (to 10^-8 of
it): about one rounding, where a plain running sum of ``n`` values may be ``n`` roundings off
(the leading 0.0 makes ``n + 1`` terms, hence ``gamma_n``). It costs a few float operations
per value (no branches); compiled, one pass.
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: Most values in one group for the bound of the module docstring (``gamma_n^2 <= u/2``).
MAX_TERMS = 2**26


def grouped_sums(start: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Per group ``g`` the ``Sum2`` of ``values[start[g]:start[g + 1]]`` (module docstring;
    0.0 for an empty group). A group of more than :data:`MAX_TERMS` values is refused."""
    bounds = np.asarray(start, dtype=np.int64)
    if len(bounds) > 1 and int(np.diff(bounds).max()) > MAX_TERMS:
        raise ValueError(f"a group holds more than {MAX_TERMS} values: its sum is not bounded")
    return _sum2_groups(bounds, np.ascontiguousarray(values, dtype=np.float64))


@njit(cache=True, nogil=True)
def _sum2_groups(start: np.ndarray, values: np.ndarray) -> np.ndarray:  # pragma: no cover
    """``Sum2`` per group: ``s`` the running float sum, ``c`` the sum of TwoSum's exact
    errors of each addition, the group's result ``s + c``."""
    n_groups = len(start) - 1
    out = np.empty(n_groups, dtype=np.float64)
    for g in range(n_groups):
        s = 0.0
        c = 0.0
        for i in range(start[g], start[g + 1]):
            x = values[i]
            t = s + x
            z = t - s
            c += (s - (t - z)) + (x - z)  # TwoSum: s + x = t + this, exactly
            s = t
        out[g] = s + c
    return out

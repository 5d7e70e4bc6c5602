"""Eq. (13) compiled: :func:`stream_dp.dp.cell_error.cell_error` under numba, and a loop of it
over arrays (what :func:`~stream_dp.dp.grid_error.grid_error` runs).

The definition is the plain Python one in ``cell_error.py``; numba neither contracts nor
reassociates floating-point operations without ``fastmath``, so the compiled and the Python
function agree bit for bit. Numba's on-disk cache of a kernel is keyed on the kernel's own
source file: after editing ``cell_error``, the cached kernels that inline it (here and in
``clip_user_kernel.py``) are only rebuilt once their files change too (or the cache is
cleared); the tests comparing the compiled and the Python paths catch a stale cache.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from stream_dp.dp.cell_error import cell_error

#: :func:`~stream_dp.dp.cell_error.cell_error`, compiled (called by the kernels).
compiled_cell_error = njit(cache=True, nogil=True)(cell_error)


@njit(cache=True, nogil=True)
def cell_errors_into(
    out: np.ndarray,
    upper: float,
    u2: float,
    eps_m: float,
    eps_v: float,
    weight: float,
    q: float,
    top: np.ndarray,
    kept: np.ndarray,
    total: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """``out[i] = cell_error(..., top[i], kept[i], total[i])`` for every ``i``."""
    for i in range(out.size):
        out[i] = compiled_cell_error(upper, u2, eps_m, eps_v, weight, q, top[i], kept[i], total[i])

"""Eq. (13) compiled: :func:`stream_dp.dp.cell_error.cell_error` under numba, and a loop of it
over arrays (:data:`stream_dp.dp.kernels.CELL_ERRORS`' compiled form).

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
from stream_dp.dp.grid_error import ErrorModel

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


def compiled_error(
    upper: float, model: ErrorModel, top: np.ndarray, kept: np.ndarray, total: np.ndarray
) -> np.ndarray:
    """:func:`~stream_dp.dp.grid_error.composed_error` by :func:`cell_errors_into` (the
    counts: int64 arrays of one shape)."""
    out = np.empty(np.shape(top), dtype=np.float64)
    upper_f = float(upper)
    cell_errors_into(
        out.reshape(-1), upper_f, upper_f**2, *model.kernel_args(),
        top.reshape(-1), kept.reshape(-1), total.reshape(-1),
    )  # fmt: skip
    return out

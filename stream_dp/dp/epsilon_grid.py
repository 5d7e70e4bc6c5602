"""The grid of per-cell ε under a per-vehicle budget (docs/math.md §13.1): every ε is a whole
number of steps of 2^-7, so ledger sums are exact in binary floating point.

Pure: the planner (:mod:`stream_dp.release.vehicle_budget.planner`), the own-share loss
(:mod:`stream_dp.dp.individual_loss`) and the regrouping's costs
(:mod:`stream_dp.dp.adaptive_cells`) all round on this one grid.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

#: The grid of per-cell ε (rounded up to it): 2^-7, dyadic, so every grid value and every
#: ledger sum of them (up to 2^46) is exact in binary floating point, and the exact Laplace
#: sampler's scale ``(Δ + 2^k) / ε`` has integers that fit the compiled path (``laplace_kernel``).
EPSILON_STEP = 2.0**-7
#: Relative margin on the needed ε before rounding, so float rounding never lifts the
#: published error bar above T.
ROUNDING_MARGIN = 1e-7


def round_up(epsilon: NDArray[np.float64]) -> NDArray[np.float64]:
    """``epsilon`` rounded up to the ``EPSILON_STEP`` grid (+inf stays)."""
    with np.errstate(invalid="ignore"):
        ticks = np.ceil(epsilon * (1.0 + ROUNDING_MARGIN) / EPSILON_STEP - 1e-9)
    return np.where(np.isfinite(epsilon), np.maximum(ticks, 1.0) * EPSILON_STEP, np.inf)

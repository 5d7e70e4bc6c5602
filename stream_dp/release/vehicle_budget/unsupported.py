"""What would release the cells the data cannot support (issue 37 item 3; docs/math.md §13.3).

Pure and public: from a withheld unit's per-vehicle reading counts (occupancy) and the
configuration. A cell's best ``mean_error`` at a mean ε is ``min_c U (1 − S(c)/M) + ln20 U c /
(S(c) ε_μ)`` (§12.4, :func:`~stream_dp.dp.adaptive_cells.best_cap_mean_error`), decreasing in
ε. No vehicle may spend more than the burst on one cell, so:

- the least target it meets under a budget is that error at ``ε = burst``;
- the least budget that meets ``T`` is ``B · ε_T / burst``, ``ε_T`` the least ε whose error
  is ``≤ T`` (found by bisection; +inf when the bias alone passes T), since the burst is a
  fixed share of B.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from stream_dp.dp.adaptive_cells import best_cap_mean_error

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

#: Bisection steps for ``ε_T`` (relative precision 2^-40 of the bracket).
_STEPS = 60


@dataclass(frozen=True)
class Needs:
    """Per unit: the least target meeting at the burst, and the least budget meeting ``T``."""

    target: FloatArray
    budget: FloatArray


def release_needs(
    unit: IntArray,
    count: IntArray,
    n_units: int,
    *,
    upper: float,
    target: float,
    budget: float,
    burst: float,
    mean_share: float,
    prefix_limit: int | None,
) -> Needs:
    """:class:`Needs` of each unit (module docstring); ``unit``/``count``: one entry per
    (unit, vehicle), ``mean_share`` the share of a cell's ε on its mean (``1 − s``)."""

    def error(epsilon: FloatArray) -> FloatArray:
        return best_cap_mean_error(unit, count, n_units, upper, epsilon * mean_share, prefix_limit)

    at_burst = error(np.full(n_units, burst))
    low, high = np.zeros(n_units), np.full(n_units, burst)
    reachable = error(np.full(n_units, 1e12)) <= target
    for _ in range(_STEPS):  # widen until T is met (never past 1e12)
        short = reachable & (error(high) > target)
        if not short.any():
            break
        low, high = np.where(short, high, low), np.where(short, high * 2.0, high)
    for _ in range(_STEPS):
        mid = (low + high) / 2.0
        meets = error(mid) <= target
        low, high = np.where(meets, low, mid), np.where(meets, mid, high)
    needed = np.where(reachable, high * budget / burst, np.inf)
    return Needs(at_burst, needed)

"""The mean of a cell from its noisy count and noisy sum, and an honest 95 % bar from noisy
quantities only (docs/math.md §14.6).

``mean = clip(S~ / max(n~, 1), 0, U)``. With ``w_n`` and ``w_s`` the one-sided tail widths of
the count and sum noise at ``alpha/4`` each, the events ``|n~ - n| < w_n`` and
``|S~ - S| < w_s`` hold together with probability at least ``1 - alpha``; on them the true
mean ``S / n`` lies in ``[max(0, S~ - w_s) / (n~ + w_n), min(U, (S~ + w_s) / max(1, n~ - w_n))]``
(plus the rounding of each vehicle's mean, at most half a sum step). The bar is the larger
distance from the released mean to either end.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray


@dataclass(frozen=True)
class NoisyMeans:
    """Per released cell: mean, its interval and the bar, in the units of U."""

    mean: NDArray[np.float64]
    low: NDArray[np.float64]
    high: NDArray[np.float64]

    @property
    def error_bar(self) -> NDArray[np.float64]:
        return np.maximum(self.mean - self.low, self.high - self.mean)


def noisy_means(count: NDArray[np.float64], total: NDArray[np.float64], count_width: float,
                sum_width: float, upper: float, rounding: float) -> NoisyMeans:  # fmt: skip
    """``count``: noisy vehicles; ``total``: noisy sum (units of U); widths in the same
    units; ``rounding``: the most one vehicle's rounded mean is off its mean."""
    mean = np.clip(total / np.maximum(count, 1.0), 0.0, upper)
    low = np.maximum(total - sum_width, 0.0) / (count + count_width) - rounding
    high = (total + sum_width) / np.maximum(count - count_width, 1.0) + rounding
    return NoisyMeans(mean, np.clip(low, 0.0, upper), np.clip(high, 0.0, upper))

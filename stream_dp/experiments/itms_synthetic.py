"""Synthetic data from the ITMS summary statistics of 003 (Sec. IV-B, IV-C).

003 publishes only summaries of its bus-speed data: L = 217 users, m^* = 417, m_* = 1,
sum m = 17,166, median 46, and with m_UB by eq. (9) K = 160 (WRAPAROUND) and K-bar = 164
(BESTFIT) arrays; speeds have mean 20.66769 and variance 115.135.

:func:`itms_counts` is one deterministic count vector with *all* of these (checked in the
tests). Sorted ascending (rank 0 = fewest readings):

* ranks i = 0..107: ``floor(1 + 45 (i/108)^0.8)`` (1 .. 45), so m_* = 1;
* rank 108 (the median of 217): 46;
* ranks 108 + j, j = 1..108: ``floor(46 + 371 (j/108)^3.5)`` (46 .. 417), so m^* = 417;
* that shape sums to 16,787; the missing 379 readings are added one at a time to ranks
  215, 214, ..., 109 in turn (cyclically; a count never passes the next larger one).

The exponents 0.8 and 3.5 were found by a grid search (steps 0.1 and 0.25) for where eq. (9) gives
m_UB = 52 with K = 160 and K-bar = 164, as in the paper. Readings are i.i.d.
N(20.66769, 115.135) (variance 115.135) projected onto [0, 65] (003 Sec. IV-C).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]

UPPER = 65.0
N_USERS = 217
MAX_COUNT = 417
MIN_COUNT = 1
TOTAL = 17_166
MEDIAN = 46
SPEED_MEAN = 20.66769
SPEED_VARIANCE = 115.135
LOWER_EXPONENT = 0.8
UPPER_EXPONENT = 3.5


def itms_counts() -> IntArray:
    """The 217 per-user counts, descending (003's order m_1 >= ... >= m_L)."""
    half = N_USERS // 2  # 108 users on each side of the median
    u = np.arange(half) / half
    v = np.arange(1, half + 1) / half
    shape = np.concatenate(
        [
            1 + (MEDIAN - 1) * u**LOWER_EXPONENT,
            [MEDIAN],
            MEDIAN + (MAX_COUNT - MEDIAN) * v**UPPER_EXPONENT,
        ]
    )
    counts = np.floor(shape).astype(np.int64)
    _top_up(counts, TOTAL - int(counts.sum()), first=N_USERS - 2, last=half + 1)
    return counts[::-1].copy()


def _top_up(ascending: IntArray, missing: int, first: int, last: int) -> None:
    """Add ``missing`` readings, one per index from ``first`` down to ``last``, cyclically.

    An index is skipped while it equals its right neighbour, so the order stays sorted.
    """
    if missing < 0:
        raise ValueError("the count shape already exceeds the total")
    while missing:
        moved = False
        for i in range(first, last - 1, -1):
            if missing and ascending[i] < ascending[i + 1]:
                ascending[i] += 1
                missing -= 1
                moved = True
        if not moved:
            raise ValueError("cannot reach the total without breaking the order")


def sample_scaled(counts: IntArray, factor: int) -> IntArray:
    """003 sample scaling: every count times ``factor`` (the same users)."""
    return np.asarray(counts, dtype=np.int64) * int(factor)


def user_scaled(counts: IntArray, factor: int) -> IntArray:
    """003 user scaling: each user replicated ``factor`` times (``m_{lambda(l-1)+i} = m_l``)."""
    return np.repeat(np.asarray(counts, dtype=np.int64), int(factor))


def projected_gaussian(
    counts: IntArray,
    rng: np.random.Generator,
    mean: float = SPEED_MEAN,
    variance: float = SPEED_VARIANCE,
    upper: float = UPPER,
) -> list[FloatArray]:
    """Per user, ``m_l`` i.i.d. draws of N(mean, variance) projected onto [0, upper]."""
    draws = np.clip(rng.normal(mean, np.sqrt(variance), int(np.sum(counts))), 0.0, upper)
    return np.split(draws, np.cumsum(counts)[:-1])

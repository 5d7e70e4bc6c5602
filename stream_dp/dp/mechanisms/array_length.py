"""Choices of the array length m_UB from the public counts {m_l} (003 Sec. III, V, VI).

All functions are deterministic in the counts (and epsilon), so they cost no privacy.
Minimisers are computed in exact rational arithmetic and ties go to the smallest m, so
monotonicity statements (Lemma V.3) are not blurred by float rounding.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike, NDArray

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]

M_UB_CHOICES: tuple[str, ...] = ("median", "eq9", "opt", "surrogate")


def _counts(counts: ArrayLike) -> IntArray:
    arr = np.asarray(counts, dtype=np.int64).reshape(-1)
    if arr.size == 0 or np.any(arr < 1):
        raise ValueError("counts must be a non-empty sequence of positive integers")
    return arr


def clipped_total(counts: ArrayLike, m: int) -> int:
    """sum_l Gamma_l = sum_l min(m_l, m)."""
    return int(np.minimum(_counts(counts), m).sum())


def median_length(counts: ArrayLike) -> int:
    """med(m_1..m_L): the value with ceil(L/2) counts >= it (003 Sec. II-A, Lemma III.2)."""
    arr = np.sort(_counts(counts))[::-1]
    return int(arr[math.ceil(arr.size / 2) - 1])


def eq9_length(counts: ArrayLike) -> int:
    """003 eq. (9): argmax over integers m in [m_*, m^*] of sum_l min(m_l, m) / sqrt(m).

    Smallest maximiser. Evaluated for every integer m at once: sum_l min(m_l, m) =
    sum_{m_l < m} m_l + m #{m_l >= m}.
    """
    arr = _counts(counts)
    lo, hi = int(arr.min()), int(arr.max())
    m = np.arange(lo, hi + 1, dtype=np.int64)
    totals = _clipped_totals(arr, m)
    return int(m[int(np.argmax(totals / np.sqrt(m)))])


def _clipped_totals(arr: IntArray, m: IntArray) -> IntArray:
    """sum_l min(m_l, m) for every m in ``m`` (vectorised)."""
    ordered = np.sort(arr)
    prefix = np.concatenate(([0], np.cumsum(ordered)))
    below = np.searchsorted(ordered, m, side="left")  # #{m_l < m}
    return prefix[below] + m * (ordered.size - below)


def minimax_error(counts: ArrayLike, m: int, upper: float, epsilon: float) -> Fraction:
    """E^(eps)(m) of 003 eq. (15), exactly: U (1 - sum Gamma / sum m) + U m / (eps sum Gamma).

    The worst-case clipping error of Lemma V.1 plus E|Lap(U m / sum Gamma / eps)|, eq. (11),
    under the paper's assumption of fully filled arrays.
    """
    arr = _counts(counts)
    total, kept = int(arr.sum()), clipped_total(arr, m)
    u, eps = Fraction(upper), Fraction(epsilon)
    return u * (1 - Fraction(kept, total)) + u * m / (eps * kept)


def opt_length(counts: ArrayLike, epsilon: float, upper: float = 1.0) -> int:
    """m^(eps), eq. (13): the smallest minimiser of eq. (15), searched over {m_l} (Lemma V.2).

    The minimiser does not depend on U (eq. (15) is U times a function of m).
    """
    arr = _counts(counts)
    candidates = sorted(set(arr.tolist()))
    values = [minimax_error(arr, m, upper, epsilon) for m in candidates]
    return candidates[values.index(min(values))]


def surrogate_error(counts: ArrayLike, m: int) -> Fraction:
    """E-bar(m) of 003 problem (19): 1 - sum Gamma / sum m + max(m, m-bar) / m^*, exactly."""
    arr = _counts(counts)
    total = int(arr.sum())
    mean = Fraction(total, arr.size)
    return 1 - Fraction(clipped_total(arr, m), total) + max(Fraction(m), mean) / int(arr.max())


def surrogate_length(counts: ArrayLike) -> int:
    """The smallest integer minimiser of the convex problem (19) over [m_*, m^*].

    E-bar is convex and piecewise linear in m with kinks only at the m_l and at m-bar, so
    the minimum over integers is attained at some m_l, floor(m-bar) or ceil(m-bar). (The
    paper's KKT procedure, Lemma VI.2 and steps (i)-(ii), only considers stationary points
    and the two boundaries; it misses minima at the kinks -- see :func:`paper_surrogate_length`.)
    """
    arr = _counts(counts)
    lo, hi = int(arr.min()), int(arr.max())
    mean = Fraction(int(arr.sum()), arr.size)
    kinks = {math.floor(mean), math.ceil(mean)}
    candidates = sorted({m for m in set(arr.tolist()) | kinks if lo <= m <= hi})
    values = [surrogate_error(arr, m) for m in candidates]
    return candidates[values.index(min(values))]


def paper_surrogate_length(counts: ArrayLike) -> int:
    """003 Sec. VI steps (i)-(ii) as printed (Lemma VI.2), kept to document the erratum.

    (i) if q = sum m_l / m^* is an integer and m_q >= m-bar (m_1 >= ... >= m_L), take m_q;
    (ii) else the better of the boundaries m_* and m^*.
    """
    arr = np.sort(_counts(counts))[::-1]
    total, top = int(arr.sum()), int(arr[0])
    mean = Fraction(total, arr.size)
    q = Fraction(total, top)
    if q.denominator == 1 and 1 <= q <= arr.size and arr[int(q) - 1] >= mean:
        return int(arr[int(q) - 1])
    lo = int(arr[-1])
    return lo if surrogate_error(arr, lo) <= surrogate_error(arr, top) else top


def choose_length(choice: str | int, counts: ArrayLike, epsilon: float) -> int:
    """m_UB for ``choice`` in ("median", "eq9", "opt", "surrogate") or an explicit int >= 1.

    An explicit length above m^* is capped at m^* (003 restricts m_UB to [m_*, m^*]).
    """
    if isinstance(choice, bool):
        raise ValueError(f"m_ub must be one of {M_UB_CHOICES} or a positive int, got {choice!r}")
    if isinstance(choice, int | np.integer):
        if choice < 1:
            raise ValueError(f"m_ub must be >= 1, got {choice}")
        return min(int(choice), int(_counts(counts).max()))
    if choice == "median":
        return median_length(counts)
    if choice == "eq9":
        return eq9_length(counts)
    if choice == "opt":
        return opt_length(counts, epsilon)
    if choice == "surrogate":
        return surrogate_length(counts)
    raise ValueError(f"m_ub must be one of {M_UB_CHOICES} or a positive int, got {choice!r}")

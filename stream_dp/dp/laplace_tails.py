"""Tails of the discrete Laplace noise of :mod:`stream_dp.dp.grid_laplace` (docs/math.md
§14.3, §14.4): what the partition selection's threshold and ``plan`` compute, in plain Python
(no sampler, so ``stream-dp plan`` loads no compiled code)."""

from __future__ import annotations

import math
from fractions import Fraction


def upper_tail(m: int, scale: Fraction) -> float:
    """``P(Z >= m)`` for discrete Laplace of ``scale``: ``exp(-m/t) / (1 + exp(-1/t))`` for
    ``m >= 1`` (the pmf's normaliser is ``(1 - q) / (1 + q)``, ``q = exp(-1/t)``)."""
    t = float(scale)
    q = math.exp(-1.0 / t)
    if m >= 1:
        return math.exp(-m / t) / (1.0 + q)
    return 1.0 - upper_tail(1 - m, scale)


def tail_width(probability: float, scale: Fraction) -> int:
    """The least ``m >= 1`` with ``P(Z >= m) <= probability`` (one side)."""
    if not 0.0 < probability < 0.5:
        raise ValueError(f"probability must be in (0, 0.5), got {probability!r}")
    t = float(scale)
    m = max(1, math.ceil(-t * math.log(probability * (1.0 + math.exp(-1.0 / t)))))
    while m > 1 and upper_tail(m - 1, scale) <= probability:
        m -= 1
    while upper_tail(m, scale) > probability:
        m += 1
    return m

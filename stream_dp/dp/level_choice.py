"""Adaptive resolution under secret routes (docs/math.md §14.10): where the fine level is
released, from the coarse level's noisy counts and public parameters only.

The fine cut ``c``: the vehicle count at which a cell's mean lands within ``USEFUL_SHARE`` of
U with probability at least ``USEFUL_CHANCE`` under its sum's noise alone. A coarse cell whose
noisy count reaches ``c`` is split (its children become the fine level's candidates); a child
is shown when its own noisy count reaches ``c``. ``c`` is a function of public parameters.
"""

from __future__ import annotations

import math
from fractions import Fraction

from stream_dp.dp.laplace_tails import tail_width

#: A mean is useful within this share of U (the issue's and the benchmarks' 10 %).
USEFUL_SHARE = 0.1
#: A fine cell is shown when its mean is useful with at least this probability.
USEFUL_CHANCE = 0.8


def fine_cut_steps(sum_scale: Fraction, sum_steps: int, count_steps: int,
                   share: float = USEFUL_SHARE, chance: float = USEFUL_CHANCE) -> int:  # fmt: skip
    """``c`` in count steps: with ``m`` the least width with ``P(|Z_S| >= m) <= 1 - chance``
    (``Z_S`` the sum's discrete Laplace noise of ``sum_scale`` steps), ``n >= m / (share
    sum_steps)`` vehicles put ``|Z_S| / n`` under ``share`` U with probability ``>= chance``."""
    width = tail_width((1.0 - chance) / 2, sum_scale)
    return math.ceil(width * count_steps / (share * sum_steps))

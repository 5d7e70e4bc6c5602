"""Exact discrete Laplace noise on an integer grid (docs/math.md §14.3).

Secret routes release integers: a noisy vehicle count in steps of ``1/COUNT_STEPS`` and a
noisy sum of per-vehicle means in steps of ``U/SUM_STEPS``. Each is ``value + Z`` with ``Z``
discrete Laplace, ``P(Z = z)`` proportional to ``exp(-|z| / t)``, drawn by CKS20 (Alg. 2)
from the OS CSPRNG (:class:`~stream_dp.dp.randomness.RandomSource`): no floating point
touches the noisy value, so Mironov's attack has nothing to read. A shift of ``d`` grid
steps changes the pmf by at most ``exp(d / t)``: ``t = d / epsilon`` is ``epsilon``-DP.
Its tails (the threshold, the plan) are :mod:`stream_dp.dp.laplace_tails`, which loads no
compiled sampler.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from stream_dp.dp import laplace_kernel
from stream_dp.dp.randomness import RandomSource


def draw_many(source: RandomSource, size: int, scale: Fraction) -> NDArray[np.int64]:
    """``size`` independent discrete Laplace draws of rational ``scale`` (grid steps)."""
    if scale <= 0:
        raise ValueError(f"scale must be > 0, got {scale}")
    kind = np.full(size, laplace_kernel.DRAW, dtype=np.int8)
    numerators = np.full(size, scale.numerator, dtype=np.int64)
    denominators = np.full(size, scale.denominator, dtype=np.int64)
    z, in_python = source.discrete_laplace_batch(kind, numerators, denominators, {})
    for i, value in in_python.items():
        z[i] = value
    return z

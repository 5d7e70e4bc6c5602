"""Smith (2011), Algorithm 2: the exponential-mechanism quantile, on a fine public grid.

Values ``z_1 <= ... <= z_n`` in a public range ``[lo, hi]``. Smith samples a point x with
density proportional to ``exp(-eps |rank(x) - r| / 2)`` (``rank(x) = #{z_i < x}``, r the
target rank) by choosing an inter-value interval with probability proportional to its
length times that weight, then a uniform point in it. We do the same on the data-independent
grid ``x_j = lo + j (hi - lo) / 2^g``: block i = the grid points of rank i, its size is
their number, and :func:`stream_dp.dp.exponential.sample_exponential` picks the block
exactly; the point is then uniform among the block's grid points (one ``randbelow``). The
grid keeps every step exact (no float inverse CDF) and is invisible at ``g = 20``.

Privacy: changing one user moves at most ``sensitivity`` of the values (1, or 2 under
WRAPAROUND arrays), which changes every rank(x) by at most that much, so this is
``eps``-DP (exponential mechanism with utility ``-|rank(x) - r|``, data-independent
counting base measure over the grid).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike

from stream_dp.dp.exponential import sample_exponential
from stream_dp.dp.randomness import RandomSource

#: The output grid has 2^GRID_BITS + 1 points over [lo, hi].
GRID_BITS = 20


def rank_blocks(
    values: ArrayLike, lo: float, hi: float, grid_bits: int = GRID_BITS
) -> tuple[list[int], list[int]]:
    """``(sizes, starts)``: block i holds grid indices ``starts[i] .. starts[i]+sizes[i]-1``.

    Those are exactly the grid points with ``i`` values strictly below them, i = 0..n.
    Values are first clamped into ``[lo, hi]``.
    """
    low, high = Fraction(lo), Fraction(hi)
    if not high > low:
        raise ValueError(f"need lo < hi, got [{lo}, {hi}]")
    steps = 1 << grid_bits
    ordered = np.sort(np.clip(np.asarray(values, dtype=np.float64).reshape(-1), lo, hi))

    def at_or_below(z: float) -> int:  # #{j : x_j <= z}
        return math.floor((Fraction(z) - low) * steps / (high - low)) + 1

    edges = [0] + [at_or_below(z) for z in ordered.tolist()] + [steps + 1]
    sizes = [b - a for a, b in zip(edges[:-1], edges[1:], strict=True)]
    return sizes, edges[:-1]


def grid_point(index: int, lo: float, hi: float, grid_bits: int = GRID_BITS) -> float:
    """``lo + index (hi - lo) / 2^g`` as the nearest float (post-processing of the index)."""
    low, high = Fraction(lo), Fraction(hi)
    return float(low + index * (high - low) / (1 << grid_bits))


def private_quantile(
    values: Sequence[float] | ArrayLike,
    target_rank: int,
    lo: float,
    hi: float,
    epsilon: float,
    source: RandomSource,
    sensitivity: int = 1,
    grid_bits: int = GRID_BITS,
) -> float:
    """An ``epsilon``-DP estimate of the point with ``target_rank`` values below it (Smith 2011)."""
    sizes, starts = rank_blocks(values, lo, hi, grid_bits)
    if not 0 <= target_rank <= len(sizes) - 1:
        raise ValueError(f"target_rank must lie in [0, {len(sizes) - 1}], got {target_rank}")
    scores = [abs(i - target_rank) for i in range(len(sizes))]
    block = sample_exponential(scores, epsilon, source, sizes=sizes, sensitivity=sensitivity)
    index = starts[block] + source.randbelow(sizes[block])
    return grid_point(index, lo, hi, grid_bits)
